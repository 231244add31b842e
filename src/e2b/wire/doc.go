// Package wire is the JSON form of e2b's control API (spec/openapi.yml in
// e2b-dev/E2B) as the e2b surface serves it: the request bodies it decodes
// and the answers it encodes, limited to the fields it fills or reads.
// The shapes are the SDK's contract, not this server's model, so they
// live apart from the handlers and change only when the SDK's spec does;
// each type names the spec schema it follows.
package wire
