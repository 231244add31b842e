package echo

import (
	"io"
	"net"
)

// ServeStream is a raw TCP echo: it writes back every byte it reads and,
// when the peer half-closes, shuts down its own write side after the last
// byte. A peer therefore sees its whole input echoed and then EOF, which
// proves half-close travelled both ways. It closes conn when done.
func ServeStream(conn net.Conn) {
	defer conn.Close()
	if _, err := io.Copy(conn, conn); err != nil {
		return
	}
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}
