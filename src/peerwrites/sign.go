package peerwrites

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"time"
)

// Headers a batch of writes travels with.
const (
	headerTime      = "X-Sandbox-Peer-Time"
	headerSignature = "X-Sandbox-Peer-Signature"
)

// keyLabel separates the peer key from any other use of the fleet token.
const keyLabel = "sandbox-apiserver peer writes v1"

// DeriveKey is the key replicas sign their writes with, derived from the
// fleet's sandboxd token, which every replica already holds. Whoever holds
// that token can release any sandbox on any node, so the peer key adds no
// one who could not already do more harm; a token that is empty derives
// no key.
func DeriveKey(fleetToken string) ([]byte, error) {
	if fleetToken == "" {
		return nil, errors.New("no sandboxd token to derive the peer key from (--sandboxd-token-file)")
	}
	m := hmac.New(sha256.New, []byte(fleetToken))
	m.Write([]byte(keyLabel))
	return m.Sum(nil), nil
}

// sign is the signature of a batch sent at.
func sign(key []byte, at time.Time, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strconv.FormatInt(at.UnixNano(), 10)))
	m.Write([]byte{'\n'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// verify checks sig in constant time.
func verify(key []byte, at time.Time, body []byte, sig string) bool {
	want := sign(key, at, body)
	return hmac.Equal([]byte(want), []byte(sig))
}
