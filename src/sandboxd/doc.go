// Package sandboxd is a typed client for the sandboxd node HTTP API and the
// wire types that API speaks.
//
// A Client is bound to one node (its host:port) and one bearer token. Every
// call shares a single http.Transport so the request path reuses
// connections; the guest-port relay (DialPort) dials its own connection
// because the node hijacks it after the 101 answer.
//
// Failures carry the node's {"error": "..."} message in an *APIError whose
// status maps onto sentinel errors (ErrCapacity, ErrNotFound,
// ErrUnauthorized, ...), so callers branch with errors.Is instead of
// comparing status codes.
//
// TokenOptions are the --sandboxd-token and --sandboxd-token-file flags of
// the fleet token a binary presents to every node.
//
// Tokens are credentials: nothing in this package logs them or puts them in
// an error string.
package sandboxd
