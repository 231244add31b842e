package inventory

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// DefaultStaleAfter is --inventory-stale-after's default: three missed
// publishes at vk-sandbox's 30 s cadence.
const DefaultStaleAfter = 90 * time.Second

// StaleAfterFlag is the flag every binary that reads inventory exposes.
const StaleAfterFlag = "inventory-stale-after"

// Options are the inventory settings a binary takes from its command line.
type Options struct {
	// StaleAfter drops a node once its publishedAt trails the newest
	// publish in the fleet by more than this.
	StaleAfter time.Duration
}

// NewOptions returns the defaults.
func NewOptions() *Options { return &Options{StaleAfter: DefaultStaleAfter} }

// AddFlags registers --inventory-stale-after on fs with the same name, default
// and help text in every binary.
func AddFlags(fs *pflag.FlagSet, o *Options) {
	if o.StaleAfter == 0 {
		o.StaleAfter = DefaultStaleAfter
	}
	fs.DurationVar(&o.StaleAfter, StaleAfterFlag, o.StaleAfter,
		"Drop a node from this process's inventory reads once its NodeInventory publishedAt trails the newest publish in the fleet by more than this; set the same value on every binary that reads inventory. An inventory without publishedAt is stale.")
}

// Validate rejects a window that would drop every node between publishes.
func (o *Options) Validate() error {
	if o.StaleAfter <= 0 {
		return fmt.Errorf("--%s must be positive, got %v", StaleAfterFlag, o.StaleAfter)
	}
	return nil
}
