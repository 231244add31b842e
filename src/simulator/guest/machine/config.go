package machine

import (
	"fmt"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/codeinterp"
)

// Program is the name the program is registered under (isolate.Register):
// the isolate.Spec.Program of every sandbox that runs it.
const Program = "sandboxd-sim-guest"

// ControlPort is where the program listens inside the sandbox for the
// claim. The node's relay must never let a client reach it.
const ControlPort = 49982

// EnvdPort is where envd listens inside the sandbox once claimed.
const EnvdPort = sandboxd.EnvdPort

// Config is the program's configuration (isolate.Spec.Config, as JSON),
// fixed when the warm sandbox is prepared, before any claim.
type Config struct {
	// Envd starts the envd guest on EnvdPort after the claim.
	Envd bool `json:"envd,omitempty"`
	// EnvdVersion is the version envd reports; empty is
	// envd.DefaultVersion.
	EnvdVersion string `json:"envdVersion,omitempty"`
	// EnvdSecret keys envd's access token, which is derived from it and the
	// claim token (envd.DeriveAccessToken); empty turns authentication off.
	EnvdSecret []byte `json:"envdSecret,omitempty"`
	// MaxUploadBytes bounds one envd upload; 0 is envd's default.
	MaxUploadBytes int64 `json:"maxUploadBytes,omitempty"`
	// Envs are the environment variables every envd process gets.
	Envs map[string]string `json:"envs,omitempty"`
	// EchoPorts get the HTTP echo (HTTP/1.1 and h2c), TCPEchoPorts the raw
	// TCP echo, each on 127.0.0.1 inside.
	EchoPorts    []int `json:"echoPorts,omitempty"`
	TCPEchoPorts []int `json:"tcpEchoPorts,omitempty"`
	// CodeInterpreter starts e2b's code-interpreter server on
	// codeinterp.Port when the sandbox boots (its default kernel warm
	// before any claim), and hands it envd's access token at the claim.
	// The root filesystem must hold the code-interpreter layer.
	CodeInterpreter bool `json:"codeInterpreter,omitempty"`
}

// check refuses a configuration whose ports collide, so a sandbox fails at
// preparation, not at its claim.
func (c Config) check() error {
	used := map[int]string{ControlPort: "the control port"}
	if c.Envd {
		used[EnvdPort] = "envd"
	}
	if c.CodeInterpreter {
		used[codeinterp.Port] = "the code interpreter"
	}
	for _, set := range []struct {
		what  string
		ports []int
	}{{"HTTP echo", c.EchoPorts}, {"TCP echo", c.TCPEchoPorts}} {
		for _, p := range set.ports {
			if p < 1 || p > 65535 {
				return fmt.Errorf("machine: %s port %d out of range", set.what, p)
			}
			if other, dup := used[p]; dup {
				return fmt.Errorf("machine: %s port %d is already %s's", set.what, p, other)
			}
			used[p] = set.what
		}
	}
	return nil
}

// Claim is what the program learns when its warm sandbox is claimed.
type Claim struct {
	// ID is the sandbox's id, which the echo guests report.
	ID string `json:"id"`
	// Token is the claim token, from which envd's access token is derived.
	Token string `json:"token"`
}
