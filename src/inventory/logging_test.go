package inventory_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/client-go/tools/cache"

	"github.com/cocoonstack/sandbox-operator/src/inventory"
)

// handlerSource hands the store's event handler to the test.
type handlerSource struct{ cache.ResourceEventHandler }

func (s *handlerSource) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	s.ResourceEventHandler = h
	return nil, nil
}

func TestUnreadableInventoryGoesToTheInjectedLogger(t *testing.T) {
	var logs bytes.Buffer
	src := &handlerSource{}
	s, err := inventory.New(inventory.Config{Source: src, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	src.OnAdd("not an inventory", false)
	src.OnDelete(42)
	if got := strings.Count(logs.String(), "level=ERROR"); got != 2 || !strings.Contains(logs.String(), "unexpected object string") {
		t.Fatalf("logged %q, want two errors naming the objects", logs.String())
	}
	if len(s.Nodes()) != 0 {
		t.Fatalf("an unreadable object became a node: %v", s.Nodes())
	}
}
