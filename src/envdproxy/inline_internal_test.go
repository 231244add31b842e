package envdproxy

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
// request and writes answer as it is.
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
		got <- req
		_, _ = io.WriteString(far, answer)
	}()
	t.Cleanup(func() { near.Close() })
	return near, got
}

func TestInlineExchange(t *testing.T) {
	conn, got := guestAnswers(t, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	req, _ := http.NewRequest(http.MethodGet, "http://guest/files?path=/a", nil)
	req.Host = "49983-sb.example"
	resp, err := inlineRoundTrip(req, conn)
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

func TestInlineAnswerHeadersAreBounded(t *testing.T) {
	conn, _ := guestAnswers(t, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", maxResponseHeader+10)+"\r\n\r\n")
	req, _ := http.NewRequest(http.MethodGet, "http://guest/", nil)
	if _, err := inlineRoundTrip(req, conn); !errors.Is(err, errHeaderTooLarge) {
		t.Fatalf("an answer with %d bytes of headers: %v; want errHeaderTooLarge", maxResponseHeader+10, err)
	}
}

func TestInlineEndsWithTheRequest(t *testing.T) {
	near, far := net.Pipe()
	defer far.Close()
	go func() { _, _ = io.Copy(io.Discard, far) }() // reads, never answers
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://guest/", nil)
	done := make(chan error, 1)
	go func() {
		_, err := inlineRoundTrip(req, near)
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

func TestInlineUpgradeIsTheConnection(t *testing.T) {
	conn, _ := guestAnswers(t, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nhello")
	req, _ := http.NewRequest(http.MethodGet, "http://guest/ws", nil)
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Connection", "Upgrade")
	resp, err := inlineRoundTrip(req, conn)
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
