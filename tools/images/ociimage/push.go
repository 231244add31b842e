package ociimage

import (
	"context"
	"fmt"

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
	opts = append([]remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain), remote.WithContext(ctx)}, opts...)
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
