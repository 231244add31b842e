//go:build !(linux || darwin || freebsd)

package serve

import "errors"

// isListeningSocket refuses every descriptor where it cannot tell a
// listening socket from anything else the process may hold.
func isListeningSocket(int) error {
	return errors.New("inherited sockets are not supported on this platform; left alone")
}
