package buildstore

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Query parameters of a Dir upload URL.
const (
	paramExpires   = "expires"
	paramSignature = "signature"
)

var (
	errBadSignature = errors.New("the upload signature is missing or wrong")
	errExpired      = errors.New("the upload URL has expired")
)

// signature is the HMAC of an upload of (templateID, hash) valid until
// expires (decimal unix seconds). Each field is newline-terminated and
// none may hold a newline, so no two inputs share a message.
func (d *Dir) signature(templateID, hash, expires string) []byte {
	mac := hmac.New(sha256.New, d.key)
	mac.Write([]byte("PUT\n" + templateID + "\n" + hash + "\n" + expires))
	return mac.Sum(nil)
}

// signedURL is the upload URL of (templateID, hash) on base, valid for
// the store's ttl from now.
func (d *Dir) signedURL(base, templateID, hash string) (string, error) {
	b, err := url.Parse(base)
	switch {
	case err != nil:
		return "", fmt.Errorf("buildstore: the surface base URL does not parse: %w", err)
	case b.Scheme != "http" && b.Scheme != "https", b.Host == "", b.User != nil, b.RawQuery != "", b.Fragment != "":
		return "", errors.New("buildstore: the surface base URL must be http(s)://host with no user, query or fragment")
	}
	expires := strconv.FormatInt(d.clock.Now().Add(d.ttl).Unix(), 10)
	q := url.Values{
		paramExpires:   {expires},
		paramSignature: {hex.EncodeToString(d.signature(templateID, hash, expires))},
	}
	b.Path = strings.TrimSuffix(b.Path, "/") + "/" + filesDir + "/" + templateID + "/" + hash
	b.RawPath = ""
	b.RawQuery = q.Encode()
	return b.String(), nil
}

// verify checks an upload URL's query for (templateID, hash): the
// signature first, in constant time, then the deadline, so an unsigned
// URL learns nothing about it.
func (d *Dir) verify(q url.Values, templateID, hash string) error {
	exp, sig := q[paramExpires], q[paramSignature]
	if len(exp) != 1 || len(sig) != 1 {
		return errBadSignature
	}
	given, err := hex.DecodeString(sig[0])
	if err != nil || len(given) != sha256.Size {
		return errBadSignature
	}
	if !hmac.Equal(given, d.signature(templateID, hash, exp[0])) {
		return errBadSignature
	}
	// Signed by this key, so the value is one signedURL wrote; parsing
	// can only fail for a key compromise, which is refused all the same.
	deadline, err := strconv.ParseInt(exp[0], 10, 64)
	if err != nil || strconv.FormatInt(deadline, 10) != exp[0] {
		return errBadSignature
	}
	if d.clock.Now().After(time.Unix(deadline, 0)) {
		return errExpired
	}
	return nil
}
