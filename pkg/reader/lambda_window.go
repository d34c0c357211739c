package reader

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// DeliverWindow implements WindowTarget: it invokes the function with the
// event Lambda's trigger sends with a tumbling window
// (events.KinesisTimeWindowEvent: Records, window {start, end} in RFC 3339,
// state, shardId, eventSourceARN, isFinalInvokeForWindow,
// isWindowTerminatedEarly, in that order) and reads
// events.KinesisTimeWindowEventResponse (state, batchItemFailures) from the
// answer, as Deliver reads a KinesisEventResponse. An answer without a state
// (absent or null), or whose state is not a JSON object, failed
// (ResponseError, matching ErrBadResponse and ErrNoState), as Lambda's
// trigger counts it. A batch over MaxPayload is split into requests sent in
// order, each with the state the previous one returned.
func (t *LambdaTarget) DeliverWindow(ctx context.Context, b WindowBatch) (int, json.RawMessage, error) {
	seqs := make([]string, len(b.Records))
	sizes := make([]int, len(b.Records))
	parts := make([][]byte, len(b.Records))
	state := b.State
	if !hasState(state) {
		state = emptyState
	}
	tail := func(st json.RawMessage) []byte { return windowTail(b, st) }
	for i := range b.Records {
		r := t.record(b.Batch, i)
		p, err := json.Marshal(r)
		if err != nil {
			return 0, nil, fmt.Errorf("reader: marshal record %s: %w", r.EventID, err)
		}
		parts[i], sizes[i], seqs[i] = p, len(p), r.Kinesis.SequenceNumber
		if n := len(eventHead) + len(p) + len(tail(state)); n > t.opts.MaxPayload {
			return 0, nil, &RecordTooLargeError{ShardID: b.ShardID, Seq: r.Kinesis.SequenceNumber, Size: n, Limit: t.opts.MaxPayload}
		}
	}
	for start := 0; start == 0 || start < len(parts); {
		tl := tail(state)
		end, size := start, len(eventHead)+len(tl)
		for end < len(parts) {
			add := sizes[end]
			if end > start {
				add++ // comma
			}
			if size+add > t.opts.MaxPayload {
				break
			}
			size += add
			end++
		}
		if end == start && start < len(parts) {
			// The state grew so that the next record no longer fits with it.
			return start, state, &RecordTooLargeError{ShardID: b.ShardID, Seq: seqs[start], Size: size + sizes[start], Limit: t.opts.MaxPayload}
		}
		var buf bytes.Buffer
		buf.Grow(size)
		buf.WriteString(eventHead)
		for i := start; i < end; i++ {
			if i > start {
				buf.WriteByte(',')
			}
			buf.Write(parts[i])
		}
		buf.Write(tl)
		n, st, err := t.invokeWindow(ctx, buf.Bytes(), seqs[start:end])
		if n > 0 || err == nil {
			state = st
		}
		if err != nil || n < end-start || end == len(parts) {
			return start + n, state, err
		}
		start = end
	}
	return len(parts), state, nil
}

// windowTail closes the Records array and writes the window's fields.
func windowTail(b WindowBatch, state json.RawMessage) []byte {
	var buf bytes.Buffer
	buf.WriteString(`],"window":{"start":`)
	buf.WriteString(strconv.Quote(b.Window.Start.UTC().Format(time.RFC3339)))
	buf.WriteString(`,"end":`)
	buf.WriteString(strconv.Quote(b.Window.End.UTC().Format(time.RFC3339)))
	buf.WriteString(`},"state":`)
	buf.Write(bytes.TrimSpace(state))
	buf.WriteString(`,"shardId":`)
	buf.WriteString(strconv.Quote(b.ShardID))
	buf.WriteString(`,"eventSourceARN":`)
	buf.WriteString(strconv.Quote(b.StreamARN))
	buf.WriteString(`,"isFinalInvokeForWindow":` + strconv.FormatBool(b.Final))
	buf.WriteString(`,"isWindowTerminatedEarly":` + strconv.FormatBool(b.TerminatedEarly))
	buf.WriteString(`}`)
	return buf.Bytes()
}

// invokeWindow sends one windowed request and returns how many of its
// records settled and the state of the answer.
func (t *LambdaTarget) invokeWindow(ctx context.Context, payload []byte, seqs []string) (int, json.RawMessage, error) {
	in := &lambda.InvokeInput{FunctionName: aws.String(t.function), InvocationType: ltypes.InvocationTypeRequestResponse, Payload: payload}
	if t.opts.Qualifier != "" {
		in.Qualifier = aws.String(t.opts.Qualifier)
	}
	out, err := t.client.Invoke(ctx, in)
	if err != nil {
		return 0, nil, fmt.Errorf("reader: invoke target %s: %w", t.function, err)
	}
	n, err := t.settled(out, seqs)
	if err != nil {
		return n, nil, err
	}
	var resp struct {
		State json.RawMessage `json:"state"`
	}
	body := bytes.TrimSpace(out.Payload)
	if len(body) > 0 {
		_ = json.Unmarshal(body, &resp) // settled read it already
	}
	switch {
	case !hasState(resp.State):
		return 0, nil, &noStateError{ResponseError{Function: t.function, Reason: "answer has no state: with a tumbling window every answer must carry one", Body: snippet(body)}}
	case resp.State[0] != '{':
		return 0, nil, &noStateError{ResponseError{Function: t.function, Reason: "answer's state is not a JSON object", Body: snippet(body)}}
	}
	return n, resp.State, nil
}

// noStateError is a ResponseError that also matches ErrNoState.
type noStateError struct{ ResponseError }

func (e *noStateError) Is(target error) bool { return target == ErrNoState || target == ErrBadResponse }
