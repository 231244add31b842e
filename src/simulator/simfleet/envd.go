package simfleet

import (
	"fmt"
	"net/http"

	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/envd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

// EnvdConfig is the envd-compatible guest every sandbox of a fleet serves
// on port 49983 (see src/simulator/guest/envd). Each sandbox — a claim, a
// fork child, a claim from a checkpoint — gets its own guest, rooted at its
// own scratch directory and keyed by its own claim token, built when the
// port is first reached and closed (its processes killed) on release or
// reap.
//
// SECURITY: without Config.Isolation the guest runs commands as host
// processes of the simulator's user, and only its file API is confined to
// the scratch directory. With it, the guest is a program inside each
// sandbox's machine instead (IsolationConfig).
type EnvdConfig struct {
	// Secret keys the access tokens: a sandbox's guest accepts
	// hex(HMAC-SHA256(Secret, claim token)), the value the e2b surface
	// hands the SDK. Empty turns authentication off.
	Secret []byte
	// Version is the envd version the guests report; default
	// envd.DefaultVersion.
	Version string
	// User is the guests' default user, whose home is /home/<User>;
	// default envd.DefaultUser.
	User string
	// Envs are environment variables every guest process gets.
	Envs map[string]string
	// MaxUploadBytes bounds one upload; default envd.DefaultMaxUploadBytes.
	MaxUploadBytes int64
}

// EnvdHandler returns a node.Config.EnvdHandler that starts cfg's envd guest
// for each sandbox. The returned *envd.Guest is an io.Closer, which the
// node closes when the sandbox goes away.
func EnvdHandler(cfg EnvdConfig) func(node.SandboxInfo) (http.Handler, error) {
	secret := append([]byte(nil), cfg.Secret...)
	envs := make(map[string]string, len(cfg.Envs))
	for k, v := range cfg.Envs {
		envs[k] = v
	}
	return func(sb node.SandboxInfo) (http.Handler, error) {
		token := ""
		if len(secret) > 0 {
			token = envd.DeriveAccessToken(secret, sb.Token)
		}
		g, err := envd.NewHandler(envd.Config{
			Root:           sb.ScratchDir,
			AccessToken:    token,
			Version:        cfg.Version,
			User:           cfg.User,
			Envs:           envs,
			MaxUploadBytes: cfg.MaxUploadBytes,
			// envd 0.8.0 speaks HTTP/1.1 only, and so does the node's
			// listener for port 49983.
			HTTP1Only: true,
		})
		if err != nil {
			return nil, fmt.Errorf("envd guest for %s: %w", sb.ID, err)
		}
		return g, nil
	}
}
