package sandboxd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

const (
	// DefaultMaxResponseBytes bounds a success body. The largest answer is
	// a node's sandbox index, a few hundred bytes per live claim, so this
	// leaves room for tens of thousands of claims on one node.
	DefaultMaxResponseBytes int64 = 16 << 20
	// maxErrorBytes bounds an error body; {"error": "..."} is short.
	maxErrorBytes int64 = 64 << 10
)

// sharedTransport carries every request-path call of every Client that was
// not given its own http.Client, so calls to one node reuse connections.
var sharedTransport = newTransport()

func newTransport() *http.Transport {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		// A node is addressed directly; an environment proxy would be wrong
		// for node-local traffic.
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

var sharedHTTPClient = &http.Client{
	Transport: sharedTransport,
	// sandboxd never answers 3xx; its redirects are 200 bodies.
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// Client calls one sandboxd node with one bearer token. It is safe for
// concurrent use; At and As derive clients that share its transport.
type Client struct {
	addr    string // as given: host:port or an http(s) origin
	base    *url.URL
	token   string
	hc      *http.Client
	maxBody int64
	dialer  *net.Dialer
}

// Option configures a Client.
type Option func(*Client)

// WithToken sets the bearer token sent on every call (root, tenant or a
// sandbox's own token). Empty sends no Authorization header.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient replaces the shared http.Client, e.g. to add TLS settings.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithMaxResponseBytes bounds success bodies (DefaultMaxResponseBytes when
// n <= 0).
func WithMaxResponseBytes(n int64) Option {
	return func(c *Client) {
		if n > 0 {
			c.maxBody = n
		}
	}
}

// New returns a client for the node at addr, which is host:port or, when a
// node advertises one, a full http(s) origin.
func New(addr string, opts ...Option) (*Client, error) {
	base, err := parseAddr(addr)
	if err != nil {
		return nil, err
	}
	c := &Client{
		addr:    addr,
		base:    base,
		hc:      sharedHTTPClient,
		maxBody: DefaultMaxResponseBytes,
		dialer:  &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second},
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

func parseAddr(addr string) (*url.URL, error) {
	if addr == "" {
		return nil, errors.New("sandboxd: empty node address")
	}
	raw := addr
	if !strings.Contains(addr, "://") {
		raw = "http://" + addr
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("sandboxd: parse node address %q: %w", addr, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("sandboxd: node address %q: scheme must be http or https", addr)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("sandboxd: node address %q has no host", addr)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// Addr is the node address the client was built with.
func (c *Client) Addr() string { return c.addr }

// At returns a client for another node (a redirect target or a claim's
// owner_addr) with the same token, transport and limits.
func (c *Client) At(addr string) (*Client, error) {
	base, err := parseAddr(addr)
	if err != nil {
		return nil, err
	}
	cp := *c
	cp.addr, cp.base = addr, base
	return &cp, nil
}

// As returns a client for the same node that presents token instead, e.g.
// a sandbox's own token for the sandbox-scoped verbs.
func (c *Client) As(token string) *Client {
	cp := *c
	cp.token = token
	return &cp
}

// Claim grants a sandbox, following the redirect protocol (see claim.go).
// Info, pools, index and lifecycle calls follow.

// SetPools replaces the node's whole pool set (PUT /v1/pools, root only);
// pools left out are drained. It answers the fresh info payload.
func (c *Client) SetPools(ctx context.Context, pools []PoolSpec) (*Info, error) {
	if pools == nil {
		pools = []PoolSpec{}
	}
	var info Info
	err := c.do(ctx, http.MethodPut, "/v1/pools", nil, PoolsRequest{Pools: pools}, &info, "PUT /v1/pools")
	return &info, err
}

// Info reads GET /v1/info (root only).
func (c *Client) Info(ctx context.Context) (*Info, error) {
	var info Info
	err := c.do(ctx, http.MethodGet, "/v1/info", nil, nil, &info, "GET /v1/info")
	return &info, err
}

// Sandboxes lists the node's live claims visible to the token; a non-empty
// claimRef keeps only the claims recorded under exactly that reference.
func (c *Client) Sandboxes(ctx context.Context, claimRef string) ([]Sandbox, error) {
	return c.SandboxesMatching(ctx, claimRef, nil)
}

// SandboxesMatching lists the node's live claims visible to the token that
// hold every pair of metadata (any claim when it is empty) and, when
// claimRef is non-empty, were recorded under exactly that reference. Each
// pair goes as metadata=key=value, in key order so one filter always makes
// the same URL. A node answers 400 for an empty key.
func (c *Client) SandboxesMatching(ctx context.Context, claimRef string, metadata map[string]string) ([]Sandbox, error) {
	q := url.Values{}
	if claimRef != "" {
		q.Set("claim_ref", claimRef)
	}
	for _, k := range slices.Sorted(maps.Keys(metadata)) {
		q.Add("metadata", k+"="+metadata[k])
	}
	var list SandboxList
	if err := c.do(ctx, http.MethodGet, "/v1/sandboxes", q, nil, &list, "GET /v1/sandboxes"); err != nil {
		return nil, err
	}
	return list.Sandboxes, nil
}

// Sandbox reads one live claim (root only). With the configured root token
// the row carries the sandbox's own token.
func (c *Client) Sandbox(ctx context.Context, id string) (*Sandbox, error) {
	var sb Sandbox
	err := c.do(ctx, http.MethodGet, sandboxPath(id, ""), nil, nil, &sb, "GET /v1/sandboxes/{id}")
	return &sb, err
}

// idempotentOps are the POSTs the contract lets a client repeat: a
// second release answers 404, a second hibernate, wake or renew does what
// the first did.
var idempotentOps = map[string]bool{
	"POST /v1/sandboxes/{id}/release":   true,
	"POST /v1/sandboxes/{id}/hibernate": true,
	"POST /v1/sandboxes/{id}/wake":      true,
	"POST /v1/sandboxes/{id}/renew":     true,
}

// Release destroys the sandbox (its own token, or root by id). An
// already-gone sandbox is ErrNotFound, which callers may treat as success.
func (c *Client) Release(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, sandboxPath(id, "release"), nil, nil, nil, "POST /v1/sandboxes/{id}/release")
}

// Hibernate snapshots and stops the sandbox; idempotent.
func (c *Client) Hibernate(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, sandboxPath(id, "hibernate"), nil, nil, nil, "POST /v1/sandboxes/{id}/hibernate")
}

// Wake restores a hibernated sandbox; idempotent on a running one.
func (c *Client) Wake(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, sandboxPath(id, "wake"), nil, nil, nil, "POST /v1/sandboxes/{id}/wake")
}

// Renew resets the lease to ttlSeconds from now (0 = node default) and
// returns the deadline the node granted.
func (c *Client) Renew(ctx context.Context, id string, ttlSeconds int) (time.Time, error) {
	return c.RenewWith(ctx, id, RenewRequest{TTLSeconds: ttlSeconds})
}

// Fork clones the sandbox into req.Count fresh claims. The client's token
// is the node token; req.Token is the parent's own token.
func (c *Client) Fork(ctx context.Context, id string, req ForkRequest) ([]Claim, error) {
	var out ForkResponse
	if err := c.do(ctx, http.MethodPost, sandboxPath(id, "fork"), nil, req, &out, "POST /v1/sandboxes/{id}/fork"); err != nil {
		return nil, err
	}
	c.fillOwner(out.Children)
	return out.Children, nil
}

// Checkpoint captures the sandbox's state. The client's token is the node
// token; req.Token is the sandbox's own token.
func (c *Client) Checkpoint(ctx context.Context, id string, req CheckpointRequest) (*Checkpoint, error) {
	var out CheckpointResponse
	if err := c.do(ctx, http.MethodPost, sandboxPath(id, "checkpoint"), nil, req, &out, "POST /v1/sandboxes/{id}/checkpoint"); err != nil {
		return nil, err
	}
	return &out.Checkpoint, nil
}

// Checkpoints lists the node's checkpoints visible to the token, newest first.
func (c *Client) Checkpoints(ctx context.Context) ([]Checkpoint, error) {
	var out CheckpointList
	if err := c.do(ctx, http.MethodGet, "/v1/checkpoints", nil, nil, &out, "GET /v1/checkpoints"); err != nil {
		return nil, err
	}
	return out.Checkpoints, nil
}

// DeleteCheckpoint removes a checkpoint record.
func (c *Client) DeleteCheckpoint(ctx context.Context, checkpointID string) error {
	return c.do(ctx, http.MethodDelete, "/v1/checkpoints/"+url.PathEscape(checkpointID), nil, nil, nil, "DELETE /v1/checkpoints/{id}")
}

// Stats reads one sandbox's resource usage (root only).
func (c *Client) Stats(ctx context.Context, id string) (*Stats, error) {
	var out Stats
	err := c.do(ctx, http.MethodGet, sandboxPath(id, "stats"), nil, nil, &out, "GET /v1/sandboxes/{id}/stats")
	return &out, err
}

// Owner asks whether this node owns the sandbox (its own token) and
// returns the owner address it advertises.
func (c *Client) Owner(ctx context.Context, id string) (string, error) {
	var out OwnerResponse
	err := c.do(ctx, http.MethodGet, sandboxPath(id, "owner"), nil, nil, &out, "GET /v1/sandboxes/{id}/owner")
	return out.OwnerAddr, err
}

// Peers lists the other mesh members' addresses (root or tenant token).
func (c *Client) Peers(ctx context.Context) ([]string, error) {
	var out PeersResponse
	if err := c.do(ctx, http.MethodGet, "/v1/peers", nil, nil, &out, "GET /v1/peers"); err != nil {
		return nil, err
	}
	return out.Peers, nil
}

// Drain cordons the node (root only) and answers the fresh info payload.
func (c *Client) Drain(ctx context.Context) (*Info, error) {
	var info Info
	err := c.do(ctx, http.MethodPost, "/v1/drain", nil, nil, &info, "POST /v1/drain")
	return &info, err
}

// Undrain lifts a drain (root only) and answers the fresh info payload.
func (c *Client) Undrain(ctx context.Context) (*Info, error) {
	var info Info
	err := c.do(ctx, http.MethodDelete, "/v1/drain", nil, nil, &info, "DELETE /v1/drain")
	return &info, err
}

// Metrics reads the node's Prometheus text exposition (root only).
func (c *Client) Metrics(ctx context.Context) (string, error) {
	var out []byte
	err := c.do(ctx, http.MethodGet, "/metrics", nil, nil, &out, "GET /metrics")
	return string(out), err
}

// Healthz probes the unauthenticated liveness endpoint.
func (c *Client) Healthz(ctx context.Context) error {
	var out []byte
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil, &out, "GET /healthz")
}

func sandboxPath(id, verb string) string {
	p := "/v1/sandboxes/" + url.PathEscape(id)
	if verb != "" {
		p += "/" + verb
	}
	return p
}

// fillOwner defaults an empty owner_addr to the node that answered.
func (c *Client) fillOwner(claims []Claim) {
	for i := range claims {
		if claims[i].OwnerAddr == "" {
			claims[i].OwnerAddr = c.addr
		}
	}
}

func (c *Client) url(path string, q url.Values) string {
	// path is already escaped (ids go through url.PathEscape); building the
	// string directly keeps it that way on the wire.
	s := c.base.Scheme + "://" + c.base.Host + c.base.Path + path
	if len(q) > 0 {
		s += "?" + q.Encode()
	}
	return s
}

// do sends one request and decodes a 2xx body into out: a *[]byte takes the
// raw bytes, nil discards it, anything else is JSON-decoded. Non-2xx answers
// become *APIError.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any, op string) error {
	var rd io.Reader
	if body != nil {
		buf, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("sandboxd: %s: encode body: %w", op, err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path, q), rd)
	if err != nil {
		return fmt.Errorf("sandboxd: %s: build request: %w", op, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if idempotentOps[op] {
		// net/http sends a request again on a fresh connection when a
		// kept-alive one turns out closed under it (the node closed it as
		// idle, or restarted), but only a request it may repeat; these
		// verbs the contract makes idempotent. The header is never sent.
		req.Header["Idempotency-Key"] = nil
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("sandboxd: %s at %s: %w", op, c.base.Host, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return readAPIError(resp, op)
	}
	if out == nil {
		// Drain a little so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBytes))
		return nil
	}
	raw, err := readBounded(resp.Body, c.maxBody)
	if err != nil {
		return fmt.Errorf("sandboxd: %s: read body: %w", op, err)
	}
	if b, ok := out.(*[]byte); ok {
		*b = raw
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("sandboxd: %s: decode body: %w", op, err)
	}
	return nil
}

// readBounded reads at most limit bytes and fails when there are more.
func readBounded(r io.Reader, limit int64) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) > limit {
		return nil, fmt.Errorf("%w (limit %d bytes)", ErrResponseTooLarge, limit)
	}
	return raw, nil
}

// readAPIError turns a non-2xx answer into an *APIError carrying the
// node's message (or a trimmed plain-text body when it is not JSON).
func readAPIError(resp *http.Response, op string) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	apiErr := &APIError{Status: resp.StatusCode, Op: op}
	var body ErrorResponse
	if json.Unmarshal(raw, &body) == nil && body.Error != "" {
		apiErr.Message = body.Error
	} else {
		// Every answer sandboxd writes carries {"error"}; a bare 404 or
		// 405 is its router not knowing the verb.
		apiErr.Unsupported = resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed
		apiErr.Message = strings.TrimSpace(string(raw))
		if len(apiErr.Message) > 256 {
			apiErr.Message = apiErr.Message[:256]
		}
	}
	return apiErr
}
