package machine

import (
	"net"
	"sync"

	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/echo"
)

// streamServer serves the raw TCP echo on one listener and, on close, ends
// every connection it still holds, so the program leaves nothing running.
type streamServer struct {
	ln    net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{} // nil once closed
	wg    sync.WaitGroup
}

func serveStreams(ln net.Listener) *streamServer {
	s := &streamServer{ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Go(s.accept)
	return s
}

func (s *streamServer) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.conns == nil {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Go(func() {
			echo.ServeStream(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		})
	}
}

// Close stops accepting, closes every connection and waits for their
// goroutines.
func (s *streamServer) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
	s.wg.Wait()
	return err
}
