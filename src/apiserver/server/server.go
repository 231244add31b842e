package server

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/cocoonstack/sandbox-operator/src/apiserver/api"
	"github.com/cocoonstack/sandbox-operator/src/apiserver/registry"
)

// New builds the server with sandboxes and their subresources installed.
// Run it with PrepareRun().RunWithContext.
func (c *Config) New() (*genericapiserver.GenericAPIServer, error) {
	completed := c.Generic.Complete()
	s, err := completed.New(Title, genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("building the generic apiserver: %w", err)
	}

	storage := map[string]rest.Storage{registry.Resource: registry.NewREST(c.Backend)}
	for path, sub := range registry.NewSubresources(c.Backend) {
		storage[path] = sub
	}
	group := genericapiserver.NewDefaultAPIGroupInfo(api.GroupVersion.Group, api.Scheme, metav1.ParameterCodec, api.Codecs)
	group.VersionedResourcesStorageMap[api.GroupVersion.Version] = storage
	if err := s.InstallAPIGroup(&group); err != nil {
		return nil, fmt.Errorf("installing %s: %w", api.GroupVersion, err)
	}

	if len(c.ReadyChecks) > 0 {
		if err := s.AddReadyzChecks(c.ReadyChecks...); err != nil {
			return nil, fmt.Errorf("adding readiness checks: %w", err)
		}
	}
	return s, nil
}
