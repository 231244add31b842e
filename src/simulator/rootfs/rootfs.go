// Package rootfs finds the root filesystem of the simulator's `base`
// template: the Debian tree tools/build/rootfs.sh provisions once into the
// user's cache, which every simulated sandbox sees as `/` (shared read-only,
// with a writable layer per sandbox on top).
//
// The contract with the script (docs/simulator.md, "Base root filesystem"):
//
//   - SANDBOX_OPERATOR_BASE_ROOTFS, when set, names the tree. tools/bazel sets
//     it for tests and `bazel run` targets.
//   - Otherwise the tree is the link
//     ${SANDBOX_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandbox-operator}/rootfs/base,
//     the same cache root tools/build uses.
//   - A tree is complete when it holds etc/sandbox-operator/rootfs, which the
//     script writes last (and the tree is only renamed into place after that).
//
// It also finds the code-interpreter layer of the `e2b-ci` template, which
// tools/build/rootfs-ci.sh computes over the base tree, under the same rules
// (see CodeInterpreter).
package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// EnvVar names the environment variable that overrides where the base root
// filesystem is.
const EnvVar = "SANDBOX_OPERATOR_BASE_ROOTFS"

// Marker is the file, relative to the tree, whose presence says the tree is
// complete. It also describes the tree (template, version, suite, packages),
// so a sandbox can read what it runs on.
const Marker = "etc/sandbox-operator/rootfs"

// Script is the command that provisions the tree, relative to the
// repository root; errors name it so the fix is one command away.
const Script = "tools/build/rootfs.sh"

// Base returns the directory holding the base template's root filesystem,
// with symbolic links resolved, so a sandbox keeps using the tree it started
// on even if a newer one replaces the link. It fails, saying how to provision
// the tree, when the directory is missing or incomplete.
func Base() (string, error) {
	def, err := DefaultPath()
	return resolve(treeKind{what: "base root filesystem", envVar: EnvVar, marker: Marker, script: Script}, def, err)
}

// treeKind is what differs between the trees this package finds.
type treeKind struct {
	what   string // for errors: "base root filesystem"
	envVar string
	marker string
	script string
}

// resolve finds the tree of kind k: the directory its environment variable
// names, else def (errDef when the default cannot be computed). The result
// has symbolic links resolved and holds k's marker.
func resolve(k treeKind, def string, errDef error) (string, error) {
	dir, fromEnv := os.Getenv(k.envVar), true
	if dir == "" {
		fromEnv = false
		if errDef != nil {
			return "", fmt.Errorf("%s: %w; set %s to a provisioned tree (%s as root provisions one)", k.what, errDef, k.envVar, k.script)
		}
		dir = def
	}
	// The fix depends on who chose the path: the script provisions only the
	// default one, so a wrong override is fixed by changing the override.
	where := dir + " (the default path in the user's cache)"
	fix := "provision it with " + k.script + " as root (tools/bazel runs it)"
	if fromEnv {
		where = dir + " (from " + k.envVar + ")"
		fix = "point " + k.envVar + " at the tree " + k.script + " provisions (run it as root; it prints the path) or unset it to use that tree"
	}

	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%s: %s does not exist; %s", k.what, where, fix)
		}
		return "", fmt.Errorf("%s: %s: %w", k.what, where, err)
	}
	// Callers mount it or hand it to other processes, whose working directory
	// may differ.
	if resolved, err = filepath.Abs(resolved); err != nil {
		return "", fmt.Errorf("%s: %s: %w", k.what, where, err)
	}
	if fi, err := os.Stat(resolved); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s: %s is not a directory; %s", k.what, where, fix)
	}
	if fi, err := os.Stat(filepath.Join(resolved, k.marker)); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s: %s is incomplete (no %s, which %s writes last); %s", k.what, where, k.marker, k.script, fix)
	}
	return resolved, nil
}

// DefaultPath returns where tools/build/rootfs.sh links the current tree when
// SANDBOX_OPERATOR_BASE_ROOTFS is not set, without checking that it exists.
func DefaultPath() (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "rootfs", "base"), nil
}

// CacheDir is the user's cache root of this project, which the scripts and
// the local tools share: SANDBOX_OPERATOR_CACHE, else sandbox-operator
// under the XDG cache directory. It follows the scripts' rule on every OS
// (the XDG one, not os.UserCacheDir's), because the same path must come
// out of both.
func CacheDir() (string, error) {
	if cache := os.Getenv("SANDBOX_OPERATOR_CACHE"); cache != "" {
		return cache, nil
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home := os.Getenv("HOME")
		if home == "" {
			return "", errors.New("neither SANDBOX_OPERATOR_CACHE, XDG_CACHE_HOME nor HOME is set, so the user's cache cannot be found")
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "sandbox-operator"), nil
}
