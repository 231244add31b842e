package buildstore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
)

// UploadHandler serves PUT /e2b-files/{templateID}/{hash}, the signed
// URLs UploadLink hands out. It needs no API key: the signature is the
// authorization. An archive appears under its name only once its whole
// body arrived and reached the disk, so a reader never sees part of one
// and a failed upload leaves nothing behind.
func (d *Dir) UploadHandler() http.Handler {
	return http.HandlerFunc(d.serveUpload)
}

func (d *Dir) serveUpload(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		w.Header().Set("Allow", http.MethodPut)
		writeError(w, http.StatusMethodNotAllowed, "uploads are PUT")
		return
	}
	templateID, hash, ok := parseUploadPath(r.URL.Path)
	if !ok {
		writeError(w, http.StatusNotFound, "no such upload")
		return
	}
	if err := d.verify(r.URL.Query(), templateID, hash); err != nil {
		writeError(w, http.StatusForbidden, err.Error())
		return
	}
	// Refused before a byte is read: the declared size alone is enough.
	// Closing the connection keeps the server from draining the body it
	// refused (it would for a small one, to reuse the connection).
	if r.ContentLength > d.maxBytes {
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestEntityTooLarge, tooLarge(d.maxBytes))
		return
	}
	limit, tooBig, done := d.maxBytes, tooLarge(d.maxBytes), func(bool) {}
	if d.admit != nil {
		admitted, admittedDone, err := d.admit(r.Context(), templateID, hash, r.ContentLength)
		var refused *Refusal
		switch {
		case errors.As(err, &refused):
			w.Header().Set("Connection", "close")
			writeError(w, refused.Status, refused.Message)
			return
		case err != nil:
			slog.Default().Error("buildstore: deciding an upload failed", "template", templateID, "hash", hash, "err", err)
			writeError(w, http.StatusInternalServerError, "the upload could not be admitted")
			return
		}
		done = admittedDone
		if admitted < limit {
			limit, tooBig = admitted, fmt.Sprintf("the archive is larger than the %d bytes left to this namespace's template uploads", admitted)
		}
	}
	status, err := d.receive(w, r, templateID, hash, limit, tooBig)
	done(err == nil)
	if err != nil {
		if status == http.StatusInternalServerError {
			// The client is told nothing about the server's disk; the
			// operator is.
			slog.Default().Error("buildstore: storing an uploaded archive failed",
				"template", templateID, "hash", hash, "err", err)
			writeError(w, status, "the archive could not be stored")
			return
		}
		writeError(w, status, err.Error())
		return
	}
	w.WriteHeader(http.StatusOK)
}

// parseUploadPath splits /e2b-files/{templateID}/{hash}; ok is false for
// any path that does not name a valid archive.
func parseUploadPath(p string) (templateID, hash string, ok bool) {
	rest, ok := strings.CutPrefix(p, "/"+filesDir+"/")
	if !ok {
		return "", "", false
	}
	templateID, hash, ok = strings.Cut(rest, "/")
	if !ok || checkIDs(templateID, hash) != nil {
		return "", "", false
	}
	return templateID, hash, true
}

// receive writes the body, at most limit bytes of it (tooBig says so
// past it), to a temporary file beside the archive and renames it into
// place once complete and synced; on any failure the temporary file goes.
// It returns the status to answer a failure with.
func (d *Dir) receive(w http.ResponseWriter, r *http.Request, templateID, hash string, limit int64, tooBig string) (int, error) {
	dir := d.templateDir(templateID)
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return http.StatusInternalServerError, fmt.Errorf("creating the template directory: %w", err)
	}
	// The leading dot keeps a partial upload from ever matching a hash,
	// so Open and UploadLink cannot see it.
	tmp, err := os.CreateTemp(dir, "."+hash+".*.part")
	if err != nil {
		return http.StatusInternalServerError, fmt.Errorf("creating a temporary file: %w", err)
	}
	kept := false
	defer func() {
		if !kept {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	// MaxBytesReader also has the server close the connection rather
	// than drain an oversized body.
	if _, err := io.Copy(tmp, http.MaxBytesReader(w, r.Body, limit)); err != nil {
		var over *http.MaxBytesError
		if errors.As(err, &over) {
			return http.StatusRequestEntityTooLarge, errors.New(tooBig)
		}
		var we *os.PathError
		if errors.As(err, &we) && we.Op == "write" {
			return http.StatusInternalServerError, fmt.Errorf("writing the archive: %w", err)
		}
		return http.StatusBadRequest, errors.New("the upload body ended before it was complete")
	}
	if err := tmp.Sync(); err != nil {
		return http.StatusInternalServerError, fmt.Errorf("syncing the archive: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return http.StatusInternalServerError, fmt.Errorf("closing the archive: %w", err)
	}
	if err := os.Rename(tmp.Name(), d.archivePath(templateID, hash)); err != nil {
		return http.StatusInternalServerError, fmt.Errorf("moving the archive into place: %w", err)
	}
	kept = true
	syncDir(dir)
	return http.StatusOK, nil
}

// syncDir makes the rename durable. It is best effort: some shared
// filesystems refuse to sync a directory, and the archive's own bytes are
// already on disk, so a failure here must not fail the upload.
func syncDir(dir string) {
	f, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = f.Sync()
	_ = f.Close()
}

func tooLarge(maxBytes int64) string {
	return fmt.Sprintf("the archive is larger than the %d bytes an upload may be", maxBytes)
}
