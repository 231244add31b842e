package apiserverenv

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPollOK(t *testing.T) {
	running := func() error { return nil }

	t.Run("waits for 200", func(t *testing.T) {
		var probes atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if probes.Add(1) < 3 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}))
		defer srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := pollOK(ctx, srv.Client(), srv.URL+"/readyz", running); err != nil {
			t.Fatal(err)
		}
		if n := probes.Load(); n != 3 {
			t.Errorf("%d probes, want 3", n)
		}
	})

	t.Run("names the last answer at the deadline", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		defer srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := pollOK(ctx, srv.Client(), srv.URL+"/readyz", running)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "503 Service Unavailable") {
			t.Errorf("err = %v, want the deadline and the last status", err)
		}
	})

	t.Run("ends when the process exits", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			t.Error("probed a server whose process had exited")
		}))
		defer srv.Close()
		exited := errors.New("sandbox-apiserver exited: exit status 1")
		err := pollOK(context.Background(), srv.Client(), srv.URL, func() error { return exited })
		if !errors.Is(err, exited) {
			t.Errorf("err = %v, want %v", err, exited)
		}
	})
}
