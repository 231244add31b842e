package registry

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
)

// Field selector keys a sandbox can be selected by.
const (
	fieldName      = "metadata.name"
	fieldNamespace = "metadata.namespace"
)

// matcher reports whether a sandbox is selected by a request's options.
type matcher func(*agentsv1beta1.Sandbox) bool

// newMatcher builds the filter of a list or watch. Labels are matched over
// the labels the backend reports; fields over metadata.name and
// metadata.namespace, the only two the resource defines.
func newMatcher(options *metainternalversion.ListOptions) (matcher, error) {
	label := labels.Everything()
	field := fields.Everything()
	if options != nil {
		if options.LabelSelector != nil {
			label = options.LabelSelector
		}
		if options.FieldSelector != nil {
			field = options.FieldSelector
		}
	}
	for _, req := range field.Requirements() {
		if req.Field != fieldName && req.Field != fieldNamespace {
			return nil, errors.NewBadRequest(fmt.Sprintf("field selector %q is not supported: sandboxes select by %s and %s", req.Field, fieldName, fieldNamespace))
		}
	}
	if label.Empty() && field.Empty() {
		return func(*agentsv1beta1.Sandbox) bool { return true }, nil
	}
	return func(sb *agentsv1beta1.Sandbox) bool {
		if !label.Matches(labels.Set(sb.Labels)) {
			return false
		}
		return field.Matches(fields.Set{fieldName: sb.Name, fieldNamespace: sb.Namespace})
	}, nil
}

// selectsAll reports whether a request's options select every sandbox.
func selectsAll(options *metainternalversion.ListOptions) bool {
	return options == nil ||
		(options.LabelSelector == nil || options.LabelSelector.Empty()) &&
			(options.FieldSelector == nil || options.FieldSelector.Empty())
}
