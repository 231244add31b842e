package envd

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"connectrpc.com/connect"
)

// uploadEntry is one written file in the POST /files answer.
type uploadEntry struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// errUploadTooLarge marks an upload past Config.MaxUploadBytes.
var errUploadTooLarge = errors.New("upload exceeds the size limit")

// fileRequest does what GET and POST /files share: the signed-URL or token
// check, then the user, whose home relative paths resolve against. It
// answers the refusal itself and reports whether the request may go on.
func (g *Guest) fileRequest(w http.ResponseWriter, r *http.Request, op string) (string, bool) {
	if err := g.authorizeFileURL(r, op); err != nil {
		writeJSONError(w, http.StatusUnauthorized, err.Error())
		return "", false
	}
	user, err := g.resolveUser(r.URL.Query().Get("username"))
	if err != nil {
		writeJSONError(w, http.StatusUnauthorized, err.Error())
		return "", false
	}
	return user, true
}

// serveDownload streams one file. Ranges and conditional requests work
// (http.ServeContent); the content type comes from the extension or a sniff.
func (g *Guest) serveDownload(w http.ResponseWriter, r *http.Request) {
	user, ok := g.fileRequest(w, r, opRead)
	if !ok {
		return
	}
	guestPath := r.URL.Query().Get("path")
	p, err := g.home.resolve(user, guestPath)
	if err != nil {
		writeFailure(w, fmt.Errorf("path %s: %w", quotePath(guestPath), err))
		return
	}
	f, err := g.home.root.Open(p.rel)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			writeJSONError(w, http.StatusNotFound, fmt.Sprintf("path %q does not exist", p.guest()))
			return
		}
		writeFailure(w, err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		writeFailure(w, err)
		return
	}
	if st.IsDir() {
		writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("path %q is a directory", p.guest()))
		return
	}
	name := path.Base(p.guest())
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	w.Header().Set("Cache-Control", "no-store")
	http.ServeContent(w, r, name, st.ModTime(), f)
}

// serveUpload writes the request body to files: a raw
// application/octet-stream body goes to ?path=, a multipart form writes
// every "file" part, to ?path= or, without it, to the part's file name
// (which the SDK sets to the destination path). Parent directories are
// created; existing files are overwritten. A gzip
// Content-Encoding is decoded; the decoded size counts against the limit.
func (g *Guest) serveUpload(w http.ResponseWriter, r *http.Request) {
	user, ok := g.fileRequest(w, r, opWrite)
	if !ok {
		return
	}
	body, err := g.uploadBody(w, r)
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	defer body.Close()

	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var written []uploadEntry
	switch {
	case mediaType == "application/octet-stream":
		written, err = g.uploadRaw(r, user, body)
	case strings.HasPrefix(mediaType, "multipart/"):
		written, err = g.uploadMultipart(r, user, body)
	default:
		err = newFailure(http.StatusBadRequest, connect.CodeInvalidArgument,
			fmt.Errorf("unsupported content type %q: expected multipart/form-data or application/octet-stream", mediaType))
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) || errors.Is(err, errUploadTooLarge) {
			writeJSONError(w, http.StatusRequestEntityTooLarge,
				fmt.Sprintf("upload exceeds %d bytes", g.cfg.MaxUploadBytes))
			return
		}
		writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusOK, written)
}

// uploadBody bounds the request body and undoes a gzip Content-Encoding.
func (g *Guest) uploadBody(w http.ResponseWriter, r *http.Request) (io.ReadCloser, error) {
	limited := http.MaxBytesReader(w, r.Body, g.cfg.MaxUploadBytes)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		return limited, nil
	case "gzip":
		zr, err := gzip.NewReader(limited)
		if err != nil {
			return nil, fmt.Errorf("decoding gzip body: %w", err)
		}
		return &decodedBody{r: &capReader{r: zr, left: g.cfg.MaxUploadBytes}, closers: []io.Closer{zr, limited}}, nil
	default:
		return nil, fmt.Errorf("unsupported content encoding %q", enc)
	}
}

func (g *Guest) uploadRaw(r *http.Request, user string, body io.Reader) ([]uploadEntry, error) {
	q := r.URL.Query()
	if !q.Has("path") || q.Get("path") == "" {
		return nil, newFailure(http.StatusBadRequest, connect.CodeInvalidArgument,
			errors.New("the path query parameter is required for a raw upload"))
	}
	entry, err := g.writeUpload(user, q.Get("path"), body)
	if err != nil {
		return nil, err
	}
	return []uploadEntry{entry}, nil
}

func (g *Guest) uploadMultipart(r *http.Request, user string, body io.Reader) ([]uploadEntry, error) {
	r.Body = io.NopCloser(body)
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, newFailure(http.StatusBadRequest, connect.CodeInvalidArgument, fmt.Errorf("reading multipart form: %w", err))
	}
	q := r.URL.Query()
	written := []uploadEntry{}
	seen := map[string]bool{}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, newFailure(http.StatusBadRequest, connect.CodeInvalidArgument, fmt.Errorf("reading multipart form: %w", err))
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		dest := q.Get("path")
		if dest == "" {
			dest = rawFileName(part.Header.Get("Content-Disposition"))
		}
		if dest == "" {
			part.Close()
			return nil, newFailure(http.StatusBadRequest, connect.CodeInvalidArgument,
				errors.New("a file part names no destination and no path query parameter is set"))
		}
		if seen[dest] {
			part.Close()
			return nil, newFailure(http.StatusBadRequest, connect.CodeInvalidArgument,
				fmt.Errorf("more than one file for path %q in one upload", dest))
		}
		seen[dest] = true
		entry, err := g.writeUpload(user, dest, part)
		part.Close()
		if err != nil {
			return nil, err
		}
		written = append(written, entry)
	}
	return written, nil
}

// rawFileName is the filename parameter of a part's Content-Disposition
// with its directories kept; multipart.Part.FileName strips them, but the
// SDK puts the whole destination path there.
func rawFileName(disposition string) string {
	_, params, err := mime.ParseMediaType(disposition)
	if err != nil {
		return ""
	}
	return params["filename"]
}

// writeUpload writes src to the guest path dest (resolved for user) in
// place, as envd does, so
// a directory watcher sees the file's own name being created and written.
// A file this upload created is removed again if the upload fails, so an
// oversized or broken upload leaves nothing new behind.
func (g *Guest) writeUpload(user, dest string, src io.Reader) (uploadEntry, error) {
	p, err := g.home.resolve(user, dest)
	if err != nil {
		return uploadEntry{}, fmt.Errorf("path %s: %w", quotePath(dest), err)
	}
	rel, root := p.rel, g.home.root
	if st, err := root.Stat(rel); rel == "." || (err == nil && st.IsDir()) {
		return uploadEntry{}, newFailure(http.StatusBadRequest, connect.CodeInvalidArgument,
			fmt.Errorf("path %q is a directory", p.guest()))
	}
	if err := g.home.mkdirAll(user, filepath.Dir(rel)); err != nil {
		return uploadEntry{}, fmt.Errorf("creating parent directories of %q: %w", p.guest(), err)
	}
	_, statErr := root.Lstat(rel)
	created := errors.Is(statErr, os.ErrNotExist)
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return uploadEntry{}, fmt.Errorf("opening %q: %w", p.guest(), err)
	}
	var chownErr error
	if created {
		chownErr = g.home.chown(user, rel)
	}
	_, copyErr := io.Copy(f, src)
	if err := errors.Join(chownErr, copyErr, f.Close()); err != nil {
		if created {
			_ = root.Remove(rel)
		}
		return uploadEntry{}, fmt.Errorf("writing %q: %w", p.guest(), err)
	}
	return uploadEntry{Path: p.guest(), Name: path.Base(p.guest()), Type: "file"}, nil
}

// capReader fails once more than left bytes have been read, bounding what
// a small compressed body may expand to.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, errUploadTooLarge
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n, errUploadTooLarge
	}
	return n, err
}

// decodedBody is a decoding reader that closes its whole chain.
type decodedBody struct {
	r       io.Reader
	closers []io.Closer
}

func (d *decodedBody) Read(p []byte) (int, error) { return d.r.Read(p) }

func (d *decodedBody) Close() error {
	var errs []error
	for _, c := range d.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
