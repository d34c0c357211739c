package reader

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

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
	// InvokeIdentityARN goes into each record's invokeIdentityArn: the
	// ARN of the role that invokes the target (on Lambda, the shardreader's
	// execution role), as Lambda's trigger puts its own there. Empty writes
	// an empty string: nothing is made up.
	InvokeIdentityARN string
	// MaxPayload caps one request's JSON payload. Default and maximum
	// MaxLambdaPayload.
	MaxPayload int
}

// LambdaTarget delivers batches to a Lambda function, synchronously, with
// exactly the payload Lambda's own Kinesis trigger sends
// (events.KinesisEvent), so a handler written for that trigger works
// unchanged: the same fields in the same order, approximateArrivalTimestamp
// as epoch seconds with exactly the record's milliseconds
// (1545084650.987). It reads events.KinesisEventResponse from the answer:
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

// Event builds the Kinesis event Lambda's own trigger would send for b, as
// aws-lambda-go's type (without the sub-record fields of de-aggregated
// records). Deliver sends the same event, written field by field.
func (t *LambdaTarget) Event(b Batch) events.KinesisEvent {
	ev := events.KinesisEvent{Records: make([]events.KinesisEventRecord, len(b.Records))}
	for i, r := range b.Records {
		w := t.record(b, i)
		rec := events.KinesisEventRecord{
			AwsRegion:         w.AwsRegion,
			EventID:           w.EventID,
			EventName:         w.EventName,
			EventSource:       w.EventSource,
			EventSourceArn:    w.EventSourceARN,
			EventVersion:      w.EventVersion,
			InvokeIdentityArn: w.InvokeIdentityArn,
			Kinesis: events.KinesisRecord{
				Data:                 w.Kinesis.Data,
				EncryptionType:       w.Kinesis.EncryptionType,
				PartitionKey:         w.Kinesis.PartitionKey,
				SequenceNumber:       w.Kinesis.SequenceNumber,
				KinesisSchemaVersion: w.Kinesis.KinesisSchemaVersion,
			},
		}
		if r.ApproximateArrivalTimestamp != nil {
			rec.Kinesis.ApproximateArrivalTimestamp = events.SecondsEpochTime{Time: *r.ApproximateArrivalTimestamp}
		}
		ev.Records[i] = rec
	}
	return ev
}

// wireRecord is one record of the event as Lambda's Kinesis trigger writes
// it, its fields in that order (see testdata/native-kinesis-event.json).
type wireRecord struct {
	Kinesis           wireKinesis `json:"kinesis"`
	EventSource       string      `json:"eventSource"`
	EventVersion      string      `json:"eventVersion"`
	EventID           string      `json:"eventID"`
	EventName         string      `json:"eventName"`
	InvokeIdentityArn string      `json:"invokeIdentityArn"`
	AwsRegion         string      `json:"awsRegion"`
	EventSourceARN    string      `json:"eventSourceARN"`
}

type wireKinesis struct {
	KinesisSchemaVersion        string       `json:"kinesisSchemaVersion"`
	PartitionKey                string       `json:"partitionKey"`
	SequenceNumber              string       `json:"sequenceNumber"`
	Data                        []byte       `json:"data"`
	ApproximateArrivalTimestamp epochSeconds `json:"approximateArrivalTimestamp"`
	EncryptionType              string       `json:"encryptionType,omitempty"`
	// The fields of a user record of a de-aggregated KPL record, as the
	// kinesis-aggregation libraries name them.
	SubSequenceNumber *int64 `json:"subSequenceNumber,omitempty"`
	ExplicitHashKey   string `json:"explicitHashKey,omitempty"`
}

// epochSeconds is a time written as a JSON number of seconds since the
// epoch with exactly its milliseconds, 1545084650.987, as Lambda writes
// approximateArrivalTimestamp: built from the integer milliseconds, so no
// float rounding shows (aws-lambda-go's SecondsEpochTime writes
// 1796112598.6790001 for that one).
type epochSeconds time.Time

// MarshalJSON writes the seconds, then a point and the milliseconds
// without trailing zeros when there are any: 1545084650.987, 1545084650.98,
// 1545084650. The zero time is 0.
func (e epochSeconds) MarshalJSON() ([]byte, error) {
	t := time.Time(e)
	if t.IsZero() {
		return []byte("0"), nil
	}
	ms := t.UnixMilli()
	if ms < 0 {
		return strconv.AppendFloat(nil, float64(ms)/1000, 'f', -1, 64), nil
	}
	b := strconv.AppendInt(nil, ms/1000, 10)
	if frac := ms % 1000; frac != 0 {
		digits := []byte{'.', byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
		b = append(b, bytes.TrimRight(digits, "0")...)
	}
	return b, nil
}

// record is record i of b as the event carries it.
func (t *LambdaTarget) record(b Batch, i int) wireRecord {
	r := b.Records[i]
	seq := aws.ToString(r.SequenceNumber)
	w := wireRecord{
		Kinesis: wireKinesis{
			KinesisSchemaVersion: "1.0",
			PartitionKey:         aws.ToString(r.PartitionKey),
			SequenceNumber:       seq,
			Data:                 r.Data,
		},
		EventSource:       "aws:kinesis",
		EventVersion:      "1.0",
		EventID:           b.ShardID + ":" + seq,
		EventName:         "aws:kinesis:record",
		InvokeIdentityArn: t.opts.InvokeIdentityARN,
		AwsRegion:         t.opts.Region,
		EventSourceARN:    b.StreamARN,
	}
	if r.ApproximateArrivalTimestamp != nil {
		w.Kinesis.ApproximateArrivalTimestamp = epochSeconds(*r.ApproximateArrivalTimestamp)
	}
	if r.EncryptionType != "" && r.EncryptionType != "NONE" {
		w.Kinesis.EncryptionType = string(r.EncryptionType)
	}
	if sub := b.Sub(i); sub.Aggregated {
		w.EventID = fmt.Sprintf("%s:%d", w.EventID, sub.SubSequenceNumber)
		w.Kinesis.SubSequenceNumber = aws.Int64(sub.SubSequenceNumber)
		w.Kinesis.ExplicitHashKey = sub.ExplicitHashKey
	}
	return w
}

// Payload returns the event Deliver would send for b, in one piece (not
// split at the request limit): what an S3 on-failure destination stores.
func (t *LambdaTarget) Payload(b Batch) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(eventHead)
	for i := range b.Records {
		if i > 0 {
			buf.WriteByte(',')
		}
		p, err := json.Marshal(t.record(b, i))
		if err != nil {
			return nil, fmt.Errorf("reader: marshal record %d of the payload: %w", i, err)
		}
		buf.Write(p)
	}
	buf.WriteString(eventTail)
	return buf.Bytes(), nil
}

// The JSON of {"Records":[r1,r2]} is exactly head + r1 + "," + r2 + tail.
const (
	eventHead = `{"Records":[`
	eventTail = `]}`
)

// Deliver implements Target.
func (t *LambdaTarget) Deliver(ctx context.Context, b Batch) (int, error) {
	if len(b.Records) == 0 {
		return 0, nil
	}
	parts, seqs, err := t.encode(b, len(eventTail))
	if err != nil {
		return 0, err
	}
	tail := []byte(eventTail)
	return t.split(b.ShardID, parts, seqs, func() []byte { return tail }, func(payload []byte, seqs []string) (int, error) {
		return t.invoke(ctx, payload, seqs)
	})
}

// encode marshals each record of b once, for requests split at
// MaxPayload, and refuses a record that does not fit in a request alone,
// between the event's head and a tail of tailLen bytes.
func (t *LambdaTarget) encode(b Batch, tailLen int) (parts [][]byte, seqs []string, err error) {
	parts, seqs = make([][]byte, len(b.Records)), make([]string, len(b.Records))
	for i := range b.Records {
		r := t.record(b, i)
		p, err := json.Marshal(r)
		if err != nil {
			return nil, nil, fmt.Errorf("reader: marshal record %s: %w", r.EventID, err)
		}
		parts[i], seqs[i] = p, r.Kinesis.SequenceNumber
		if n := len(eventHead) + len(p) + tailLen; n > t.opts.MaxPayload {
			return nil, nil, &RecordTooLargeError{ShardID: b.ShardID, Seq: r.Kinesis.SequenceNumber, Size: n, Limit: t.opts.MaxPayload}
		}
	}
	return parts, seqs, nil
}

// split sends the records parts (whose sequence numbers are seqs) in
// order, as many to a request as fit in MaxPayload between the event's head
// and tail() (asked again for each request: a window's state changes), each
// by send, which returns how many of the request's records settled. It
// stops at the first request not wholly settled and returns how many
// records settled. With no records it sends one request (a window's final
// invocation).
func (t *LambdaTarget) split(shardID string, parts [][]byte, seqs []string, tail func() []byte, send func(payload []byte, seqs []string) (int, error)) (int, error) {
	for start := 0; start == 0 || start < len(parts); {
		tl := tail()
		end, size := start, len(eventHead)+len(tl)
		for end < len(parts) {
			add := len(parts[end])
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
			// The tail grew (a window's state) so that the next record no
			// longer fits with it.
			return start, &RecordTooLargeError{ShardID: shardID, Seq: seqs[start], Size: size + len(parts[start]), Limit: t.opts.MaxPayload}
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
		n, err := send(buf.Bytes(), seqs[start:end])
		if err != nil || n < end-start || end == len(parts) {
			return start + n, err
		}
		start = end
	}
	return len(parts), nil
}

// invoke sends one request and returns how many of its records, whose
// sequence numbers are seqs, settled.
func (t *LambdaTarget) invoke(ctx context.Context, payload []byte, seqs []string) (int, error) {
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
		if notRun(err) {
			return 0, fmt.Errorf("reader: invoke target %s: %w: %w", t.function, ErrNotRun, err)
		}
		return 0, fmt.Errorf("reader: invoke target %s: %w", t.function, err)
	}
	return t.settled(out, seqs)
}

// settled reads one answer.
func (t *LambdaTarget) settled(out *lambda.InvokeOutput, seqs []string) (int, error) {
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
		return len(seqs), nil
	}
	index := make(map[string]int, len(seqs))
	for i, seq := range seqs {
		if _, dup := index[seq]; !dup { // user records of one aggregate share it
			index[seq] = i
		}
	}
	first := len(seqs)
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
