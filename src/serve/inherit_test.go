package serve_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/serve"
)

// childAddrEnv, set, makes the test binary the child of
// TestInheritedListenerIsServed: it serves the address it names with Listen
// and Serve, as a binary does, until SIGTERM.
const childAddrEnv = "SERVE_TEST_INHERIT_CHILD_ADDR"

func TestMain(m *testing.M) {
	if addr := os.Getenv(childAddrEnv); addr != "" {
		os.Exit(runInheritChild(addr))
	}
	os.Exit(m.Run())
}

// runInheritChild serves addr, answering every request with what the
// process's environment still says of the convention's variables, and logs
// to stderr for the parent to read.
func runInheritChild(addr string) int {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	s, err := serve.Listen(serve.ServerConfig{Name: "child", Addr: addr, Logger: logger,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, env := os.LookupEnv(serve.ListenFDsEnv)
			fmt.Fprintf(w, "LISTEN_FDS set: %v", env)
		})})
	if err != nil {
		logger.Error("listen", "err", err)
		return 1
	}
	if err := s.Serve(serve.SignalContext()); err != nil {
		logger.Error("serve", "err", err)
		return 1
	}
	return 0
}

// TestInheritedListenerIsServed hands a child process (this test binary)
// three descriptors the way systemd and the e2e harness do: a listener for
// the address its flag names, a listener nothing names and a pipe. The
// child must serve the first without binding anything (the parent has
// closed every copy of its own before the child could bind, so a fresh
// bind would not be the same socket), close the second, leave the pipe
// alone, and clear the variables.
func TestInheritedListenerIsServed(t *testing.T) {
	served, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stray, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pipeR, pipeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pipeW.Close()
	files := []*os.File{pipeR}
	for _, ln := range []net.Listener{served, stray} {
		f, err := ln.(*net.TCPListener).File()
		if err != nil {
			t.Fatal(err)
		}
		files = append([]*os.File{f}, files...)
	}
	// files is stray, served, pipe: the child must find served by its
	// address, not by its position.
	addr, strayAddr := served.Addr().String(), stray.Addr().String()

	var stderr bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childAddrEnv+"="+addr,
		serve.ListenFDsEnv+"=3", serve.ListenFDNamesEnv+"=stray:api:pipe")
	cmd.ExtraFiles = files
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// From here the sockets are the child's alone.
	for _, f := range files {
		_ = f.Close()
	}
	_, _ = served.Close(), stray.Close()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET from the child: %v\n%s", err, stderr.String())
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "LISTEN_FDS set: false" {
		t.Errorf("child answered %q: the variables must be cleared once read", body)
	}
	// Serve closed the unclaimed socket before it served the request.
	if c, err := net.Dial("tcp", strayAddr); err == nil {
		c.Close()
		t.Errorf("the unclaimed inherited socket %s still accepts", strayAddr)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("child: %v\n%s", err, stderr.String())
		}
	case <-ctx.Done():
		t.Fatalf("the child did not stop on SIGTERM\n%s", stderr.String())
	}
	log := stderr.String()
	for _, want := range []string{
		`msg="using the inherited listening socket" listener=child socket="api (fd 4)" address=` + addr,
		`msg="closing an inherited listening socket no listener is configured for" listener=child socket="stray (fd 3)" address=` + strayAddr,
		`inherited pipe (fd 5): not a socket; left open`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("child log lacks %q:\n%s", want, log)
		}
	}
}

// TestListenBindsWithoutInheritedSockets: a process handed nothing binds as
// it always did (the case every other test here covers too), and Serve's
// closing of unclaimed sockets is harmless then.
func TestListenBindsWithoutInheritedSockets(t *testing.T) {
	if _, set := os.LookupEnv(serve.ListenFDsEnv); set {
		t.Fatal("the test process itself was handed sockets")
	}
	s, err := serve.Listen(serve.ServerConfig{Name: "fresh", Addr: "127.0.0.1:0", Handler: http.NotFoundHandler()})
	if err != nil {
		t.Fatal(err)
	}
	stop := serveInBackground(s)
	if code, err := get("http://" + s.Addr().String() + "/"); err != nil || code != http.StatusNotFound {
		t.Fatalf("GET = %d, %v; want the handler's 404", code, err)
	}
	if err := stop(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		t.Fatal(err)
	}
}
