package buildsteps

import (
	"context"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestUploadOfABrokenArchiveWaitsForTheGuest: when the archive fails half
// way, upload returns only after the guest has finished with the upload.
// Otherwise the guest, still writing what it had received, could recreate
// the scratch directory after the runner's cleanup removed it (a CI run
// found exactly that leftover).
func TestUploadOfABrokenArchiveWaitsForTheGuest(t *testing.T) {
	var finished atomic.Bool
	var received atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A guest slower than the client: it starts on the body late.
		time.Sleep(200 * time.Millisecond)
		mr, err := r.MultipartReader()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			n, _ := io.Copy(io.Discard, part)
			received.Add(n)
		}
		finished.Store(true)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()

	e, err := newEnvd(Guest{HTTPClient: srv.Client(), BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	src := io.MultiReader(io.LimitReader(zeros{}, 1<<20), failingReader{})
	err = e.upload(context.Background(), "/tmp/e2b-build-x/a.tar", rootUser, src)
	if !errors.Is(err, errArchiveRead) {
		t.Fatalf("upload = %v, want errArchiveRead", err)
	}
	if !finished.Load() {
		t.Fatal("upload returned while the guest was still handling the upload")
	}
	if got := received.Load(); got != 1<<20 {
		t.Errorf("the guest received %d bytes, want the %d read before the failure", got, 1<<20)
	}
}

// TestUploadSendsOneFilePart: the form is the one envd takes, a "file"
// part named after the destination, with the archive's bytes.
func TestUploadSendsOneFilePart(t *testing.T) {
	var got struct {
		path, user, name string
		body             []byte
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.path, got.user = r.URL.Query().Get("path"), r.URL.Query().Get("username")
		mr, err := r.MultipartReader()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var part *multipart.Part
		if part, err = mr.NextPart(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got.name = part.FormName()
		got.body, _ = io.ReadAll(part)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()

	e, err := newEnvd(Guest{HTTPClient: srv.Client(), BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.upload(context.Background(), "/tmp/s/a.tar", rootUser, io.LimitReader(zeros{}, 3000)); err != nil {
		t.Fatal(err)
	}
	if got.path != "/tmp/s/a.tar" || got.user != rootUser || got.name != "file" || len(got.body) != 3000 {
		t.Errorf("got path %q user %q part %q with %d bytes", got.path, got.user, got.name, len(got.body))
	}
}
