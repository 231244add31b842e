// Package ociimage builds the project's distroless-style container images
// without a container daemon: one static Go binary per platform, on an empty
// base with a non-root user, assembled into a multi-platform OCI image index
// with go-containerregistry, written to an OCI layout and pushed to a
// registry.
//
// Builds are reproducible: every timestamp in the layer, the config and the
// history is the Spec's Created time (the Unix epoch unless set), tar entries
// are written in a fixed order with fixed owners and modes, and the layer is
// gzipped here with fixed header fields, so the same binaries and Spec always
// give the same index digest.
package ociimage
