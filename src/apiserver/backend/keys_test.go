package backend

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

func TestLeaseFor(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		shutdown *time.Time
		ann      map[string]string
		want     int
		wantErr  bool
	}{
		{name: "neither", want: 0},
		{name: "annotation", ann: map[string]string{sandbox.AnnotationTTLSeconds: "600"}, want: 600},
		{name: "annotation zero", ann: map[string]string{sandbox.AnnotationTTLSeconds: "0"}, want: 0},
		{name: "annotation spaces", ann: map[string]string{sandbox.AnnotationTTLSeconds: " 42 "}, want: 42},
		{name: "annotation clamped", ann: map[string]string{sandbox.AnnotationTTLSeconds: "99999999999999"}, want: int(maxTTLSeconds)},
		{name: "annotation negative", ann: map[string]string{sandbox.AnnotationTTLSeconds: "-1"}, wantErr: true},
		{name: "annotation malformed", ann: map[string]string{sandbox.AnnotationTTLSeconds: "1.5"}, wantErr: true},
		{name: "annotation empty", ann: map[string]string{sandbox.AnnotationTTLSeconds: ""}, wantErr: true},
		{name: "shutdown whole seconds", shutdown: ptr(now.Add(time.Minute)), want: 60},
		{name: "shutdown rounds up", shutdown: ptr(now.Add(time.Minute + time.Nanosecond)), want: 61},
		{name: "shutdown sub-second", shutdown: ptr(now.Add(time.Millisecond)), want: 1},
		{name: "shutdown wins", shutdown: ptr(now.Add(time.Minute)), ann: map[string]string{sandbox.AnnotationTTLSeconds: "5"}, want: 60},
		{name: "shutdown now", shutdown: ptr(now), wantErr: true},
		{name: "shutdown past", shutdown: ptr(now.Add(-time.Hour)), wantErr: true},
		{name: "shutdown clamped", shutdown: ptr(now.Add(48 * time.Hour)), want: int(maxTTLSeconds)},
		{name: "shutdown with a malformed annotation", shutdown: ptr(now.Add(time.Minute)), ann: map[string]string{sandbox.AnnotationTTLSeconds: "x"}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := newSandbox("ns", "n", "base")
			sb.Annotations = tc.ann
			if tc.shutdown != nil {
				sb.Spec.ShutdownTime = timePtr(*tc.shutdown)
			}
			got, err := leaseFor(sb, now)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("leaseFor = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestPoolKeyFor(t *testing.T) {
	sb := newSandbox("ns", "n", "img:1")
	if k, err := poolKeyFor(sb); err != nil || k != (sandbox.PoolKey{Template: "img:1", Net: "none", Size: "small"}) {
		t.Fatalf("image only: %v, %v", k, err)
	}
	sb.Annotations = map[string]string{sandbox.AnnotationTemplate: "tpl", sandbox.AnnotationNet: "egress", sandbox.AnnotationSize: "large"}
	if k, err := poolKeyFor(sb); err != nil || k != (sandbox.PoolKey{Template: "tpl", Net: "egress", Size: "large"}) {
		t.Fatalf("annotations: %v, %v", k, err)
	}
	if _, err := poolKeyFor(newSandbox("ns", "n", "  ")); err == nil {
		t.Fatal("a blank image named a template")
	}
}

func TestStatusError(t *testing.T) {
	svc := &Service{cfg: Config{RetryAfterSeconds: 3, Logger: slog.New(slog.DiscardHandler)}}
	api := func(status int, msg string) error {
		return &sandboxd.APIError{Status: status, Message: msg, Op: "POST /v1/x"}
	}
	cases := []struct {
		err   error
		check func(error) bool
	}{
		{api(http.StatusNotFound, "not found"), apierrors.IsNotFound},
		{api(http.StatusBadRequest, "count must be 1-16"), apierrors.IsBadRequest},
		{api(http.StatusConflict, "egress lane"), apierrors.IsConflict},
		{api(http.StatusTooManyRequests, "full"), apierrors.IsTooManyRequests},
		{api(http.StatusUnauthorized, "bad token"), apierrors.IsServiceUnavailable},
		{api(http.StatusInternalServerError, "boom"), apierrors.IsServiceUnavailable},
		{errors.New("sandboxd: POST /v1/claim at 10.0.0.5:7777: connection refused"), apierrors.IsServiceUnavailable},
		{&sandboxd.APIError{Status: http.StatusNotFound, Unsupported: true}, apierrors.IsMethodNotSupported},
		{api(http.StatusPreconditionFailed, "digest"), apierrors.IsConflict},
	}
	for _, tc := range cases {
		got := svc.statusError(tc.err, "op", "name")
		if !tc.check(got) {
			t.Errorf("%v → %v", tc.err, got)
		}
		if s := got.Error(); containsAny(s, "10.0.0.5", "boom", "bad token") {
			t.Errorf("%v → %q leaks node detail", tc.err, s)
		}
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
