package faultlink

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// upperServer answers every line with the line in upper case, and closes
// its side when the client closes its own.
func upperServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := io.WriteString(c, strings.ToUpper(sc.Text())+"\n"); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends line on c and reads the answer, giving up after wait.
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string, wait time.Duration) (string, error) {
	t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	got, err := r.ReadString('\n')
	return strings.TrimSpace(got), err
}

// TestLinkCutHoldsTrafficAndHealDeliversIt: a cut link answers nothing
// on an open connection or a new one, without closing either; once
// healed, what was sent meanwhile arrives and is answered in order.
func TestLinkCutHoldsTrafficAndHealDeliversIt(t *testing.T) {
	l := startLink(t, upperServer(t))
	open, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	openR := bufio.NewReader(open)
	if got, err := roundTrip(t, open, openR, "before", 5*time.Second); err != nil || got != "BEFORE" {
		t.Fatalf("through a healed link: %q, %v", got, err)
	}

	l.Cut()
	if got, err := roundTrip(t, open, openR, "during", 300*time.Millisecond); err == nil || !isTimeout(err) {
		t.Fatalf("an open connection through a cut link answered %q (%v), want a timeout", got, err)
	}
	fresh, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatalf("a cut link refused a connection (%v); a dropped packet is not a refusal", err)
	}
	defer fresh.Close()
	freshR := bufio.NewReader(fresh)
	if got, err := roundTrip(t, fresh, freshR, "new", 300*time.Millisecond); err == nil || !isTimeout(err) {
		t.Fatalf("a new connection through a cut link answered %q (%v), want a timeout", got, err)
	}

	l.Heal()
	_ = open.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := openR.ReadString('\n'); err != nil || got != "DURING\n" {
		t.Fatalf("after healing, the held line was answered %q (%v)", got, err)
	}
	_ = fresh.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := freshR.ReadString('\n'); err != nil || got != "NEW\n" {
		t.Fatalf("after healing, the connection made while cut was answered %q (%v)", got, err)
	}
	if got, err := roundTrip(t, open, openR, "after", 5*time.Second); err != nil || got != "AFTER" {
		t.Fatalf("through a healed link: %q, %v", got, err)
	}
}

// TestLinkDeliversACloseMadeWhileCut: a caller that gave up while the
// link was cut closed its connection; the server sees that close once
// the link heals, so no connection to it is left open.
func TestLinkDeliversACloseMadeWhileCut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	l := startLink(t, ln.Addr().String())
	l.Cut()
	c, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "abandoned"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		s, err := ln.Accept()
		if err == nil {
			accepted <- s
		}
	}()
	select {
	case s := <-accepted:
		s.Close()
		t.Fatal("a cut link opened a connection to the server")
	case <-time.After(300 * time.Millisecond):
	}
	l.Heal()
	var s net.Conn
	select {
	case s = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the healed link never connected to the server")
	}
	defer s.Close()
	_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(s)
	if err != nil || string(got) != "abandoned" {
		t.Fatalf("the server read %q (%v), want the held bytes and then the close", got, err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestLinkCutAfterDeliversTheRequestAndHoldsTheAnswer: an armed link
// delivers the matching request and then cuts, so the server acts on it
// while its answer waits for the link to heal.
func TestLinkCutAfterDeliversTheRequestAndHoldsTheAnswer(t *testing.T) {
	l := startLink(t, upperServer(t))
	c, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	cut := l.CutAfter(func(chunk []byte) bool { return strings.Contains(string(chunk), "claim") })
	if got, err := roundTrip(t, c, r, "info", 5*time.Second); err != nil || got != "INFO" {
		t.Fatalf("before the matching request: %q, %v", got, err)
	}
	if got, err := roundTrip(t, c, r, "claim", 300*time.Millisecond); err == nil || !isTimeout(err) {
		t.Fatalf("the matching request was answered %q (%v), want its answer held", got, err)
	}
	select {
	case <-cut:
	default:
		t.Fatal("the armed cut did not report itself")
	}
	l.Heal()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "CLAIM\n" {
		t.Fatalf("after healing: %q (%v), want the held answer", got, err)
	}
}

func startLink(t *testing.T, target string) *Link {
	t.Helper()
	l, err := Start("127.0.0.1:0", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}
