// Package echo is the simulator's echo guest: an HTTP service that answers
// every request (HTTP/1.1 or h2c) with a JSON document of what it received,
// and a raw TCP echo that honours half-close. Tests use it to prove what
// crosses the relay: method, path, query, headers, body and protocol.
package echo
