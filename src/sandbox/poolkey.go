package sandbox

import "strings"

// Defaults a node applies to a pool key that leaves a field empty.
const (
	DefaultNet  = "none"
	DefaultSize = "small"
)

// PoolKey identifies a warm pool: a template (an image reference), a
// network lane and a size tier.
type PoolKey struct {
	Template string `json:"template"`
	Net      string `json:"net"`
	Size     string `json:"size"`
}

// WithDefaults fills an empty net or size the way a node does.
func (k PoolKey) WithDefaults() PoolKey {
	if k.Net == "" {
		k.Net = DefaultNet
	}
	if k.Size == "" {
		k.Size = DefaultSize
	}
	return k
}

// String renders the key as template:net:size for logs and flags.
func (k PoolKey) String() string { return k.Template + ":" + k.Net + ":" + k.Size }

// PoolKeyOf is the one rule that maps an object's annotations and first
// container image to a pool key: the template annotation, else the image;
// the net and size annotations, else the node defaults. A Sandbox create
// and the warm-pool driver (for a SandboxTemplate) both resolve through it,
// so the pool warmed for a template is the pool its Sandboxes claim from.
// ok is false when neither names a template.
func PoolKeyOf(annotations map[string]string, image string) (key PoolKey, ok bool) {
	template := strings.TrimSpace(annotations[AnnotationTemplate])
	if template == "" {
		template = strings.TrimSpace(image)
	}
	if template == "" {
		return PoolKey{}, false
	}
	key = PoolKey{
		Template: template,
		Net:      strings.TrimSpace(annotations[AnnotationNet]),
		Size:     strings.TrimSpace(annotations[AnnotationSize]),
	}
	return key.WithDefaults(), true
}
