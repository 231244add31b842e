package buildstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"k8s.io/utils/clock"
)

const (
	// filesDir is the directory under the store's root, and the URL path
	// element, that archives live under.
	filesDir = "e2b-files"
	// minKeyLen keeps a signing key too short to resist guessing out.
	minKeyLen = 16
	// Archives may hold whatever the user copied into the template, so
	// only the process's own user reads them.
	dirPerm = 0o700
)

// Dir is a Store on a directory every replica of the surface shares. It
// takes the uploads itself, through UploadHandler.
type Dir struct {
	root     string // <dir>/e2b-files
	key      []byte
	maxBytes int64
	ttl      time.Duration
	clock    clock.PassiveClock
	// admit, when set, decides each upload before a byte is read (see
	// SetAdmission).
	admit Admission
}

var _ Store = (*Dir)(nil)

// NewDir opens the store on dir, creating <dir>/e2b-files. key signs the
// upload URLs (every replica must be given the same key), maxBytes bounds
// one archive, and ttl is how long an upload URL stays valid.
func NewDir(dir string, key []byte, maxBytes int64, ttl time.Duration, clk clock.PassiveClock) (*Dir, error) {
	switch {
	case dir == "":
		return nil, errors.New("buildstore: the directory is empty")
	case len(key) < minKeyLen:
		return nil, fmt.Errorf("buildstore: the signing key must be at least %d bytes", minKeyLen)
	case maxBytes < 1:
		return nil, fmt.Errorf("buildstore: the upload bound must be at least 1 byte, got %d", maxBytes)
	case ttl <= 0:
		return nil, fmt.Errorf("buildstore: the upload URL lifetime must be positive, got %s", ttl)
	case clk == nil:
		return nil, errors.New("buildstore: no clock")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("buildstore: resolving %s: %w", dir, err)
	}
	root := filepath.Join(abs, filesDir)
	if err := os.MkdirAll(root, dirPerm); err != nil {
		return nil, fmt.Errorf("buildstore: creating %s: %w", root, err)
	}
	return &Dir{root: root, key: append([]byte(nil), key...), maxBytes: maxBytes, ttl: ttl, clock: clk}, nil
}

// templateDir is where a validated template id's archives live.
func (d *Dir) templateDir(templateID string) string {
	return filepath.Join(d.root, templateID)
}

// archivePath is where a validated (template id, hash) archive lives.
func (d *Dir) archivePath(templateID, hash string) string {
	return filepath.Join(d.root, templateID, hash)
}

// UploadLink reports a stored archive as present, and otherwise hands out
// a signed URL on base that UploadHandler accepts until the ttl passes.
func (d *Dir) UploadLink(_ context.Context, base, templateID, hash string) (Link, error) {
	if err := checkIDs(templateID, hash); err != nil {
		return Link{}, err
	}
	present, err := d.present(templateID, hash)
	if err != nil {
		return Link{}, err
	}
	if present {
		return Link{Present: true}, nil
	}
	u, err := d.signedURL(base, templateID, hash)
	if err != nil {
		return Link{}, err
	}
	return Link{URL: u}, nil
}

func (d *Dir) present(templateID, hash string) (bool, error) {
	fi, err := os.Stat(d.archivePath(templateID, hash))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("buildstore: checking archive %s/%s: %w", templateID, hash, err)
	}
	return fi.Mode().IsRegular(), nil
}

// Open reads an archive back.
func (d *Dir) Open(_ context.Context, templateID, hash string) (io.ReadCloser, error) {
	if err := checkIDs(templateID, hash); err != nil {
		return nil, err
	}
	f, err := os.Open(d.archivePath(templateID, hash))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s/%s", ErrNotFound, templateID, hash)
	}
	if err != nil {
		return nil, fmt.Errorf("buildstore: opening archive %s/%s: %w", templateID, hash, err)
	}
	return f, nil
}

// DeleteTemplate removes the template's directory, archives and any
// upload still being written. A template with none is not an error.
func (d *Dir) DeleteTemplate(_ context.Context, templateID string) error {
	if err := checkTemplateID(templateID); err != nil {
		return err
	}
	if err := os.RemoveAll(d.templateDir(templateID)); err != nil {
		return fmt.Errorf("buildstore: deleting the archives of %s: %w", templateID, err)
	}
	return nil
}

// Usage counts the template's stored archives; uploads still being
// written are not stored yet and do not count.
func (d *Dir) Usage(_ context.Context, templateID string) (Usage, error) {
	if err := checkTemplateID(templateID); err != nil {
		return Usage{}, err
	}
	entries, err := os.ReadDir(d.templateDir(templateID))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Usage{}, nil
	case err != nil:
		return Usage{}, fmt.Errorf("buildstore: listing the archives of %s: %w", templateID, err)
	}
	var u Usage
	for _, e := range entries {
		if checkHash(e.Name()) != nil || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted since the listing
		}
		if err != nil {
			return Usage{}, fmt.Errorf("buildstore: reading archive %s/%s: %w", templateID, e.Name(), err)
		}
		u.Files++
		u.Bytes += fi.Size()
	}
	return u, nil
}
