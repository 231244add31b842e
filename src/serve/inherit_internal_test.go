package serve

import (
	"net"
	"testing"
)

func TestBoundToMatchesTheSocketsOwnAddress(t *testing.T) {
	v4 := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	anyV6 := &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}
	anyV4 := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	for _, tc := range []struct {
		got  *net.TCPAddr
		want string
		ok   bool
	}{
		{v4, "127.0.0.1:8080", true},
		{v4, "[::ffff:127.0.0.1]:8080", true},
		{v4, "127.0.0.1:8081", false},
		{v4, "127.0.0.2:8080", false},
		{v4, ":8080", false},
		{v4, "localhost:8080", false}, // names are not resolved
		{v4, "127.0.0.1", false},
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, "127.0.0.1:0", false}, // 0 asks for a fresh port
		{anyV6, ":8080", true},
		{anyV6, "0.0.0.0:8080", true},
		{anyV4, "[::]:8080", true},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 80}, ":http", true}, // a service name, as net.Listen takes
		{anyV6, "127.0.0.1:8080", false},
	} {
		if got := boundTo(tc.got, tc.want); got != tc.ok {
			t.Errorf("boundTo(%v, %q) = %v, want %v", tc.got, tc.want, got, tc.ok)
		}
	}
}
