package app

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// LogLevelEnv selects the log level of the binaries, as in every binary of
// this repository.
const LogLevelEnv = "OPERATOR_LOG_LEVEL"

// NewLogger returns the process logger on w at the level named by value
// (OPERATOR_LOG_LEVEL's value; empty is info). Any other value is an
// error rather than a silent fallback.
func NewLogger(w io.Writer, value string) (*slog.Logger, error) {
	var level slog.Level
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "", "info":
		level = slog.LevelInfo
	case "debug":
		level = slog.LevelDebug
	case "warn", "warning":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		return nil, fmt.Errorf("%s=%q is not a log level: use debug, info, warn or error", LogLevelEnv, value)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), nil
}
