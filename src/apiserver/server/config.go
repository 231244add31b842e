package server

import (
	"fmt"
	"net"
	"os"

	"k8s.io/apimachinery/pkg/util/errors"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/compatibility"

	"github.com/cocoonstack/sandbox-operator/src/apiserver/api"
	"github.com/cocoonstack/sandbox-operator/src/apiserver/api/openapi"
	"github.com/cocoonstack/sandbox-operator/src/apiserver/registry"
)

// Title names the server in its OpenAPI documents.
const Title = "sandbox-apiserver"

// Config is everything New needs.
type Config struct {
	// Generic is the generic apiserver's configuration, filled from the
	// recommended options by NewConfig. Tests may adjust it before New.
	Generic *genericapiserver.RecommendedConfig
	// Backend answers every sandbox request.
	Backend registry.Backend
	// ReadyChecks join /readyz, e.g. a check that the inventory informer
	// has synced, so no replica takes traffic from an empty view.
	ReadyChecks []healthz.HealthChecker
}

// NewConfig validates o and applies it to a fresh generic configuration.
// When o names no serving certificate it self-signs one into its cert
// directory, valid for localhost, the host name and 127.0.0.1.
func NewConfig(o *genericoptions.RecommendedOptions, backend registry.Backend) (*Config, error) {
	if backend == nil {
		return nil, fmt.Errorf("sandbox-apiserver needs a backend")
	}
	if errs := o.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("invalid options: %w", errors.NewAggregate(errs))
	}
	alternateDNS := []string{}
	if host, err := os.Hostname(); err == nil && host != "" {
		alternateDNS = append(alternateDNS, host)
	}
	if err := o.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", alternateDNS, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("creating a self-signed serving certificate: %w", err)
	}

	generic := genericapiserver.NewRecommendedConfig(api.Codecs)
	generic.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()

	namer := openapinamer.NewDefinitionNamer(api.Scheme)
	generic.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, namer)
	generic.OpenAPIConfig.Info.Title = Title
	generic.OpenAPIConfig.GetDefinitionName = definitionNamer()
	generic.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, namer)
	generic.OpenAPIV3Config.Info.Title = Title
	generic.OpenAPIV3Config.GetDefinitionName = definitionNamer()
	// DefaultOpenAPIV3Config resolved its references with the namer it was
	// given; resolve them again with the one that knows the upstream types.
	generic.OpenAPIV3Config.Definitions = openapi.GetOpenAPIDefinitions(v3Ref(generic.OpenAPIV3Config.GetDefinitionName))

	if err := o.ApplyTo(generic); err != nil {
		return nil, fmt.Errorf("applying options: %w", err)
	}
	return &Config{Generic: generic, Backend: backend}, nil
}
