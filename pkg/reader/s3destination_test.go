package reader

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shardloop/shardloop/internal/emulators"
	"github.com/shardloop/shardloop/internal/testaws"
)

// fakes3 is the S3 emulator of this test binary, started on first use.
var fakes3 struct {
	once sync.Once
	proc *emulators.Process
	err  error
}

func s3Client(t *testing.T) *s3.Client {
	t.Helper()
	fakes3.once.Do(func() {
		log := filepath.Join(os.TempDir(), fmt.Sprintf("shardloop-gofakes3-%d.log", os.Getpid()))
		fakes3.proc, fakes3.err = emulators.StartGoFakeS3(context.Background(), emulators.GoFakeS3Options{LogPath: log})
	})
	if fakes3.err != nil {
		t.Fatalf("gofakes3: %v", fakes3.err)
	}
	return s3.NewFromConfig(testaws.Config(fakes3.proc.Endpoint), func(o *s3.Options) { o.UsePathStyle = true })
}

func stopFakeS3() {
	if fakes3.proc != nil {
		fakes3.proc.Stop()
	}
}

// TestS3Destination_HoldsTheRecordAndTheWholeBatchUnderTheTriggersKey: a
// batch given up is one object in the bucket, named as Lambda's trigger
// names it, holding the on-failure record and, in "payload", the whole
// invocation event as a JSON string, which parses as a KinesisEvent of the
// given-up records.
func TestS3Destination_HoldsTheRecordAndTheWholeBatchUnderTheTriggersKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	seqs := e.putN(t, "a", 3)
	e.setStart(t, e.shards[0], "horizon")
	client := s3Client(t)
	bucket := "onfailure-" + fmt.Sprint(time.Now().UnixNano()%1_000_000_000)
	if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	dest, err := NewS3Destination("arn:aws:s3:::"+bucket, client)
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{fail: func(b Batch) (int, error) { return 0, fmt.Errorf("always fails") }}
	o := e.opts(s)
	o.MaximumRetryAttempts, o.OnFailure = RetryAttempts(0), dest
	runUntil(t, o, e.state(e.shards[0], "A"), func() bool { return e.row(t, e.shards[0]).Checkpoint == seqs[2] })

	list, err := client.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Contents) != 1 {
		t.Fatalf("%d objects, want 1", len(list.Contents))
	}
	key := aws.ToString(list.Contents[0].Key)
	shape := regexp.MustCompile(`^aws/lambda/[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}/` + e.shards[0] +
		`/\d{4}/\d{2}/\d{2}/\d{4}-\d{2}-\d{2}T\d{2}\.\d{2}\.\d{2}-[0-9a-f-]{36}$`)
	if !shape.MatchString(key) {
		t.Fatalf("key %q, want aws/lambda/<uuid>/<shard>/YYYY/MM/DD/YYYY-MM-DDTHH.MM.SS-<uuid>", key)
	}
	obj, err := client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	raw, _ := io.ReadAll(obj.Body)
	var got struct {
		FailureRecord
		Payload string `json:"payload"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("object %s: %v", raw, err)
	}
	bi := got.KinesisBatchInfo
	if got.RequestContext.Condition != ConditionRetryAttemptsExhausted || bi.StartSequenceNumber != seqs[0] || bi.EndSequenceNumber != seqs[2] || bi.BatchSize != 3 {
		t.Fatalf("record %+v", got.FailureRecord)
	}
	var ev events.KinesisEvent
	if err := json.Unmarshal([]byte(got.Payload), &ev); err != nil {
		t.Fatalf("payload %q is not a Kinesis event: %v", got.Payload, err)
	}
	if len(ev.Records) != 3 || string(ev.Records[1].Kinesis.Data) != "a-00001" || ev.Records[2].Kinesis.SequenceNumber != seqs[2] ||
		ev.Records[0].EventID != e.shards[0]+":"+seqs[0] {
		t.Fatalf("payload records %+v, want the 3 given-up records", ev.Records)
	}
}

func TestParseDestinationARN_S3BucketsTooWithTheirRules(t *testing.T) {
	for arn, ok := range map[string]bool{
		"arn:aws:s3:::my-bucket":                  true,
		"arn:aws:s3:::a.b-c1":                     true,
		"arn:aws:s3:us-east-1:123456789012:b":     false, // a bucket ARN has no region or account
		"arn:aws:s3:::My_Bucket":                  false,
		"arn:aws:s3:::ab":                         false,
		"arn:aws:s3:::bucket/key":                 false,
		"arn:aws:sqs:us-east-1:123456789012:q":    true,
		"arn:aws:sns:us-east-1:123456789012:t":    true,
		"arn:aws:lambda:us-east-1:123456789012:f": false,
	} {
		if _, err := ParseDestinationARN(arn); (err == nil) != ok {
			t.Errorf("ParseDestinationARN(%q) = %v, want ok %v", arn, err, ok)
		}
	}
	if _, err := NewS3Destination("arn:aws:sqs:us-east-1:123456789012:q", nil); err == nil {
		t.Error("NewS3Destination of a queue ARN: no error")
	}
}
