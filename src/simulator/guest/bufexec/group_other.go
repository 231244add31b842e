//go:build !unix

package bufexec

import (
	"os"
	"os/exec"
)

// ownGroup is a no-op where process groups are not a thing: only the
// command itself is killed.
func ownGroup(*exec.Cmd) {}

func killGroup(p *os.Process) { _ = p.Kill() }

func exitCode(cmd *exec.Cmd) int { return cmd.ProcessState.ExitCode() }
