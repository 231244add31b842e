package build

import "time"

// Status is a build's state, e2b's TemplateBuildStatus.
type Status string

// The states a build goes through: registered and queued builds wait,
// running ones build, and every build ends ready or in error.
const (
	Waiting  Status = "waiting"
	Building Status = "building"
	Ready    Status = "ready"
	Error    Status = "error"
)

// Done reports whether s is final.
func (s Status) Done() bool { return s == Ready || s == Error }

// Log levels, e2b's LogLevel values.
const (
	LevelDebug = "debug"
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
)

// LogEntry is one line of a build's log.
type LogEntry struct {
	Timestamp time.Time
	Level     string
	Message   string
	// Step names the build step the line belongs to: "base", the step's
	// 1-based position as a string, or "finalize"; empty for the build's
	// own lines.
	Step string
}

// Reason says why a build failed.
type Reason struct {
	Message string
	Step    string
	// Logs are the last lines of the failing step.
	Logs []LogEntry
}

// Failure is the error a Runner returns when a step failed; Step names it
// for the SDK, which maps it back to the user's source line.
type Failure struct {
	Step    string
	Message string
}

func (f *Failure) Error() string {
	if f.Step == "" {
		return f.Message
	}
	return "step " + f.Step + ": " + f.Message
}
