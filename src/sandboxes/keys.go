package sandboxes

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Annotations and labels this package reads from a created Sandbox and
// writes on every Sandbox it serves. See docs/sandbox-apiserver.md.
const (
	annotationPrefix = "sandbox.cocoonstack.io/"

	// AnnotationTemplate names the pool template; it wins over
	// spec.podTemplate.spec.containers[0].image. Written back on every
	// served Sandbox.
	AnnotationTemplate = annotationPrefix + "template"
	// AnnotationNet names the pool's network lane; default "none".
	AnnotationNet = annotationPrefix + "net"
	// AnnotationSize names the pool's machine size; default "small".
	AnnotationSize = annotationPrefix + "size"
	// AnnotationTTLSeconds asks for a lease in whole seconds when
	// spec.shutdownTime is unset; 0 or absent takes the node's default.
	AnnotationTTLSeconds = annotationPrefix + "ttl-seconds"

	// AnnotationNode and LabelNode name the node that holds the sandbox.
	AnnotationNode = annotationPrefix + "node"
	LabelNode      = annotationPrefix + "node"
	// AnnotationID is the sandboxd claim id ("sb_…").
	AnnotationID = annotationPrefix + "id"
	// AnnotationDeadline is the lease end the node granted, RFC 3339.
	AnnotationDeadline = annotationPrefix + "deadline"
)

// maxTTLSeconds is the longest lease a node grants; asking for more is
// clamped here too, so no request overflows sandboxd's int.
var maxTTLSeconds = int64(sandboxd.MaxTTL / time.Second)

// poolKeyFor resolves the (template, net, size) pool a Sandbox claims from.
func poolKeyFor(sb *agentsv1beta1.Sandbox) (sandboxd.PoolKey, error) {
	key, ok := PoolKeyOf(sb.Annotations, sb.Spec.PodTemplate.Spec.Containers)
	if !ok {
		return sandboxd.PoolKey{}, fmt.Errorf("the sandbox names no template: set spec.podTemplate.spec.containers[0].image or the %s annotation", AnnotationTemplate)
	}
	return key, nil
}

// PoolKeyOf is the one rule that maps an object's annotations and pod
// containers to a pool key: the template annotation, else the first
// container's image; the net and size annotations, else the node defaults.
// A Sandbox create and the warm-pool driver (for a SandboxTemplate) both
// resolve through it, so a pool warmed for a template is the pool a
// Sandbox of that template claims from. ok is false when neither names a
// template.
func PoolKeyOf(ann map[string]string, containers []corev1.Container) (key sandboxd.PoolKey, ok bool) {
	template := strings.TrimSpace(ann[AnnotationTemplate])
	if template == "" && len(containers) > 0 {
		template = strings.TrimSpace(containers[0].Image)
	}
	if template == "" {
		return sandboxd.PoolKey{}, false
	}
	key = sandboxd.PoolKey{
		Template: template,
		Net:      strings.TrimSpace(ann[AnnotationNet]),
		Size:     strings.TrimSpace(ann[AnnotationSize]),
	}
	return key.WithDefaults(), true
}

// leaseFor resolves the lease in seconds a create asks for (0 = the node's
// default). spec.shutdownTime wins, rounded up to whole seconds from now;
// otherwise the ttl-seconds annotation. A shutdownTime not in the future
// and a malformed or negative annotation are refused, whichever wins, so a
// broken object never spends a VM.
func leaseFor(sb *agentsv1beta1.Sandbox, now time.Time) (int, error) {
	var fromAnnotation int64
	if raw, ok := sb.Annotations[AnnotationTTLSeconds]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("annotation %s must be a non-negative whole number of seconds, got %q", AnnotationTTLSeconds, raw)
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
