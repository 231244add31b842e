package main

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every connection with what it reads, prefixed by
// "hello:" once.
func echoServer(t *testing.T) string {
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
				_, _ = c.Write([]byte("hello:"))
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func TestByteCounterCounts(t *testing.T) {
	b, err := startByteCounter(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	payload := bytes.Repeat([]byte("x"), 200_000)
	go func() { _, _ = c.Write(payload) }()
	got := make([]byte, len("hello:")+len(payload))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:6], []byte("hello:")) || !bytes.Equal(got[6:], payload) {
		t.Fatal("the proxy changed the stream")
	}
	up, down := b.Read()
	if up != int64(len(payload)) || down != int64(len(got)) {
		t.Errorf("counted up %d down %d, want %d and %d", up, down, len(payload), len(got))
	}

	b.Reset()
	if up, down := b.Read(); up != 0 || down != 0 {
		t.Errorf("after Reset: up %d down %d", up, down)
	}
	if _, err := c.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	small := make([]byte, 3)
	if _, err := io.ReadFull(c, small); err != nil || string(small) != "abc" {
		t.Fatalf("read %q, %v", small, err)
	}
	if up, down := b.Read(); up != 3 || down != 3 {
		t.Errorf("after Reset and 3 bytes each way: up %d down %d", up, down)
	}
}

func TestByteCounterHalfClose(t *testing.T) {
	b, err := startByteCounter(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	// Closing the write side reaches the server, which ends the echo and
	// closes; the client then reads everything and EOF.
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	all, err := io.ReadAll(c)
	if err != nil || string(all) != "hello:bye" {
		t.Errorf("read %q, %v; want hello:bye and EOF", all, err)
	}
}

func TestByteCounterCloseEndsConnections(t *testing.T) {
	b, err := startByteCounter(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hello := make([]byte, 6)
	if _, err := io.ReadFull(c, hello); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung with a connection open")
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("the client connection survived Close")
	}
	if _, err := net.DialTimeout("tcp", b.Addr(), time.Second); err == nil {
		t.Error("the proxy still accepts after Close")
	}
}

func TestByteCounterUnreachableTarget(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	ln.Close()
	b, err := startByteCounter(target)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("a connection to an unreachable target stayed open")
	}
}
