// Package openapi holds the generated OpenAPI definitions sandbox-apiserver
// publishes: the upstream Sandbox types, the subresource kinds and the
// Kubernetes types they embed. Regenerate with tools/openapi-gen.sh.
package openapi
