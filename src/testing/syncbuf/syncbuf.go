// Package syncbuf is a bytes.Buffer a test can read while the code under
// test writes to it from goroutines of its own (a logger's sink, a
// program's stdout).
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for concurrent Write and String. Its zero value is an
// empty buffer ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
