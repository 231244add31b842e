package buildsteps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
)

// maxErrorBody bounds how much of a refusal is read for its message.
const maxErrorBody = 4 << 10

// errArchiveRead marks an upload that failed on the archive's side: the
// store, not the sandbox.
var errArchiveRead = errors.New("reading the archive")

// upload streams src into the file guestPath (absolute) as user through
// envd's POST /files. The body is a multipart form with one "file" part,
// the form every envd version takes, produced while it is sent so that an
// archive is never held in memory. envd creates missing parent directories
// and gives what it creates to user.
func (e *envd) upload(ctx context.Context, guestPath, user string, src io.Reader) error {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	copied := make(chan error, 1)
	go func() {
		err := writeForm(mw, guestPath, src)
		// The body ends cleanly even when the archive could not be read
		// (see writeForm), so that the guest finishes the upload and
		// answers before upload returns.
		_ = pw.Close()
		copied <- err
	}()

	q := url.Values{"path": {guestPath}, "username": {user}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/files?"+q.Encode(), pr)
	if err != nil {
		_ = pr.CloseWithError(err)
		<-copied
		return fmt.Errorf("uploading %s: %w", guestPath, err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	e.authorize(req.Header, "")
	resp, err := e.g.HTTPClient.Do(req)
	// The transport closes the body when it is done with it; this makes
	// sure a writer blocked on a request that failed early sees it too.
	_ = pr.CloseWithError(io.ErrClosedPipe)
	if srcErr := <-copied; srcErr != nil && !errors.Is(srcErr, io.ErrClosedPipe) {
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
			resp.Body.Close()
		}
		return fmt.Errorf("%w for %s: %w", errArchiveRead, guestPath, srcErr)
	}
	if err != nil {
		return fmt.Errorf("uploading %s: %w", guestPath, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if resp.StatusCode/100 != 2 {
		return guestErrorf("the sandbox refused the upload of the files (HTTP %d): %s", resp.StatusCode, envdMessage(body))
	}
	return nil
}

// writeForm writes the one-file form. The part's file name is the
// destination too, as the SDK sends it; envd takes ?path= first.
//
// When src fails, the form is still ended properly and src's error is
// returned. Aborting the request instead would leave the guest's handler
// running on what it had already received: it creates the parent
// directories and the file, and could do so after the runner's cleanup has
// removed the scratch directory. A complete, if truncated, upload is
// answered only once the guest is done with it, and the cleanup then
// removes what it wrote.
func writeForm(mw *multipart.Writer, guestPath string, src io.Reader) error {
	part, err := mw.CreateFormFile("file", guestPath)
	if err != nil {
		return err
	}
	if _, err := io.Copy(part, src); err != nil {
		if !errors.Is(err, io.ErrClosedPipe) {
			_ = mw.Close()
		}
		return err
	}
	return mw.Close()
}

// envdMessage is the message of envd's JSON error body, or the body itself
// cut short.
func envdMessage(body []byte) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		return e.Message
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(body), "\uFFFD"))
	if len(s) > 256 {
		s = s[:256] + "…"
	}
	return s
}
