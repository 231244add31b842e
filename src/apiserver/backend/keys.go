package backend

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// maxTTLSeconds is the longest lease a node grants; asking for more is
// clamped here too, so no request overflows sandboxd's int.
var maxTTLSeconds = int64(sandboxd.MaxTTL / time.Second)

// poolKeyFor resolves the (template, net, size) pool a Sandbox claims from.
func poolKeyFor(sb *agentsv1beta1.Sandbox) (sandbox.PoolKey, error) {
	var image string
	if cs := sb.Spec.PodTemplate.Spec.Containers; len(cs) > 0 {
		image = cs[0].Image
	}
	key, ok := sandbox.PoolKeyOf(sb.Annotations, image)
	if !ok {
		return sandbox.PoolKey{}, fmt.Errorf("the sandbox names no template: set spec.podTemplate.spec.containers[0].image or the %s annotation", sandbox.AnnotationTemplate)
	}
	return key, nil
}

// leaseFor resolves the lease in seconds a create asks for (0 = the node's
// default). spec.shutdownTime wins, rounded up to whole seconds from now;
// otherwise the ttl-seconds annotation. A shutdownTime not in the future
// and a malformed or negative annotation are refused, whichever wins, so a
// broken object never spends a VM.
func leaseFor(sb *agentsv1beta1.Sandbox, now time.Time) (int, error) {
	var fromAnnotation int64
	if raw, ok := sb.Annotations[sandbox.AnnotationTTLSeconds]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("annotation %s must be a non-negative whole number of seconds, got %q", sandbox.AnnotationTTLSeconds, raw)
		}
		fromAnnotation = n
	}
	if st := sb.Spec.ShutdownTime; st != nil {
		d := st.Sub(now)
		if d <= 0 {
			return 0, fmt.Errorf("spec.shutdownTime %s is not in the future", st.UTC().Format(time.RFC3339))
		}
		secs := int64(math.Ceil(d.Seconds()))
		return int(min(secs, maxTTLSeconds)), nil
	}
	return int(min(fromAnnotation, maxTTLSeconds)), nil
}
