package ociimage

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// DefaultRepositoryPrefix is where the project publishes its images:
// <prefix>/<image name>.
const DefaultRepositoryPrefix = "ghcr.io/cocoonstack"

// Title is the image name recorded in an index built by BuildIndex.
func Title(idx v1.ImageIndex) (string, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return "", err
	}
	t := m.Annotations[AnnotationTitle]
	if t == "" {
		return "", fmt.Errorf("the index has no %s annotation", AnnotationTitle)
	}
	return t, nil
}

// Push uploads idx, its manifests and blobs to repository and points every
// tag at it. Credentials come from the default keychain (the Docker config
// file and its credential helpers) unless opts override them. It returns the
// index digest the tags now name.
//
// A registry on a loopback address (127.0.0.0/8, [::1], localhost) is
// reached over plain HTTP when it does not speak TLS; every other registry
// only over HTTPS (see TLSUnlessLoopback). An opts transport replaces that
// rule along with the default transport.
func Push(ctx context.Context, idx v1.ImageIndex, repository string, tags []string, opts ...remote.Option) (v1.Hash, error) {
	if len(tags) == 0 {
		return v1.Hash{}, fmt.Errorf("no tag to push %s to", repository)
	}
	repo, err := name.NewRepository(repository)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("repository %q: %w", repository, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	opts = append([]remote.Option{
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithContext(ctx),
		remote.WithTransport(TLSUnlessLoopback(remote.DefaultTransport)),
	}, opts...)
	for _, t := range tags {
		tag := repo.Tag(t)
		if tag.TagStr() != t {
			return v1.Hash{}, fmt.Errorf("tag %q is not a valid tag", t)
		}
		if err := remote.WriteIndex(tag, idx, opts...); err != nil {
			return v1.Hash{}, fmt.Errorf("pushing %s: %w", tag, err)
		}
	}
	return digest, nil
}

// TLSUnlessLoopback wraps next so that it refuses any plain-HTTP request to a
// host that is not a loopback address.
//
// go-containerregistry picks the scheme from the registry's name: it tries
// HTTPS first and falls back to plain HTTP not only for loopback names but
// also for private (RFC 1918) addresses and *.local names. A push carries
// credentials, so past the machine itself the fallback is refused here:
// a registry on the local network must serve TLS. Loopback stays open so
// that a throwaway registry on 127.0.0.1 (tests, a local cluster) needs no
// certificate.
func TLSUnlessLoopback(next http.RoundTripper) http.RoundTripper {
	return tlsUnlessLoopback{next: next}
}

type tlsUnlessLoopback struct{ next http.RoundTripper }

func (t tlsUnlessLoopback) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != "https" && !IsLoopbackHost(r.URL.Hostname()) {
		return nil, fmt.Errorf("refusing %s://%s: registries other than loopback are reached only over HTTPS", r.URL.Scheme, r.URL.Host)
	}
	return t.next.RoundTrip(r)
}

// IsLoopbackHost reports whether host (no port, no brackets) names this
// machine: "localhost" or a loopback IP address.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
