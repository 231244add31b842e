package buildstore

import (
	"context"
	"errors"
	"io"
)

var (
	// ErrNotFound is wrapped by Open when the archive is not stored.
	ErrNotFound = errors.New("buildstore: archive not found")
	// ErrInvalid is wrapped by every method given a template id or hash
	// that cannot name an archive.
	ErrInvalid = errors.New("buildstore: invalid template id or files hash")
)

// Link is where the SDK uploads one archive.
type Link struct {
	// Present says the archive is already stored: the SDK uploads nothing.
	Present bool
	// URL is where the SDK PUTs the archive when it is not present.
	URL string
	// Headers are sent with the PUT, as the URL's signature needs them.
	Headers map[string]string
}

// Store keeps build archives, keyed by template id and files hash.
type Store interface {
	// UploadLink says whether the archive is already stored and, if not,
	// hands out a URL the SDK PUTs it to. base is the absolute URL
	// (scheme://host) the caller reached the e2b surface at; the
	// directory store builds its signed URL on it, the S3 store ignores
	// it.
	UploadLink(ctx context.Context, base, templateID, hash string) (Link, error)
	// Open reads an archive back; one that is not stored is an error
	// wrapping ErrNotFound.
	Open(ctx context.Context, templateID, hash string) (io.ReadCloser, error)
	// DeleteTemplate removes every archive of a template.
	DeleteTemplate(ctx context.Context, templateID string) error
	// Usage counts a template's stored archives and their bytes, which
	// the surface's per-namespace upload bounds add up.
	Usage(ctx context.Context, templateID string) (Usage, error)
}

// Usage is what a set of archives takes.
type Usage struct {
	Files int
	Bytes int64
}

// Add is the usage of both.
func (u Usage) Add(o Usage) Usage { return Usage{Files: u.Files + o.Files, Bytes: u.Bytes + o.Bytes} }
