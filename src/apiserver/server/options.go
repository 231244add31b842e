package server

import (
	genericoptions "k8s.io/apiserver/pkg/server/options"

	"github.com/cocoonstack/sandbox-operator/src/apiserver/api"
)

// DefaultSecurePort is where the server listens unless --secure-port says
// otherwise; the chart's Service targets it.
const DefaultSecurePort = 6443

// NewRecommendedOptions returns the generic apiserver's recommended option
// sets as this server uses them.
//
// Etcd is removed: the server stores nothing, so it must not accept, or
// show in --help, any storage flag. Admission is removed too: with nothing
// persisted there is no object for mutating or validating webhooks to
// guard, and the namespace-lifecycle plugin would be the only built-in one
// left, which the backend's claim path does not need.
func NewRecommendedOptions() *genericoptions.RecommendedOptions {
	o := genericoptions.NewRecommendedOptions("", api.Codecs.LegacyCodec(api.GroupVersion))
	o.Etcd = nil
	o.Admission = nil
	o.SecureServing.BindPort = DefaultSecurePort
	return o
}
