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
	dir, fromEnv := os.Getenv(EnvVar), true
	if dir == "" {
		fromEnv = false
		def, err := DefaultPath()
		if err != nil {
			return "", fmt.Errorf("base root filesystem: %w; set %s to a provisioned tree (%s as root provisions one)", err, EnvVar, Script)
		}
		dir = def
	}
	// The fix depends on who chose the path: the script provisions only the
	// default one, so a wrong override is fixed by changing the override.
	where := dir + " (the default path in the user's cache)"
	fix := "provision it with " + Script + " as root (tools/bazel runs it)"
	if fromEnv {
		where = dir + " (from " + EnvVar + ")"
		fix = "point " + EnvVar + " at the tree " + Script + " provisions (run it as root; it prints the path) or unset it to use that tree"
	}

	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("base root filesystem: %s does not exist; %s", where, fix)
		}
		return "", fmt.Errorf("base root filesystem: %s: %w", where, err)
	}
	// Callers mount it or hand it to other processes, whose working directory
	// may differ.
	if resolved, err = filepath.Abs(resolved); err != nil {
		return "", fmt.Errorf("base root filesystem: %s: %w", where, err)
	}
	if fi, err := os.Stat(resolved); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("base root filesystem: %s is not a directory; %s", where, fix)
	}
	if fi, err := os.Stat(filepath.Join(resolved, Marker)); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("base root filesystem: %s is incomplete (no %s, which %s writes last); %s", where, Marker, Script, fix)
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
