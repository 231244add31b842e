package buildstore

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// sigV4Verifier stands in front of gofakes3 in the tests. gofakes3
// v1.2.0 authenticates nothing (it only bounds the skew of an x-amz-date
// header), so this handler does what S3 does before it: it recomputes
// the AWS Signature Version 4 of every request, from the Authorization
// header or from a presigned URL's query, with the test's secret key,
// and refuses (403) a missing, wrong or expired one. It is written from
// the published SigV4 rules and supports what the store and the tests
// send: AWS4-HMAC-SHA256, service s3, and payloads that are signed by
// hash or left unsigned.
type sigV4Verifier struct {
	next                         http.Handler
	accessKey, secretKey, region string
	// skew is added to the wall clock, so a test can move the server's
	// time past an URL's expiry.
	skew atomic.Int64
	// seen counts requests, so a test can tell none was made.
	seen atomic.Int64
}

const (
	sigV4Algorithm  = "AWS4-HMAC-SHA256"
	amzDateLayout   = "20060102T150405Z"
	maxClockSkew    = 15 * time.Minute
	maxPresignSecs  = 7 * 24 * 60 * 60
	maxVerifiedBody = 64 << 20
)

func (v *sigV4Verifier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v.seen.Add(1)
	if code, err := v.verify(r); err != nil {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message></Error>", code, err)
		return
	}
	v.next.ServeHTTP(w, r)
}

func (v *sigV4Verifier) now() time.Time {
	return time.Now().Add(time.Duration(v.skew.Load()))
}

// sigV4Request is what either form of signature carries.
type sigV4Request struct {
	credential, amzDate, signedHeaders, signature, payloadHash string
}

// verify returns an S3 error code and why, or nil.
func (v *sigV4Verifier) verify(r *http.Request) (string, error) {
	q := r.URL.Query()
	presigned := q.Has("X-Amz-Algorithm")
	var s sigV4Request
	var err error
	if presigned {
		s, err = v.fromQuery(q)
	} else {
		s, err = v.fromHeader(r)
	}
	if err != nil {
		return "AccessDenied", err
	}
	signedAt, err := time.Parse(amzDateLayout, s.amzDate)
	if err != nil {
		return "AccessDenied", errors.New("bad X-Amz-Date")
	}
	scope, err := v.scope(s.credential, s.amzDate)
	if err != nil {
		return "AccessDenied", err
	}
	now := v.now()
	if presigned {
		secs, err := strconv.Atoi(q.Get("X-Amz-Expires"))
		if err != nil || secs < 1 || secs > maxPresignSecs {
			return "AuthorizationQueryParametersError", errors.New("bad X-Amz-Expires")
		}
		if now.After(signedAt.Add(time.Duration(secs) * time.Second)) {
			return "AccessDenied", errors.New("Request has expired")
		}
		if signedAt.After(now.Add(maxClockSkew)) {
			return "AccessDenied", errors.New("Request is not yet valid")
		}
	} else if d := now.Sub(signedAt); d > maxClockSkew || d < -maxClockSkew {
		return "RequestTimeTooSkewed", errors.New("request time too skewed")
	}
	if err := checkPayload(r, s.payloadHash); err != nil {
		return "XAmzContentSHA256Mismatch", err
	}
	canonical, err := canonicalRequest(r, s.signedHeaders, s.payloadHash, presigned)
	if err != nil {
		return "AccessDenied", err
	}
	sum := sha256.Sum256([]byte(canonical))
	toSign := sigV4Algorithm + "\n" + s.amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	want := hex.EncodeToString(hmacSHA256(v.signingKey(s.amzDate[:8]), toSign))
	if !hmac.Equal([]byte(want), []byte(s.signature)) {
		return "SignatureDoesNotMatch", errors.New("the request signature does not match")
	}
	return "", nil
}

func (v *sigV4Verifier) fromQuery(q url.Values) (sigV4Request, error) {
	if q.Get("X-Amz-Algorithm") != sigV4Algorithm {
		return sigV4Request{}, errors.New("unsupported X-Amz-Algorithm")
	}
	s := sigV4Request{
		credential:    q.Get("X-Amz-Credential"),
		amzDate:       q.Get("X-Amz-Date"),
		signedHeaders: q.Get("X-Amz-SignedHeaders"),
		signature:     q.Get("X-Amz-Signature"),
		// A presigned URL cannot know its body: S3 takes it unsigned
		// unless the query says otherwise.
		payloadHash: "UNSIGNED-PAYLOAD",
	}
	if h := q.Get("X-Amz-Content-Sha256"); h != "" {
		s.payloadHash = h
	}
	return s, nil
}

func (v *sigV4Verifier) fromHeader(r *http.Request) (sigV4Request, error) {
	auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), sigV4Algorithm+" ")
	if !ok {
		return sigV4Request{}, errors.New("missing or unsupported Authorization")
	}
	s := sigV4Request{amzDate: r.Header.Get("X-Amz-Date"), payloadHash: r.Header.Get("X-Amz-Content-Sha256")}
	for part := range strings.SplitSeq(auth, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			s.credential = val
		case "SignedHeaders":
			s.signedHeaders = val
		case "Signature":
			s.signature = val
		}
	}
	if s.payloadHash == "" {
		return sigV4Request{}, errors.New("missing X-Amz-Content-Sha256")
	}
	return s, nil
}

// scope checks the credential (key/date/region/s3/aws4_request) and
// returns its scope part.
func (v *sigV4Verifier) scope(credential, amzDate string) (string, error) {
	parts := strings.Split(credential, "/")
	if len(parts) != 5 {
		return "", errors.New("malformed credential")
	}
	if !hmac.Equal([]byte(parts[0]), []byte(v.accessKey)) {
		return "", errors.New("InvalidAccessKeyId")
	}
	if len(amzDate) < 8 || parts[1] != amzDate[:8] || parts[2] != v.region || parts[3] != "s3" || parts[4] != "aws4_request" {
		return "", errors.New("bad credential scope")
	}
	return strings.Join(parts[1:], "/"), nil
}

func (v *sigV4Verifier) signingKey(date string) []byte {
	k := hmacSHA256([]byte("AWS4"+v.secretKey), date)
	k = hmacSHA256(k, v.region)
	k = hmacSHA256(k, "s3")
	return hmacSHA256(k, "aws4_request")
}

// checkPayload holds a body signed by hash to that hash, as S3 does.
func checkPayload(r *http.Request, payloadHash string) error {
	switch {
	case payloadHash == "UNSIGNED-PAYLOAD":
		return nil
	case len(payloadHash) != 64:
		return fmt.Errorf("payload signing %q is not supported by the test verifier", payloadHash)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxVerifiedBody))
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != payloadHash {
		return errors.New("the body does not match X-Amz-Content-Sha256")
	}
	return nil
}

// canonicalRequest builds SigV4's canonical request for S3: the path is
// encoded once, the query sorted (without the signature itself when
// presigned), and the signed headers' values trimmed.
func canonicalRequest(r *http.Request, signedHeaders, payloadHash string, presigned bool) (string, error) {
	names := strings.Split(signedHeaders, ";")
	if !slices.Contains(names, "host") || !slices.IsSorted(names) {
		return "", errors.New("signed headers must be sorted and include host")
	}
	var headers strings.Builder
	for _, name := range names {
		var values []string
		switch name {
		case "host":
			values = []string{r.Host}
		case "content-length":
			values = []string{strconv.FormatInt(r.ContentLength, 10)}
		default:
			values = r.Header.Values(name)
		}
		if len(values) == 0 {
			return "", fmt.Errorf("signed header %s is missing", name)
		}
		for i, val := range values {
			values[i] = strings.Join(strings.Fields(val), " ")
		}
		headers.WriteString(name + ":" + strings.Join(values, ",") + "\n")
	}
	// Sorted by encoded name, then value: sorting "name=value" strings
	// would misorder a name that prefixes another.
	var pairs [][2]string
	for k, vs := range r.URL.Query() {
		if presigned && k == "X-Amz-Signature" {
			continue
		}
		for _, val := range vs {
			pairs = append(pairs, [2]string{uriEncode(k, true), uriEncode(val, true)})
		}
	}
	slices.SortFunc(pairs, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
	query := make([]string, len(pairs))
	for i, p := range pairs {
		query[i] = p[0] + "=" + p[1]
	}
	return strings.Join([]string{
		r.Method,
		uriEncode(r.URL.Path, false),
		strings.Join(query, "&"),
		headers.String(),
		signedHeaders,
		payloadHash,
	}, "\n"), nil
}

// uriEncode is SigV4's encoding: every byte but A-Z a-z 0-9 - . _ ~ as
// %XX, and '/' too unless it separates path segments.
func uriEncode(s string, encodeSlash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', strings.IndexByte("-._~", c) >= 0:
			b.WriteByte(c)
		case c == '/' && !encodeSlash:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
