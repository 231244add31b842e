package buildsteps

// Log levels, e2b's LogLevel values.
const (
	LevelDebug = "debug"
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
)

// Log receives every line a build produces: the step it belongs to, its
// level and the text. Each step is announced with one info line such as
// "[3] RUN echo hi"; a command's stdout lines follow at info, its stderr
// lines at warn (many tools write progress there, so it is not an error).
// The ready command's output comes at debug: it runs every second.
// Run calls it from one goroutine at a time.
type Log func(step, level, message string)

// emit calls l unless it is nil, so a caller may pass no log.
func (l Log) emit(step, level, message string) {
	if l != nil {
		l(step, level, message)
	}
}
