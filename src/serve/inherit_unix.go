//go:build linux || darwin || freebsd

package serve

import (
	"errors"
	"fmt"
	"syscall"
)

// isListeningSocket says why fd is not a socket in the listening state,
// nil when it is; it neither closes nor changes fd.
func isListeningSocket(fd int) error {
	listening, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN)
	switch {
	case errors.Is(err, syscall.EBADF):
		return errors.New("not open")
	case errors.Is(err, syscall.ENOTSOCK):
		return errors.New("not a socket; left open")
	case err != nil:
		return fmt.Errorf("not a listening socket (%w); left open", err)
	case listening == 0:
		return errors.New("a socket that is not listening; left open")
	}
	return nil
}
