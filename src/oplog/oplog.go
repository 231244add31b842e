// Package oplog builds the process logger every binary of this repository
// uses: log/slog text on stderr, at the level OPERATOR_LOG_LEVEL names.
package oplog

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// LevelEnv is the environment variable that selects the log level.
const LevelEnv = "OPERATOR_LOG_LEVEL"

// ParseLevel reads LevelEnv's value; empty means info. Any other value
// fails startup rather than silently logging at a level the operator did
// not ask for.
func ParseLevel(value string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "", "info":
		return slog.LevelInfo, nil
	case "debug":
		return slog.LevelDebug, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	default:
		return 0, fmt.Errorf("%s=%q is not a log level: use debug, info, warn or error", LevelEnv, value)
	}
}

// New returns the process logger writing to w at level, and makes it
// slog's default so libraries logging through slog land in the same stream.
func New(w io.Writer, level slog.Level) *slog.Logger {
	logger := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(logger)
	return logger
}

// FromEnv is ParseLevel of the value followed by New.
func FromEnv(w io.Writer, value string) (*slog.Logger, error) {
	level, err := ParseLevel(value)
	if err != nil {
		return nil, err
	}
	return New(w, level), nil
}
