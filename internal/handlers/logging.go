package handlers

import (
	"context"
	"io"
	"log/slog"
	"sync"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/shardloop/shardloop/internal/lambdaenv"
)

// RequestIDKey is the key of the request id on each log line, as Lambda's
// own JSON log lines name it.
const RequestIDKey = "requestId"

// Invocations knows the invocations in flight, so that a log line written
// during one carries its request id even when the code that logs it was
// given no context (the reader, the coordinator and the metrics log with
// the logger they were built with, once per cold start).
type Invocations struct {
	mu  sync.Mutex
	ids map[string]int
}

// Begin records the invocation of ctx (its Lambda request id) as in flight
// until the returned end is called.
func (in *Invocations) Begin(ctx context.Context) (end func()) {
	id := requestID(ctx)
	if in == nil || id == "" {
		return func() {}
	}
	in.mu.Lock()
	if in.ids == nil {
		in.ids = map[string]int{}
	}
	in.ids[id]++
	in.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			in.mu.Lock()
			if in.ids[id]--; in.ids[id] <= 0 {
				delete(in.ids, id)
			}
			in.mu.Unlock()
		})
	}
}

// only returns the request id of the one invocation in flight. With none,
// or with several (a function that runs invocations concurrently), a line
// logged without a context carries no id rather than a wrong one.
func (in *Invocations) only() (string, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.ids) != 1 {
		return "", false
	}
	for id := range in.ids {
		return id, true
	}
	return "", false
}

func requestID(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		return lc.AwsRequestID
	}
	return ""
}

// NewLogger returns the functions' logger, writing to w (stdout on
// Lambda) as cfg says, and the Invocations whose request ids it adds:
// every line logged while an invocation is in flight carries requestId, as
// do lines logged with the invocation's context. JSON lines use the keys of
// Lambda's own JSON log format (timestamp, level, message, requestId), so
// Lambda's log-level filtering and CloudWatch Logs Insights read them; with
// AWS_LAMBDA_LOG_FORMAT=Text they are key=value text. Lines of a cold
// start, before any invocation, have no request id: Lambda gives none.
func NewLogger(w io.Writer, cfg lambdaenv.Log) (*slog.Logger, *Invocations) {
	o := &slog.HandlerOptions{Level: cfg.Level, ReplaceAttr: lambdaKeys}
	var h slog.Handler = slog.NewTextHandler(w, o)
	if cfg.JSON {
		h = slog.NewJSONHandler(w, o)
	}
	in := &Invocations{}
	return slog.New(requestHandler{Handler: h, in: in}), in
}

// lambdaKeys names time, message and the levels Lambda's way.
func lambdaKeys(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.TimeKey:
		a.Key = "timestamp"
	case slog.MessageKey:
		a.Key = "message"
	case slog.LevelKey:
		switch l, _ := a.Value.Any().(slog.Level); {
		case l <= lambdaenv.LevelTrace:
			a.Value = slog.StringValue("TRACE")
		case l >= lambdaenv.LevelFatal:
			a.Value = slog.StringValue("FATAL")
		}
	}
	return a
}

// requestHandler adds the request id of the context, or of the one
// invocation in flight, to each record.
type requestHandler struct {
	slog.Handler
	in *Invocations
}

func (h requestHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, l)
}

func (h requestHandler) Handle(ctx context.Context, r slog.Record) error {
	id := requestID(ctx)
	if id == "" {
		id, _ = h.in.only()
	}
	if id != "" {
		r.AddAttrs(slog.String(RequestIDKey, id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestHandler{Handler: h.Handler.WithAttrs(as), in: h.in}
}

func (h requestHandler) WithGroup(name string) slog.Handler {
	return requestHandler{Handler: h.Handler.WithGroup(name), in: h.in}
}
