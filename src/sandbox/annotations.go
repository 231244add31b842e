package sandbox

// Annotations and labels the Kubernetes front reads from a created Sandbox
// and writes on every Sandbox it serves (see docs/sandbox-apiserver.md);
// the warm-pool driver reads the pool-key ones from a SandboxTemplate.
const (
	annotationPrefix = "sandbox.cocoonstack.io/"
	// AnnotationTemplate names the pool template; it wins over the first
	// container's image. Written back on every served Sandbox.
	AnnotationTemplate = annotationPrefix + "template"
	// AnnotationNet names the pool's network lane; default DefaultNet.
	AnnotationNet = annotationPrefix + "net"
	// AnnotationSize names the pool's size tier; default DefaultSize.
	AnnotationSize = annotationPrefix + "size"
	// AnnotationTTLSeconds asks for a lease in whole seconds when
	// spec.shutdownTime is unset; 0 or absent takes the node's default.
	AnnotationTTLSeconds = annotationPrefix + "ttl-seconds"
	// AnnotationNode and LabelNode name the node that holds the sandbox.
	AnnotationNode = annotationPrefix + "node"
	LabelNode      = annotationPrefix + "node"
	// AnnotationID is the sandbox id in its sandboxd spelling ("sb_…").
	AnnotationID = annotationPrefix + "id"
	// AnnotationDeadline is the lease end the node granted, RFC 3339.
	AnnotationDeadline = annotationPrefix + "deadline"
)
