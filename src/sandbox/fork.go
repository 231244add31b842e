package sandbox

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxForkCount bounds the children one fork may make, on every front and
// in the simulator alike (sandboxd's own max_fork_count default).
const MaxForkCount = 16

// forkInfix joins a parent's name and a child's id into the child's name.
const forkInfix = "-fork-"

// ForkPrefix is the claim_ref_prefix a fork of parent sends. sandboxd
// records each child under prefix+id, so ParseClaimRef names the child
// "<parent>-fork-sb-…" in the parent's namespace.
func ForkPrefix(parent ClaimRef) string { return parent.String() + forkInfix }

// CheckFork refuses a fork before any VM is spent: count must be
// 1..MaxForkCount, and the children's names (as long as the parent's id,
// parentID) must still be valid object names.
func CheckFork(parent ClaimRef, parentID string, count int) error {
	if count < 1 || count > MaxForkCount {
		return fmt.Errorf("count must be 1-%d, got %d", MaxForkCount, count)
	}
	if n := len(parent.Name) + len(forkInfix) + len(parentID); n > validation.DNS1123SubdomainMaxLength {
		return fmt.Errorf("name %q is too long to name fork children after", parent.Name)
	}
	return nil
}
