package envd

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"
)

const accessTokenHeader = "X-Access-Token"

// File URL operations, as they enter the signature.
const (
	opRead  = "read"
	opWrite = "write"
)

// currentToken is the access token in force: Config.AccessToken, or the
// one the last POST /init set. Empty means the guest checks none.
func (g *Guest) currentToken() string {
	g.envMu.RLock()
	defer g.envMu.RUnlock()
	return g.accessToken
}

// tokenMatches compares got with token in constant time. Both sides are
// hashed first so that not even the token's length leaks through timing.
func tokenMatches(token, got string) bool {
	want := sha256.Sum256([]byte(token))
	have := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(want[:], have[:]) == 1
}

// requireAccessToken guards everything but the health probe and /files
// (which also takes a signed URL and so checks for itself) with the access
// token, as envd does. The refusal is an HTTP 401 even for RPC paths;
// Connect clients read that as Unauthenticated.
func (g *Guest) requireAccessToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := g.currentToken()
		open := token == "" || (r.Method == http.MethodGet && r.URL.Path == "/health") ||
			((r.Method == http.MethodGet || r.Method == http.MethodPost) && r.URL.Path == "/files")
		if !open && !tokenMatches(token, r.Header.Get(accessTokenHeader)) {
			writeJSONError(w, http.StatusUnauthorized,
				"unauthorized access: provide a valid access token, or a signed URL where supported")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authorizeFileURL admits a /files request that carries either the access
// token or a valid signature for this path, operation and user. A token
// that is present but wrong is refused even next to a good signature.
func (g *Guest) authorizeFileURL(r *http.Request, op string) error {
	token := g.currentToken()
	if token == "" {
		return nil
	}
	if tok := r.Header.Get(accessTokenHeader); tok != "" {
		if !tokenMatches(token, tok) {
			return errors.New("access token present in header but does not match")
		}
		return nil
	}
	q := r.URL.Query()
	if !q.Has("signature") {
		return errors.New("missing access token or signature")
	}
	var exp *int64
	if q.Has("signature_expiration") {
		v, err := strconv.ParseInt(q.Get("signature_expiration"), 10, 64)
		if err != nil {
			return errors.New("invalid signature expiration")
		}
		exp = &v
	}
	want := fileSignature(q.Get("path"), op, q.Get("username"), token, exp)
	if subtle.ConstantTimeCompare([]byte(want), []byte(q.Get("signature"))) != 1 {
		return errors.New("invalid signature")
	}
	if exp != nil && *exp < g.cfg.Clock.Now().Unix() {
		return errors.New("signature has expired")
	}
	return nil
}

// fileSignature is e2b's signed-URL scheme: "v1_" followed by the unpadded
// standard base64 SHA-256 of "path:operation:user:token", with
// ":expiration" (unix seconds) appended when the URL expires. user is the
// raw username query value, empty for the default user.
func fileSignature(path, op, user, token string, exp *int64) string {
	raw := path + ":" + op + ":" + user + ":" + token
	if exp != nil {
		raw += ":" + strconv.FormatInt(*exp, 10)
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// resolveUser settles which guest user a request acts as. Every user shares
// the one scratch home, so the name only has to be one the guest knows:
// root or the configured default user.
func (g *Guest) resolveUser(name string) (string, error) {
	if name == "" {
		return g.cfg.User, nil
	}
	if name == "root" || name == g.cfg.User {
		return name, nil
	}
	return "", fmt.Errorf("unknown user %q", name)
}

// basicUser extracts the user name from "Authorization: Basic
// base64(user:)", the way the SDK names the user for an RPC. An absent
// header means the default user.
func basicUser(header string) (string, error) {
	if header == "" {
		return "", nil
	}
	scheme, payload, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", errors.New("unsupported authorization scheme")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(payload))
	if err != nil {
		return "", errors.New("malformed basic authorization")
	}
	user, _, _ := strings.Cut(string(raw), ":")
	return user, nil
}

type userKey struct{}

// userFrom returns the user an RPC acts as, set by userInterceptor.
func userFrom(ctx context.Context) string {
	u, _ := ctx.Value(userKey{}).(string)
	return u
}

// userInterceptor resolves the RPC's user from its Authorization header and
// refuses unknown users with Unauthenticated, before any handler runs.
type userInterceptor struct {
	guest *Guest
}

func (i userInterceptor) withUser(ctx context.Context, h http.Header) (context.Context, error) {
	name, err := basicUser(h.Get("Authorization"))
	if err == nil {
		name, err = i.guest.resolveUser(name)
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeUnauthenticated, err)
	}
	return context.WithValue(ctx, userKey{}, name), nil
}

func (i userInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ctx, err := i.withUser(ctx, req.Header())
		if err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (i userInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i userInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, err := i.withUser(ctx, conn.RequestHeader())
		if err != nil {
			return err
		}
		return next(ctx, conn)
	}
}
