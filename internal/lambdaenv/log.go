package lambdaenv

import (
	"errors"
	"log/slog"
	"strings"
)

// Lambda's advanced logging controls: a function configured with a log
// format and an application log level gets them in these variables
// (Lambda sets them; a function's own environment cannot).
const (
	VarLogFormat = "AWS_LAMBDA_LOG_FORMAT"
	VarLogLevel  = "AWS_LAMBDA_LOG_LEVEL"
)

// Slog levels for Lambda's TRACE and FATAL, which slog does not name.
const (
	LevelTrace = slog.LevelDebug - 4
	LevelFatal = slog.LevelError + 4
)

// Log is how the functions log.
type Log struct {
	// JSON lines (the default), or key=value text with
	// AWS_LAMBDA_LOG_FORMAT=Text.
	JSON bool
	// Level is the lowest level written: AWS_LAMBDA_LOG_LEVEL, INFO when
	// unset.
	Level slog.Level
}

// LogFromEnv reads the functions' log format and level through getenv:
// JSON at INFO unless Lambda's variables say otherwise. A value Lambda
// would not set is an error naming the variable.
func LogFromEnv(getenv func(string) string) (Log, error) {
	l := Log{JSON: true, Level: slog.LevelInfo}
	var errs []error
	switch v := getenv(VarLogFormat); strings.ToUpper(v) {
	case "", "JSON":
	case "TEXT":
		l.JSON = false
	default:
		errs = append(errs, &Error{Var: VarLogFormat, Value: v, Want: "JSON or Text, as Lambda's LoggingConfig.LogFormat"})
	}
	switch v := getenv(VarLogLevel); strings.ToUpper(v) {
	case "", "INFO":
	case "TRACE":
		l.Level = LevelTrace
	case "DEBUG":
		l.Level = slog.LevelDebug
	case "WARN":
		l.Level = slog.LevelWarn
	case "ERROR":
		l.Level = slog.LevelError
	case "FATAL":
		l.Level = LevelFatal
	default:
		errs = append(errs, &Error{Var: VarLogLevel, Value: v, Want: "TRACE, DEBUG, INFO, WARN, ERROR or FATAL, as Lambda's LoggingConfig.ApplicationLogLevel"})
	}
	return l, errors.Join(errs...)
}
