// Package server assembles sandbox-apiserver: the generic apiserver from
// k8s.io/apiserver, configured from the recommended option sets minus etcd
// and admission, serving agents.x-k8s.io/v1beta1 sandboxes from a Backend.
//
// The generic server brings secure serving (self-signed under --cert-dir when
// no certificate is given), delegated authentication and authorization,
// /healthz, /livez, /readyz, /metrics, optional /debug/pprof, discovery and
// the OpenAPI v2 and v3 documents.
package server
