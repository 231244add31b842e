// Package logging builds the one logger of a process: log/slog text on
// stderr at the level OPERATOR_LOG_LEVEL (or a flag) names, with klog
// (which client-go and the generic apiserver library log through) and
// controller-runtime's logger routed into the same stream. Binaries build
// it once in main and pass it down; library packages take a *slog.Logger
// and never use a global one.
package logging

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
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

// New returns the process logger writing to w at level. It becomes slog's
// default and klog's sink, so that what libraries log by themselves lands
// in the same stream; klog's verbose levels map onto slog below info and
// so appear only at debug.
func New(w io.Writer, level slog.Level) *slog.Logger {
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
	// controller-runtime's pieces (the certificate watcher, the warm-pool
	// driver's clients) log through their own global logger, which
	// otherwise drops everything and complains on stderr.
	ctrllog.SetLogger(logr.FromSlogHandler(logger.Handler()))
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
