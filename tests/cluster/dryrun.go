package cluster

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
)

// ServedRESTMapping is RESTMapping for a kind the server may not serve yet:
// it retries while discovery does not know the kind, since discovery can lag
// behind a CRD that InstallCRDs has just seen Established, until ctx ends.
// Any other discovery error ends the wait at once.
func (c *Cluster) ServedRESTMapping(ctx context.Context, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	var mapping *meta.RESTMapping
	var lastNoMatch error
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(context.Context) (bool, error) {
		var err error
		mapping, err = c.RESTMapping(gvk)
		if meta.IsNoMatchError(err) {
			lastNoMatch = err
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, fmt.Errorf("wait for the API server to serve %s: %w", gvk, errors.Join(err, lastNoMatch))
	}
	return mapping, nil
}

// Resource returns the dynamic client for gvk's resource, in namespace when
// the resource is namespaced (namespace is ignored otherwise), waiting as
// ServedRESTMapping does for the server to serve the kind.
func (c *Cluster) Resource(ctx context.Context, gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, error) {
	mapping, err := c.ServedRESTMapping(ctx, gvk)
	if err != nil {
		return nil, err
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dynamic.Resource(mapping.Resource).Namespace(namespace), nil
	}
	return c.dynamic.Resource(mapping.Resource), nil
}

// DryRunCreate creates o, in its namespace when its kind is namespaced, with
// dryRun=All and strict field validation: the server decodes, defaults,
// validates against the schema (refusing unknown and duplicate fields) and
// runs admission, and stores nothing. It returns the object as the server
// would have stored it, or the server's refusal, which apierrors' predicates
// (IsInvalid, IsBadRequest) still recognise through the wrapping.
func (c *Cluster) DryRunCreate(ctx context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk := o.GroupVersionKind()
	res, err := c.Resource(ctx, gvk, o.GetNamespace())
	if err != nil {
		return nil, err
	}
	created, err := res.Create(ctx, o, metav1.CreateOptions{
		DryRun:          []string{metav1.DryRunAll},
		FieldValidation: metav1.FieldValidationStrict,
	})
	if err != nil {
		return nil, fmt.Errorf("dry-run create %s %s/%s: %w", gvk.Kind, o.GetNamespace(), o.GetName(), err)
	}
	return created, nil
}
