package reader

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
)

// invokeFunc is a fake Lambda client.
type invokeFunc func(ctx context.Context, in *lambda.InvokeInput) (*lambda.InvokeOutput, error)

func (f invokeFunc) Invoke(ctx context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	return f(ctx, in)
}

// handler answers an invoke like a Lambda handler: it gets the decoded
// event and returns the raw answer.
func handler(t *testing.T, h func(ev events.KinesisEvent) (*lambda.InvokeOutput, error)) invokeFunc {
	return func(_ context.Context, in *lambda.InvokeInput) (*lambda.InvokeOutput, error) {
		var ev events.KinesisEvent
		if err := json.Unmarshal(in.Payload, &ev); err != nil {
			t.Errorf("payload is not a KinesisEvent: %v", err)
		}
		return h(ev)
	}
}

func ok(body string) *lambda.InvokeOutput {
	return &lambda.InvokeOutput{StatusCode: 200, Payload: []byte(body)}
}

func records(shard string, n, size int) []types.Record {
	out := make([]types.Record, n)
	for i := range out {
		data := bytes.Repeat([]byte{'a' + byte(i%26)}, size)
		out[i] = types.Record{
			Data:                        data,
			PartitionKey:                aws.String(fmt.Sprintf("k%d", i)),
			SequenceNumber:              aws.String(fmt.Sprintf("4959%020d", i+1)),
			ApproximateArrivalTimestamp: aws.Time(time.UnixMilli(1700000000123 + int64(i))),
		}
	}
	return out
}

func newLambdaTarget(t *testing.T, c LambdaInvoker, fns ...func(*LambdaOptions)) *LambdaTarget {
	t.Helper()
	lt, err := NewLambdaTarget(c, "target-fn", append([]func(*LambdaOptions){func(o *LambdaOptions) { o.Region = "eu-west-1" }}, fns...)...)
	if err != nil {
		t.Fatal(err)
	}
	return lt
}

const testARN = "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"

func batchOf(recs []types.Record) Batch {
	return Batch{Stream: "orders", StreamARN: testARN, ShardID: "shardId-000000000003", Records: recs}
}

func TestLambdaTarget_SendsLambdasOwnKinesisEvent(t *testing.T) {
	var got map[string]any
	const role = "arn:aws:iam::123456789012:role/reader"
	lt := newLambdaTarget(t, invokeFunc(func(_ context.Context, in *lambda.InvokeInput) (*lambda.InvokeOutput, error) {
		if aws.ToString(in.FunctionName) != "target-fn" || in.InvocationType != "RequestResponse" {
			t.Errorf("invoke %s %s", aws.ToString(in.FunctionName), in.InvocationType)
		}
		if err := json.Unmarshal(in.Payload, &got); err != nil {
			t.Fatal(err)
		}
		return ok(""), nil
	}), func(o *LambdaOptions) { o.InvokeIdentityARN = role })
	recs := records("", 1, 3)
	n, err := lt.Deliver(context.Background(), batchOf(recs))
	if n != 1 || err != nil {
		t.Fatalf("Deliver = %d, %v", n, err)
	}
	rec := got["Records"].([]any)[0].(map[string]any)
	k := rec["kinesis"].(map[string]any)
	want := map[string]any{
		"awsRegion": "eu-west-1", "eventSource": "aws:kinesis", "eventVersion": "1.0",
		"eventName": "aws:kinesis:record", "eventSourceARN": testARN,
		"eventID":           "shardId-000000000003:" + aws.ToString(recs[0].SequenceNumber),
		"invokeIdentityArn": role,
	}
	for key, v := range want {
		if rec[key] != v {
			t.Errorf("%s = %v, want %v", key, rec[key], v)
		}
	}
	wantK := map[string]any{
		"data":                 base64.StdEncoding.EncodeToString(recs[0].Data),
		"partitionKey":         "k0",
		"sequenceNumber":       aws.ToString(recs[0].SequenceNumber),
		"kinesisSchemaVersion": "1.0",
	}
	if ts, _ := k["approximateArrivalTimestamp"].(float64); ts < 1700000000.1229 || ts > 1700000000.1231 {
		t.Errorf("kinesis.approximateArrivalTimestamp = %v, want 1700000000.123 (epoch seconds)", k["approximateArrivalTimestamp"])
	}
	for key, v := range wantK {
		if k[key] != v {
			t.Errorf("kinesis.%s = %v, want %v", key, k[key], v)
		}
	}
}

func TestLambdaTarget_BatchItemFailuresSettleUpToTheFirstFailedItem(t *testing.T) {
	recs := records("", 10, 10)
	lt := newLambdaTarget(t, handler(t, func(ev events.KinesisEvent) (*lambda.InvokeOutput, error) {
		// Out of order on purpose: the lowest failed sequence decides.
		b, _ := json.Marshal(events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{
			{ItemIdentifier: ev.Records[7].Kinesis.SequenceNumber},
			{ItemIdentifier: ev.Records[4].Kinesis.SequenceNumber},
		}})
		return ok(string(b)), nil
	}))
	n, err := lt.Deliver(context.Background(), batchOf(recs))
	if n != 4 || err != nil {
		t.Fatalf("Deliver = %d, %v; want 4, nil", n, err)
	}
}

func TestLambdaTarget_Answers(t *testing.T) {
	recs := records("", 3, 10)
	for _, tc := range []struct {
		name    string
		out     *lambda.InvokeOutput
		settled int
		is      error
		kind    string
	}{
		{"empty answer", ok(""), 3, nil, ""},
		{"null", ok("null"), 3, nil, ""},
		{"empty object", ok("{}"), 3, nil, ""},
		{"empty failures", ok(`{"batchItemFailures":[]}`), 3, nil, ""},
		{"null failures", ok(`{"batchItemFailures":null}`), 3, nil, ""},
		{"unknown identifier fails the whole batch", ok(`{"batchItemFailures":[{"itemIdentifier":"42"}]}`), 0, ErrBadResponse, ""},
		{"empty identifier fails the whole batch", ok(`{"batchItemFailures":[{"itemIdentifier":""}]}`), 0, ErrBadResponse, ""},
		{"unparseable answer fails the whole batch", ok(`all good`), 0, ErrBadResponse, ""},
		{"a JSON string fails the whole batch", ok(`"done"`), 0, ErrBadResponse, ""},
		{"FunctionError field", &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"), Payload: []byte(`{"errorMessage":"boom","errorType":"errorString"}`)}, 0, ErrFunction, "Unhandled"},
		{"FunctionError field with a raw body", &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Handled"), Payload: []byte(`oops`)}, 0, ErrFunction, "Handled"},
		{"200 with an error body (RIE)", ok(`{"errorMessage":"boom","errorType":"errorString"}`), 0, ErrFunction, "body"},
		{"RIE timeout text", ok(`Task timed out after 3.00 seconds`), 0, ErrFunction, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lt := newLambdaTarget(t, invokeFunc(func(context.Context, *lambda.InvokeInput) (*lambda.InvokeOutput, error) { return tc.out, nil }))
			n, err := lt.Deliver(context.Background(), batchOf(recs))
			if n != tc.settled {
				t.Errorf("settled = %d, want %d", n, tc.settled)
			}
			if tc.is == nil && err != nil || tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want %v", err, tc.is)
			}
			var fe *FunctionError
			if tc.kind != "" {
				if !errors.As(err, &fe) || fe.Kind != tc.kind {
					t.Fatalf("err = %#v, want FunctionError kind %s", err, tc.kind)
				}
				if tc.kind == "timeout" && !fe.Timeout() {
					t.Error("Timeout() = false")
				}
			}
		})
	}
}

func TestLambdaTarget_InvokeErrorFailsTheBatch(t *testing.T) {
	boom := errors.New("TooManyRequestsException")
	lt := newLambdaTarget(t, invokeFunc(func(context.Context, *lambda.InvokeInput) (*lambda.InvokeOutput, error) { return nil, boom }))
	n, err := lt.Deliver(context.Background(), batchOf(records("", 2, 1)))
	if n != 0 || !errors.Is(err, boom) {
		t.Fatalf("Deliver = %d, %v", n, err)
	}
}

func TestLambdaTarget_SplitsBatchesOver6MB(t *testing.T) {
	recs := records("", 12, 1000*1000) // ~1.33 MB each once base64'd: 16 MB of JSON
	var sizes, counts []int
	var seqs []string
	inner := handler(t, func(ev events.KinesisEvent) (*lambda.InvokeOutput, error) {
		for _, r := range ev.Records {
			seqs = append(seqs, r.Kinesis.SequenceNumber)
		}
		counts = append(counts, len(ev.Records))
		return ok(""), nil
	})
	lt := newLambdaTarget(t, invokeFunc(func(ctx context.Context, in *lambda.InvokeInput) (*lambda.InvokeOutput, error) {
		sizes = append(sizes, len(in.Payload))
		return inner(ctx, in)
	}))
	n, err := lt.Deliver(context.Background(), batchOf(recs))
	if n != 12 || err != nil {
		t.Fatalf("Deliver = %d, %v", n, err)
	}
	if len(sizes) < 3 {
		t.Fatalf("%d requests (%v), want at least 3", len(sizes), counts)
	}
	for i, s := range sizes {
		if s > MaxLambdaPayload {
			t.Errorf("request %d is %d bytes, over %d", i, s, MaxLambdaPayload)
		}
	}
	// Each request but the last is full: one more record would not fit.
	if sizes[0] < MaxLambdaPayload-1400*1000 {
		t.Errorf("request 0 is only %d bytes: split too early", sizes[0])
	}
	for i, s := range seqs {
		if s != aws.ToString(recs[i].SequenceNumber) {
			t.Fatalf("record %d delivered as %s: order lost", i, s)
		}
	}
	t.Logf("requests: %v records, %v bytes", counts, sizes)
}

func TestLambdaTarget_SplitStopsAtAFailedRequest(t *testing.T) {
	recs := records("", 6, 2000*1000/2) // 1 MB each: ~4 per request
	calls := 0
	lt := newLambdaTarget(t, handler(t, func(ev events.KinesisEvent) (*lambda.InvokeOutput, error) {
		calls++
		if calls == 2 {
			return ok(`{"errorMessage":"boom","errorType":"x"}`), nil
		}
		return ok(""), nil
	}))
	n, err := lt.Deliver(context.Background(), batchOf(recs))
	if !errors.Is(err, ErrFunction) || n == 0 || n >= 6 || calls != 2 {
		t.Fatalf("Deliver = %d, %v after %d calls; want the first request's records settled and an error", n, err, calls)
	}
}

func TestLambdaTarget_RecordTooLargeNamesTheRecord(t *testing.T) {
	recs := records("", 2, 0)
	recs[1].Data = bytes.Repeat([]byte{1}, 5*1024*1024) // 6.7 MB once base64'd
	lt := newLambdaTarget(t, invokeFunc(func(context.Context, *lambda.InvokeInput) (*lambda.InvokeOutput, error) {
		t.Error("nothing should be sent")
		return ok(""), nil
	}))
	_, err := lt.Deliver(context.Background(), batchOf(recs))
	var tl *RecordTooLargeError
	if !errors.As(err, &tl) || !errors.Is(err, ErrRecordTooLarge) || tl.Seq != aws.ToString(recs[1].SequenceNumber) {
		t.Fatalf("err = %v, want RecordTooLargeError for %s", err, aws.ToString(recs[1].SequenceNumber))
	}
	if !strings.Contains(err.Error(), tl.Seq) {
		t.Errorf("error %q does not name the record", err)
	}
}

func TestNewLambdaTarget_Validates(t *testing.T) {
	c := invokeFunc(nil)
	if _, err := NewLambdaTarget(c, "f"); !errors.Is(err, ErrInvalid) {
		t.Errorf("no region: %v", err)
	}
	if _, err := NewLambdaTarget(c, "", func(o *LambdaOptions) { o.Region = "r" }); !errors.Is(err, ErrInvalid) {
		t.Errorf("no function: %v", err)
	}
	if _, err := NewLambdaTarget(c, "f", func(o *LambdaOptions) { o.Region = "r"; o.MaxPayload = MaxLambdaPayload + 1 }); !errors.Is(err, ErrInvalid) {
		t.Errorf("payload over the limit: %v", err)
	}
}

// One delivered event, byte for byte, against the event Lambda's own
// Kinesis trigger sends (its fields, their order, the number form of
// approximateArrivalTimestamp), compacted.
func TestLambdaTarget_DeliversTheNativeEventByteForByte(t *testing.T) {
	fixture, err := os.ReadFile(filepath.Join("testdata", "native-kinesis-event.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Compact(&want, fixture); err != nil {
		t.Fatal(err)
	}
	var got []byte
	lt, err := NewLambdaTarget(invokeFunc(func(_ context.Context, in *lambda.InvokeInput) (*lambda.InvokeOutput, error) {
		got = in.Payload
		return ok(""), nil
	}), "orders-handler", func(o *LambdaOptions) {
		o.Region = "eu-central-1"
		o.InvokeIdentityARN = "arn:aws:iam::210987654321:role/orders-shardreader"
	})
	if err != nil {
		t.Fatal(err)
	}
	b := Batch{Stream: "orders", StreamARN: "arn:aws:kinesis:eu-central-1:210987654321:stream/orders", ShardID: "shardId-000000000002",
		Records: []types.Record{{
			Data:                        []byte(`{"order":4711,"total":"19.90"}`),
			PartitionKey:                aws.String("order-4711"),
			SequenceNumber:              aws.String("49654212981120359434557230671345026838424305384936783874"),
			ApproximateArrivalTimestamp: aws.Time(time.UnixMilli(1796112598679)),
			EncryptionType:              types.EncryptionTypeNone,
		}, {
			Data:                        []byte(`{"order":4712,"total":"5.00"}`),
			PartitionKey:                aws.String("order-4712"),
			SequenceNumber:              aws.String("49654212981120359434557230671346235764243920014111490050"),
			ApproximateArrivalTimestamp: aws.Time(time.UnixMilli(1796112599080)),
			EncryptionType:              types.EncryptionTypeKms,
		}}}
	if n, err := lt.Deliver(t.Context(), b); n != 2 || err != nil {
		t.Fatalf("Deliver = %d, %v", n, err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("delivered event differs from the native one\n got: %s\nwant: %s", got, want.Bytes())
	}
}

func TestEpochSeconds_ExactMillisecondsWithoutFloatNoise(t *testing.T) {
	for _, c := range []struct {
		ms   int64
		want string
	}{
		{1796112598679, "1796112598.679"},
		{1796112598600, "1796112598.6"},
		{1796112598060, "1796112598.06"},
		{1796112598001, "1796112598.001"},
		{1796112598000, "1796112598"},
		{1700000000123, "1700000000.123"},
		{123, "0.123"},
	} {
		b, err := json.Marshal(epochSeconds(time.UnixMilli(c.ms)))
		if err != nil || string(b) != c.want {
			t.Errorf("%d ms = %s, %v; want %s", c.ms, b, err, c.want)
		}
		// aws-lambda-go reads the number through a float64 and truncates to
		// the nanosecond, so it reads the native event a hair early too.
		var back events.SecondsEpochTime
		if err := json.Unmarshal(b, &back); err != nil || back.Round(time.Millisecond).UnixMilli() != c.ms {
			t.Errorf("%s reads back as %d ms (%v), want %d", b, back.Round(time.Millisecond).UnixMilli(), err, c.ms)
		}
	}
}
