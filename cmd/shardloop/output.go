package main

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
)

// choice is a flag that takes one of a few words.
type choice struct {
	value string
	words []string
}

func newChoice(def string, words ...string) *choice { return &choice{value: def, words: words} }

func (c *choice) String() string {
	if c == nil {
		return ""
	}
	return c.value
}

func (c *choice) Set(s string) error {
	for _, w := range c.words {
		if s == w {
			c.value = s
			return nil
		}
	}
	return fmt.Errorf("want %s", c.want())
}

func (c *choice) Get() any { return c.value }

func (c *choice) want() string {
	return strings.Join(c.words[:len(c.words)-1], ", ") + " or " + c.words[len(c.words)-1]
}

// Log formats of --log-format.
const (
	logText = "text"
	logJSON = "json"
)

// addLogFlags adds --log-format and -v to a command that logs.
func addLogFlags(fs *flags, defaultLevel string) (format *choice, verbose *bool) {
	format = newChoice(logText, logText, logJSON)
	fs.Var(format, "log-format", "`format` of the log lines on stderr: text (key=value) or json (one object a line, for log shippers)")
	fs.want("log-format", format.want())
	verbose = fs.Bool("v", false, "debug logs (without it: "+defaultLevel+" and above)")
	return format, verbose
}

// newLogger writes log lines to w in format (logText or logJSON) from level.
func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	o := &slog.HandlerOptions{Level: level}
	if format == logJSON {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// versionLine is what --version prints: the module version the binary was
// built at (a tag, a pseudo-version from the commit, or "(devel)"), the
// commit and whether the tree had changes, and the Go version.
func versionLine() string {
	version, commit, modified := "(devel)", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	var parts []string
	if commit != "" {
		c := "commit " + commit[:min(len(commit), 12)]
		if modified {
			c += " with local changes"
		}
		parts = append(parts, c)
	}
	parts = append(parts, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
	return fmt.Sprintf("shardloop %s (%s)", version, strings.Join(parts, ", "))
}
