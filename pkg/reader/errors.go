package reader

import (
	"errors"
	"fmt"

	"github.com/shardloop/shardloop/internal/awsconf"
)

// Sentinel errors; match them with errors.Is through any wrapping.
var (
	// ErrInvalid: bad input (a position, options or a state), reported
	// before any request is sent.
	ErrInvalid = errors.New("invalid reader input")
	// ErrAggregatedRecord: a record packed by the Kinesis Producer Library,
	// which the reader does not de-aggregate.
	ErrAggregatedRecord = errors.New("KPL-aggregated record")
	// ErrFunction: the target Lambda function failed (a function error, an
	// error body on a 200 answer, or a timeout).
	ErrFunction = errors.New("target function error")
	// ErrBadResponse: the target's answer could not be read as a
	// KinesisEventResponse, or named a record that was not in the batch.
	ErrBadResponse = errors.New("bad target response")
	// ErrRecordTooLarge: one record alone does not fit in a Lambda request.
	ErrRecordTooLarge = errors.New("record too large for one Lambda request")
	// ErrPartial: the target settled only part of a batch (batchItemFailures).
	ErrPartial = errors.New("target settled part of the batch")
	// ErrNotRun: the target function did not run: Lambda refused the
	// Invoke (a throttle, or any other 4xx answer: not found, access
	// denied, a request too large), or the request never left this host.
	// Unlike a broken connection or a timeout, nothing may still be running.
	ErrNotRun = errors.New("target function did not run")
)

// notRun reports whether an Invoke's error says the function did not run:
// an answer with a 4xx status (Lambda checks the request, the function and
// its concurrency before it runs anything), or a request never sent.
func notRun(err error) bool {
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) && status.HTTPStatusCode() >= 400 && status.HTTPStatusCode() < 500 {
		return true
	}
	return awsconf.NeverLeft(err)
}

// InvalidError names the input field that was refused and what was
// expected. It matches ErrInvalid.
type InvalidError struct {
	Field string
	Value string
	Want  string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("reader: invalid %s %q: want %s", e.Field, e.Value, e.Want)
}

// Is reports whether target is ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// AggregatedRecordError reports a KPL-aggregated record (data prefix
// F3 89 9A C2) that was not delivered: de-aggregation is off, or the record
// is corrupt (Err says how). It matches ErrAggregatedRecord.
type AggregatedRecordError struct {
	Stream  string
	ShardID string
	Seq     string
	Err     error // why de-aggregation failed; nil when it is off
}

func (e *AggregatedRecordError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("reader: %s %s seq %s: KPL-aggregated record not delivered: %v", e.Stream, e.ShardID, e.Seq, e.Err)
	}
	return fmt.Sprintf("reader: %s %s seq %s: KPL-aggregated record not delivered (de-aggregation is off)", e.Stream, e.ShardID, e.Seq)
}

// Unwrap returns the decoding error, if any.
func (e *AggregatedRecordError) Unwrap() error { return e.Err }

// Is reports whether target is ErrAggregatedRecord.
func (e *AggregatedRecordError) Is(target error) bool { return target == ErrAggregatedRecord }

// FunctionError is a failed invocation of the target function: the Lambda
// API's FunctionError field, an {"errorMessage","errorType"} body on a
// 200 answer (what the Runtime Interface Emulator sends), or a timeout.
// It matches ErrFunction.
type FunctionError struct {
	Function string
	// Kind is the FunctionError field ("Handled", "Unhandled"), "body" for an
	// error body without that field, or "timeout".
	Kind    string
	Type    string // errorType, when the body had one
	Message string // errorMessage or the body's text
}

func (e *FunctionError) Error() string {
	msg := fmt.Sprintf("reader: target %s: function error (%s)", e.Function, e.Kind)
	if e.Type != "" {
		msg += " " + e.Type
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Is reports whether target is ErrFunction.
func (e *FunctionError) Is(target error) bool { return target == ErrFunction }

// Timeout reports whether the function timed out.
func (e *FunctionError) Timeout() bool { return e.Kind == "timeout" }

// ResponseError is a target answer the reader could not use; the whole
// request counts as failed. It matches ErrBadResponse.
type ResponseError struct {
	Function string
	Reason   string
	Body     string // up to 256 bytes of the answer
}

func (e *ResponseError) Error() string {
	return fmt.Sprintf("reader: target %s: %s: %q", e.Function, e.Reason, e.Body)
}

// Is reports whether target is ErrBadResponse.
func (e *ResponseError) Is(target error) bool { return target == ErrBadResponse }

// RecordTooLargeError names a record that alone exceeds the request
// payload limit. It matches ErrRecordTooLarge.
type RecordTooLargeError struct {
	ShardID string
	Seq     string
	Size    int // marshalled size of the request holding only this record
	Limit   int
}

func (e *RecordTooLargeError) Error() string {
	return fmt.Sprintf("reader: record %s:%s needs a %d-byte request, over the %d-byte Lambda payload limit", e.ShardID, e.Seq, e.Size, e.Limit)
}

// Is reports whether target is ErrRecordTooLarge.
func (e *RecordTooLargeError) Is(target error) bool { return target == ErrRecordTooLarge }

func snippet(b []byte) string {
	if len(b) > 256 {
		return string(b[:256]) + "…"
	}
	return string(b)
}
