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
	state := b.State
	if !hasState(state) {
		state = emptyState
	}
	parts, seqs, err := t.encode(b.Batch, len(windowTail(b, state)))
	if err != nil {
		return 0, nil, err
	}
	n, err := t.split(b.ShardID, parts, seqs, func() []byte { return windowTail(b, state) }, func(payload []byte, seqs []string) (int, error) {
		n, st, err := t.invokeWindow(ctx, payload, seqs)
		if n > 0 || err == nil {
			state = st
		}
		return n, err
	})
	return n, state, err
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
