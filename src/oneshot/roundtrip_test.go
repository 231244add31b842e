package oneshot

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// guestAnswers serves one exchange on the far end of a pipe: it reads the
// request, body and all, and writes answer as it is.
func guestAnswers(t *testing.T, answer string) (net.Conn, <-chan *http.Request) {
	t.Helper()
	near, far := net.Pipe()
	got := make(chan *http.Request, 1)
	go func() {
		defer far.Close()
		req, err := http.ReadRequest(bufio.NewReader(far))
		if err != nil {
			close(got)
			return
		}
		// The body is read before answering, while the pipe is open.
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(strings.NewReader(string(body)))
		got <- req
		_, _ = io.WriteString(far, answer)
	}()
	t.Cleanup(func() { near.Close() })
	return near, got
}

func TestExchange(t *testing.T) {
	conn, got := guestAnswers(t, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	req, _ := http.NewRequest(http.MethodGet, "http://guest/files?path=/a", nil)
	req.Host = "49983-sb.example"
	resp, err := RoundTrip(req, conn)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("answer %d %q %v; want 200 \"ok\" past the 103", resp.StatusCode, body, err)
	}
	in := <-got
	if in == nil || in.Host != "49983-sb.example" || in.URL.RequestURI() != "/files?path=/a" || !in.Close {
		t.Fatalf("the guest got %+v; want the client's host and path, and Connection: close", in)
	}
}

func TestAnswerHeadersAreBounded(t *testing.T) {
	conn, _ := guestAnswers(t, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", MaxResponseHeader+10)+"\r\n\r\n")
	req, _ := http.NewRequest(http.MethodGet, "http://guest/", nil)
	if _, err := RoundTrip(req, conn); !errors.Is(err, ErrHeaderTooLarge) {
		t.Fatalf("an answer with %d bytes of headers: %v; want ErrHeaderTooLarge", MaxResponseHeader+10, err)
	}
}

func TestEndsWithTheRequest(t *testing.T) {
	near, far := net.Pipe()
	defer far.Close()
	go func() { _, _ = io.Copy(io.Discard, far) }() // reads, never answers
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://guest/", nil)
	done := make(chan error, 1)
	go func() {
		_, err := RoundTrip(req, near)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a cancelled exchange returned no error")
		}
	case <-time.After(time.Minute):
		t.Fatal("a cancelled exchange did not end")
	}
}

func TestUpgradeIsTheConnection(t *testing.T) {
	conn, _ := guestAnswers(t, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nhello")
	req, _ := http.NewRequest(http.MethodGet, "http://guest/ws", nil)
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Connection", "Upgrade")
	resp, err := RoundTrip(req, conn)
	if err != nil {
		t.Fatal(err)
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if resp.StatusCode != http.StatusSwitchingProtocols || !ok {
		t.Fatalf("answer %d, body %T; want 101 with a read-write body", resp.StatusCode, resp.Body)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(rwc, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q %v after the upgrade; want the guest's bytes", buf, err)
	}
	rwc.Close()
}

// closeTracker notes whether its connection was closed.
type closeTracker struct {
	net.Conn
	closed chan struct{}
}

func (c *closeTracker) Close() error {
	select {
	case <-c.closed:
	default:
		close(c.closed)
	}
	return c.Conn.Close()
}

func tracked(c net.Conn) *closeTracker { return &closeTracker{Conn: c, closed: make(chan struct{})} }

func isClosed(c *closeTracker) bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// RoundTrip owns the connection: the answer's body closes it, and so does
// a failed exchange.
func TestOwnsTheConnection(t *testing.T) {
	near, _ := guestAnswers(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	conn := tracked(near)
	req, _ := http.NewRequest(http.MethodPost, "http://envd/init", strings.NewReader(`{"a":1}`))
	resp, err := RoundTrip(req, conn)
	if err != nil {
		t.Fatal(err)
	}
	if isClosed(conn) {
		t.Fatal("the connection closed before the body was read")
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !isClosed(conn) {
		t.Fatal("closing the body left the connection open")
	}

	bad, _ := guestAnswers(t, "not http\r\n\r\n")
	conn = tracked(bad)
	req, _ = http.NewRequest(http.MethodGet, "http://envd/health", nil)
	if _, err := RoundTrip(req, conn); err == nil {
		t.Fatal("a garbled answer was read as one")
	}
	if !isClosed(conn) {
		t.Fatal("a failed exchange left the connection open")
	}
}

// The request crosses whole, body and length included.
func TestSendsTheBody(t *testing.T) {
	conn, got := guestAnswers(t, "HTTP/1.1 204 No Content\r\n\r\n")
	req, _ := http.NewRequest(http.MethodPost, "http://envd/init", strings.NewReader(`{"accessToken":"x"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := RoundTrip(req, conn)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	in := <-got
	if in == nil {
		t.Fatal("the far end got no request")
	}
	body, _ := io.ReadAll(in.Body)
	if resp.StatusCode != http.StatusNoContent || in.Method != http.MethodPost || in.ContentLength != int64(len(body)) ||
		string(body) != `{"accessToken":"x"}` || in.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("answer %d; the far end got %s %d bytes %q %v", resp.StatusCode, in.Method, in.ContentLength, body, in.Header)
	}
}
