package registry

import (
	"context"

	"k8s.io/apimachinery/pkg/api/errors"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// namespaceOf is the request's namespace, "" for a cluster-wide request.
func namespaceOf(ctx context.Context) string {
	return genericapirequest.NamespaceValue(ctx)
}

// requestNamespace is the namespace of a request that must name one: every
// verb on a single sandbox does.
func requestNamespace(ctx context.Context) (string, error) {
	ns, ok := genericapirequest.NamespaceFrom(ctx)
	if !ok || ns == "" {
		return "", errors.NewBadRequest("a namespace is required")
	}
	return ns, nil
}
