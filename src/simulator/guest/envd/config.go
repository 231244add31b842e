package envd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/utils/clock"
)

// Defaults applied by NewHandler to zero Config fields.
const (
	// DefaultVersion is the envd version this guest claims to be. The e2b SDK
	// gates features on it, and 0.8.0 is what cocoon's e2b-rt image ships.
	DefaultVersion = "0.8.0"
	// DefaultUser is the guest's default user, the one e2b templates use.
	DefaultUser = "user"
	// DefaultMaxUploadBytes bounds one POST /files request body (after gzip
	// decoding), so a client cannot fill the host disk through one upload.
	DefaultMaxUploadBytes int64 = 100 << 20
)

// Config describes one sandbox's envd-compatible guest.
type Config struct {
	// Root is the per-sandbox scratch directory. It stands in for the guest
	// user's home, which clients name /home/<User> (and root names /root):
	// paths are reported in that guest form, relative paths resolve under
	// it, commands run in it with HOME pointing at it, and file RPCs refuse
	// to leave it. With Machine set it is instead the machine's whole
	// filesystem, "/" inside a sandbox. Required.
	Root string
	// AccessToken is the envd access token (X-Access-Token). Empty turns
	// authentication off, as an unsecured e2b sandbox does.
	AccessToken string
	// Version is the envd version this guest reports; see DefaultVersion.
	Version string
	// User is the default user for requests that name none; see DefaultUser.
	// "root" and this user are the only names accepted. It must be a plain
	// name: its home is /home/<User>.
	User string
	// Envs are sandbox-wide environment variables: every process gets them
	// (request envs win), and GET /envs reports them.
	Envs map[string]string
	// MaxUploadBytes bounds one upload; see DefaultMaxUploadBytes.
	MaxUploadBytes int64
	// HTTP1Only turns off cleartext HTTP/2 (h2c), matching envd 0.8.0, which
	// installs no h2c handler. The default serves both.
	HTTP1Only bool
	// Machine, when set, makes the guest the daemon of a machine of its
	// own, whose whole filesystem Root is (see Machine); nil keeps Root a
	// stand-in for the home, as the unisolated simulator needs.
	Machine *Machine
	// Clock decides when a signed file URL has expired and stamps
	// /metrics; nil is the real clock.
	Clock clock.PassiveClock
}

// withDefaults validates c and fills its zero fields.
func (c Config) withDefaults() (Config, error) {
	if c.Root == "" {
		return c, errors.New("envd: Config.Root is required")
	}
	abs, err := filepath.Abs(c.Root)
	if err != nil {
		return c, fmt.Errorf("envd: resolving root %q: %w", c.Root, err)
	}
	// The canonical form is what paths are reported in and compared
	// against, so a root reached through a symlink (a /tmp link, say) still
	// matches the absolute paths clients send back.
	canonical, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return c, fmt.Errorf("envd: resolving root %q: %w", c.Root, err)
	}
	st, err := os.Stat(canonical)
	if err != nil {
		return c, fmt.Errorf("envd: root %q: %w", c.Root, err)
	}
	if !st.IsDir() {
		return c, fmt.Errorf("envd: root %q is not a directory", c.Root)
	}
	c.Root = canonical
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	if c.User == "" {
		c.User = DefaultUser
	}
	if c.User == "." || c.User == ".." || strings.ContainsAny(c.User, "/:\x00") {
		return c, fmt.Errorf("envd: user %q is not a plain user name", c.User)
	}
	if c.MaxUploadBytes <= 0 {
		c.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	envs := make(map[string]string, len(c.Envs))
	for k, v := range c.Envs {
		envs[k] = v
	}
	c.Envs = envs
	c.Machine = c.Machine.clone()
	return c, nil
}
