package reader

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// MaxLambdaPayload is Lambda's limit on a synchronous request payload.
const MaxLambdaPayload = 6 * 1024 * 1024 // 6,291,456 bytes

// LambdaInvoker is the part of the Lambda client a LambdaTarget uses.
type LambdaInvoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// LambdaOptions configure a LambdaTarget.
type LambdaOptions struct {
	// Region goes into each record's awsRegion. Required.
	Region string
	// Qualifier is a version or alias of the function; empty for $LATEST.
	Qualifier string
	// InvokeIdentityARN goes into each record's invokeIdentityArn.
	// Default "arn:aws:iam::000000000000:role/shardloop".
	InvokeIdentityARN string
	// MaxPayload caps one request's JSON payload. Default and maximum
	// MaxLambdaPayload.
	MaxPayload int
}

// LambdaTarget delivers batches to a Lambda function, synchronously, with
// exactly the payload Lambda's own Kinesis trigger sends
// (events.KinesisEvent), so a handler written for that trigger works
// unchanged. It reads events.KinesisEventResponse from the answer:
//
//   - an empty answer, null, {} or an empty batchItemFailures: every record
//     settled;
//   - batchItemFailures: settled up to the first failed record (the lowest
//     failed sequence number); the reader delivers again from there;
//   - an itemIdentifier that names no record of the request, an empty one,
//     or an answer that is not a KinesisEventResponse: the whole request
//     failed (ResponseError);
//   - a function error, whether from the API's FunctionError field, an
//     {"errorMessage","errorType"} body on a 200 answer, or the text "Task
//     timed out after …": the whole request failed (FunctionError).
//
// User records of a de-aggregated KPL record (Batch.Subs) keep their
// parent's sequenceNumber, as the KPL's own de-aggregation presents them;
// their kinesis object adds "subSequenceNumber" (and "explicitHashKey" when
// set), the fields the kinesis-aggregation libraries use, and their eventID
// is shardId:sequenceNumber:subSequenceNumber, so each is unique. A
// batchItemFailures itemIdentifier names the parent's sequence number and
// fails the whole aggregate from its first user record.
//
// A batch whose JSON would exceed MaxPayload is split into several
// requests, sent in order; a record that alone exceeds it is a
// RecordTooLargeError naming the record.
type LambdaTarget struct {
	client   LambdaInvoker
	function string
	opts     LambdaOptions
}

var _ Target = (*LambdaTarget)(nil)

// NewLambdaTarget returns a target that invokes function (a name or ARN).
func NewLambdaTarget(client LambdaInvoker, function string, optFns ...func(*LambdaOptions)) (*LambdaTarget, error) {
	var o LambdaOptions
	for _, f := range optFns {
		f(&o)
	}
	if o.InvokeIdentityARN == "" {
		o.InvokeIdentityARN = "arn:aws:iam::000000000000:role/shardloop"
	}
	if o.MaxPayload == 0 {
		o.MaxPayload = MaxLambdaPayload
	}
	switch {
	case client == nil:
		return nil, &InvalidError{Field: "lambda client", Value: "nil", Want: "a Lambda client"}
	case function == "":
		return nil, &InvalidError{Field: "target function", Value: function, Want: "a function name or ARN"}
	case o.Region == "":
		return nil, &InvalidError{Field: "Region", Value: o.Region, Want: "the region for awsRegion, e.g. us-east-1"}
	case o.MaxPayload < 1024 || o.MaxPayload > MaxLambdaPayload:
		return nil, &InvalidError{Field: "MaxPayload", Value: fmt.Sprint(o.MaxPayload), Want: fmt.Sprintf("1024 to %d bytes", MaxLambdaPayload)}
	}
	return &LambdaTarget{client: client, function: function, opts: o}, nil
}

// FunctionInfo returns the function as configured and the version it runs
// ("$LATEST" without a qualifier), for on-failure records.
func (t *LambdaTarget) FunctionInfo() (arn, version string) {
	if t.opts.Qualifier != "" {
		return t.function, t.opts.Qualifier
	}
	return t.function, "$LATEST"
}

// subRecord is the JSON of a user record of a de-aggregated KPL record: the
// event record whose kinesis object has two more fields.
type subRecord struct {
	events.KinesisEventRecord
	Kinesis subKinesis `json:"kinesis"`
}

type subKinesis struct {
	events.KinesisRecord
	SubSequenceNumber int64  `json:"subSequenceNumber"`
	ExplicitHashKey   string `json:"explicitHashKey,omitempty"`
}

// Event builds the Kinesis event Lambda's own trigger would send for b
// (without the sub-record fields of de-aggregated records, which Deliver
// adds).
func (t *LambdaTarget) Event(b Batch) events.KinesisEvent {
	ev := events.KinesisEvent{Records: make([]events.KinesisEventRecord, len(b.Records))}
	for i, r := range b.Records {
		seq := aws.ToString(r.SequenceNumber)
		rec := events.KinesisEventRecord{
			AwsRegion:         t.opts.Region,
			EventID:           b.ShardID + ":" + seq,
			EventName:         "aws:kinesis:record",
			EventSource:       "aws:kinesis",
			EventSourceArn:    b.StreamARN,
			EventVersion:      "1.0",
			InvokeIdentityArn: t.opts.InvokeIdentityARN,
			Kinesis: events.KinesisRecord{
				Data:                 r.Data,
				PartitionKey:         aws.ToString(r.PartitionKey),
				SequenceNumber:       seq,
				KinesisSchemaVersion: "1.0",
			},
		}
		if r.ApproximateArrivalTimestamp != nil {
			rec.Kinesis.ApproximateArrivalTimestamp = events.SecondsEpochTime{Time: *r.ApproximateArrivalTimestamp}
		}
		if r.EncryptionType != "" && r.EncryptionType != "NONE" {
			rec.Kinesis.EncryptionType = string(r.EncryptionType)
		}
		ev.Records[i] = rec
	}
	return ev
}

// The JSON of {"Records":[r1,r2]} is exactly head + r1 + "," + r2 + tail.
const (
	eventHead = `{"Records":[`
	eventTail = `]}`
)

// Deliver implements Target.
func (t *LambdaTarget) Deliver(ctx context.Context, b Batch) (int, error) {
	ev := t.Event(b)
	sizes := make([]int, len(ev.Records))
	parts := make([][]byte, len(ev.Records))
	for i, r := range ev.Records {
		var v any = r
		if sub := b.Sub(i); sub.Aggregated {
			r.EventID = fmt.Sprintf("%s:%d", r.EventID, sub.SubSequenceNumber)
			ev.Records[i].EventID = r.EventID
			v = subRecord{KinesisEventRecord: r, Kinesis: subKinesis{KinesisRecord: r.Kinesis, SubSequenceNumber: sub.SubSequenceNumber, ExplicitHashKey: sub.ExplicitHashKey}}
		}
		p, err := json.Marshal(v)
		if err != nil {
			return 0, fmt.Errorf("reader: marshal record %s: %w", r.EventID, err)
		}
		parts[i], sizes[i] = p, len(p)
		if n := len(eventHead) + len(p) + len(eventTail); n > t.opts.MaxPayload {
			return 0, &RecordTooLargeError{ShardID: b.ShardID, Seq: r.Kinesis.SequenceNumber, Size: n, Limit: t.opts.MaxPayload}
		}
	}
	for start := 0; start < len(parts); {
		end, size := start, len(eventHead)+len(eventTail)
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
		var buf bytes.Buffer
		buf.Grow(size)
		buf.WriteString(eventHead)
		for i := start; i < end; i++ {
			if i > start {
				buf.WriteByte(',')
			}
			buf.Write(parts[i])
		}
		buf.WriteString(eventTail)
		n, err := t.invoke(ctx, buf.Bytes(), ev.Records[start:end])
		if err != nil || n < end-start {
			return start + n, err
		}
		start = end
	}
	return len(parts), nil
}

// invoke sends one request and returns how many of its records settled.
func (t *LambdaTarget) invoke(ctx context.Context, payload []byte, recs []events.KinesisEventRecord) (int, error) {
	in := &lambda.InvokeInput{
		FunctionName:   aws.String(t.function),
		InvocationType: ltypes.InvocationTypeRequestResponse,
		Payload:        payload,
	}
	if t.opts.Qualifier != "" {
		in.Qualifier = aws.String(t.opts.Qualifier)
	}
	out, err := t.client.Invoke(ctx, in)
	if err != nil {
		return 0, fmt.Errorf("reader: invoke target %s: %w", t.function, err)
	}
	return t.settled(out, recs)
}

// settled reads one answer.
func (t *LambdaTarget) settled(out *lambda.InvokeOutput, recs []events.KinesisEventRecord) (int, error) {
	body := bytes.TrimSpace(out.Payload)
	var resp struct {
		ErrorMessage      *string                          `json:"errorMessage"`
		ErrorType         string                           `json:"errorType"`
		BatchItemFailures []events.KinesisBatchItemFailure `json:"batchItemFailures"`
	}
	parseErr := error(nil)
	if len(body) > 0 {
		parseErr = json.Unmarshal(body, &resp)
	}
	if fe := aws.ToString(out.FunctionError); fe != "" {
		return 0, &FunctionError{Function: t.function, Kind: fe, Type: resp.ErrorType, Message: messageOf(resp.ErrorMessage, body, parseErr)}
	}
	if parseErr != nil {
		if s := string(body); strings.HasPrefix(s, "Task timed out after") {
			return 0, &FunctionError{Function: t.function, Kind: "timeout", Message: snippet(body)}
		}
		return 0, &ResponseError{Function: t.function, Reason: "answer is not a KinesisEventResponse", Body: snippet(body)}
	}
	if resp.ErrorMessage != nil && resp.BatchItemFailures == nil {
		return 0, &FunctionError{Function: t.function, Kind: "body", Type: resp.ErrorType, Message: *resp.ErrorMessage}
	}
	if len(resp.BatchItemFailures) == 0 {
		return len(recs), nil
	}
	index := make(map[string]int, len(recs))
	for i, r := range recs {
		if _, dup := index[r.Kinesis.SequenceNumber]; !dup { // user records of one aggregate share it
			index[r.Kinesis.SequenceNumber] = i
		}
	}
	first := len(recs)
	for _, f := range resp.BatchItemFailures {
		i, ok := index[f.ItemIdentifier]
		if !ok {
			return 0, &ResponseError{Function: t.function, Reason: fmt.Sprintf("batchItemFailures names %q, not a sequence number of the request", f.ItemIdentifier), Body: snippet(body)}
		}
		first = min(first, i)
	}
	return first, nil
}

func messageOf(m *string, body []byte, parseErr error) string {
	if m != nil && parseErr == nil {
		return *m
	}
	return snippet(body)
}
