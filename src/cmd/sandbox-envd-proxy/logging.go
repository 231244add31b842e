package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"k8s.io/klog/v2"
)

// logLevelEnv selects the log level, as in sandbox-apiserver.
const logLevelEnv = "OPERATOR_LOG_LEVEL"

// parseLogLevel reads OPERATOR_LOG_LEVEL; empty means info, anything
// unknown fails startup.
func parseLogLevel(value string) (slog.Level, error) {
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
		return 0, fmt.Errorf("%s=%q is not a log level: use debug, info, warn or error", logLevelEnv, value)
	}
}

// setupLogging builds the process logger and routes klog (client-go's
// informer logs) into it; klog's verbose levels appear only at debug.
func setupLogging(w io.Writer, level slog.Level) *slog.Logger {
	logger := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(logger)
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	verbosity := "0"
	if level <= slog.LevelDebug {
		verbosity = "4"
	}
	_ = fs.Set("v", verbosity)
	klog.SetSlogLogger(logger)
	return logger
}
