package buildsteps

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/cocoonstack/sandbox-operator/src/envd/processpb/processpbconnect"
)

// defaultUser is the user RUN steps run as when Guest.User is empty: the
// user e2b templates are built for.
const defaultUser = "user"

// rootUser runs the runner's own work: uploads, extraction, profile
// scripts.
const rootUser = "root"

// accessTokenHeader carries envd's access token.
const accessTokenHeader = "X-Access-Token"

// Guest is the envd of the build's sandbox.
type Guest struct {
	HTTPClient  *http.Client // dials the sandbox's envd (through the relay)
	BaseURL     string       // e.g. "http://envd"
	AccessToken string       // sent as X-Access-Token; empty sends none
	User        string       // default user of RUN steps, "user" when empty
}

// envd is a Guest ready for requests.
type envd struct {
	g       Guest
	base    string
	process processpbconnect.ProcessClient
}

func newEnvd(g Guest) (*envd, error) {
	if g.HTTPClient == nil {
		return nil, errors.New("buildsteps: Guest.HTTPClient is required")
	}
	base := strings.TrimSuffix(g.BaseURL, "/")
	if base == "" {
		return nil, errors.New("buildsteps: Guest.BaseURL is required")
	}
	if g.User == "" {
		g.User = defaultUser
	}
	if err := checkUser(g.User); err != nil {
		return nil, fmt.Errorf("buildsteps: Guest.User: %w", err)
	}
	// JSON, as the SDK's own process calls are: the codec every envd is
	// exercised with.
	pc := processpbconnect.NewProcessClient(g.HTTPClient, base, connect.WithProtoJSON())
	return &envd{g: g, base: base, process: pc}, nil
}

// authorize sets what envd reads off every request: the access token, and
// for RPCs the Linux user, named e2b's way as "Basic base64(user:)".
func (e *envd) authorize(h http.Header, user string) {
	if e.g.AccessToken != "" {
		h.Set(accessTokenHeader, e.g.AccessToken)
	}
	if user != "" {
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":")))
	}
}
