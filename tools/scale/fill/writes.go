package fill

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/sandbox-operator/tools/scale/writecount"
)

// Writes is a count of kube-apiserver write requests.
type Writes struct {
	// Total is every write request.
	Total int `json:"total"`
	// ByResource splits Total by resource, as "resource" or
	// "resource/subresource" (e.g. "sandboxwarmpools/status").
	ByResource map[string]int `json:"by_resource"`
}

// Minus is the writes of w that b had not seen yet: w − b per resource,
// leaving out resources with no difference.
func (w Writes) Minus(b Writes) Writes {
	out := Writes{Total: w.Total - b.Total, ByResource: map[string]int{}}
	for k, v := range w.ByResource {
		if d := v - b.ByResource[k]; d != 0 {
			out.ByResource[k] = d
		}
	}
	return out
}

// readWrites scrapes the kube-apiserver's /metrics and sums its write
// requests so far.
func readWrites(ctx context.Context, client kubernetes.Interface) (Writes, error) {
	raw, err := client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return Writes{}, fmt.Errorf("reading the kube-apiserver's /metrics: %w", err)
	}
	w := Writes{ByResource: map[string]int{}}
	for res, v := range writecount.APIWrites(raw) {
		n := int(v)
		w.Total += n
		w.ByResource[res] += n
	}
	return w, nil
}
