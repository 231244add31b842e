package buildsteps

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
)

// TestDescribe: what a user is told of each kind of failure; transport
// details never reach them.
func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("step: %w", context.Canceled), "the build was canceled"},
		{fmt.Errorf("step: %w", context.DeadlineExceeded), "the build timed out"},
		{connect.NewError(connect.CodeInvalidArgument, errors.New(`cwd "/x" does not exist`)), `the sandbox refused it: cwd "/x" does not exist`},
		{connect.NewError(connect.CodeUnavailable, errors.New("dial tcp 10.0.0.7:4000: connection refused")), "the sandbox could not be reached"},
		{errors.New("read tcp 10.0.0.7:4000: reset"), "the sandbox could not be reached"},
		{guestErrorf("the sandbox refused the upload"), "the sandbox refused the upload"},
	} {
		if got := describe(c.err); got != c.want {
			t.Errorf("describe(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	se := stepError("4", fmt.Errorf("x: %w", context.Canceled)).(*StepError)
	if se.Step != "4" || !errors.Is(se, context.Canceled) || strings.Contains(se.Error(), "x:") {
		t.Errorf("stepError = %+v", se)
	}
	if got := stepError("9", se); got != error(se) {
		t.Errorf("a *StepError was rewrapped: %v", got)
	}
}

// TestRunRefusesBeforeTouchingTheSandbox: a bad Guest or a COPY without
// archives fail without a request reaching envd.
func TestRunRefusesBeforeTouchingTheSandbox(t *testing.T) {
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		t.Errorf("unexpected request %s %s", r.Method, r.URL)
		return nil, errors.New("no sandbox here")
	})}
	copyStep := Template{Steps: []Step{{Type: TypeCopy, Args: []string{"a", "/a", "", ""}, FilesHash: hashA}}}
	for _, c := range []struct {
		g    Guest
		tpl  Template
		step string
		want string
	}{
		{Guest{BaseURL: "http://envd"}, Template{}, StepBase, "HTTPClient is required"},
		{Guest{HTTPClient: hc}, Template{}, StepBase, "BaseURL is required"},
		{Guest{HTTPClient: hc, BaseURL: "http://envd", User: "a:b"}, Template{}, StepBase, "not a valid user name"},
		{Guest{HTTPClient: hc, BaseURL: "http://envd"}, copyStep, "1", "no uploaded files are available"},
	} {
		se := asStepError(t, Run(context.Background(), c.g, c.tpl, nil, nil))
		if se.Step != c.step || !strings.Contains(se.Message, c.want) {
			t.Errorf("got %+v, want step %s with %q", se, c.step, c.want)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
