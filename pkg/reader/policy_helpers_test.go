package reader

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/schemas"
	"github.com/aws/smithy-go/transport/http/protocol/awsquery"

	"github.com/shardloop/shardloop/internal/emulators"
	"github.com/shardloop/shardloop/internal/testaws"
)

// goaws is the SQS/SNS emulator of this test binary, started on first use.
var goaws struct {
	once sync.Once
	proc *emulators.Process
	err  error
}

func goawsEndpoint(t *testing.T) string {
	t.Helper()
	goaws.once.Do(func() {
		log := filepath.Join(os.TempDir(), fmt.Sprintf("shardloop-goaws-%d.log", os.Getpid()))
		goaws.proc, goaws.err = emulators.StartGoAWS(context.Background(), emulators.GoAWSOptions{LogPath: log})
	})
	if goaws.err != nil {
		t.Fatalf("goaws: %v", goaws.err)
	}
	return goaws.proc.Endpoint
}

func stopGoAWS() {
	if goaws.proc != nil {
		goaws.proc.Stop()
	}
}

// sqsClient talks to goaws, which speaks SQS's query protocol only.
func sqsClient(t *testing.T) *sqs.Client {
	return sqs.NewFromConfig(testaws.Config(goawsEndpoint(t)), func(o *sqs.Options) {
		o.Protocol = awsquery.New(schemas.AmazonSQS)
	})
}

func snsClient(t *testing.T) *sns.Client {
	return sns.NewFromConfig(testaws.Config(goawsEndpoint(t)))
}

// queue creates an SQS queue on goaws and returns its ARN and URL.
func newQueue(t *testing.T) (arn, url string) {
	t.Helper()
	name := testaws.Name(t)
	if len(name) > 80 {
		name = name[len(name)-80:]
	}
	out, err := sqsClient(t).CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	return "arn:aws:sqs:us-east-1:000000000000:" + name, aws.ToString(out.QueueUrl)
}

// newTopic creates an SNS topic on goaws delivering raw messages to a new
// queue, and returns the topic's ARN and the queue's URL.
func newTopic(t *testing.T) (arn, url string) {
	t.Helper()
	qarn, url := newQueue(t)
	out, err := snsClient(t).CreateTopic(t.Context(), &sns.CreateTopicInput{Name: aws.String("t-" + qarn[strings.LastIndex(qarn, ":")+1:])})
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	sub, err := snsClient(t).Subscribe(t.Context(), &sns.SubscribeInput{TopicArn: out.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(qarn)})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if _, err := snsClient(t).SetSubscriptionAttributes(t.Context(), &sns.SetSubscriptionAttributesInput{
		SubscriptionArn: sub.SubscriptionArn, AttributeName: aws.String("RawMessageDelivery"), AttributeValue: aws.String("true"),
	}); err != nil {
		t.Fatalf("raw delivery: %v", err)
	}
	return aws.ToString(out.TopicArn), url
}

// destination returns the Destination an ARN names, with goaws clients.
func destination(t *testing.T, arn string) Destination {
	t.Helper()
	d, err := NewDestination(arn, sqsClient(t), snsClient(t))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// received drains the on-failure records in a queue.
func received(t *testing.T, url string) []FailureRecord {
	t.Helper()
	var out []FailureRecord
	for {
		r, err := sqsClient(t).ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(r.Messages) == 0 {
			return out
		}
		for _, m := range r.Messages {
			var fr FailureRecord
			dec := json.NewDecoder(strings.NewReader(aws.ToString(m.Body)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&fr); err != nil {
				t.Fatalf("message %q is not a FailureRecord: %v", aws.ToString(m.Body), err)
			}
			out = append(out, fr)
			if _, err := sqsClient(t).DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("delete: %v", err)
			}
		}
	}
}

// gaveUp records BatchGivenUp calls.
type gaveUp struct {
	NopHooks
	mu      sync.Mutex
	batches []string // "<records> <reason>"
}

func (g *gaveUp) BatchGivenUp(_, _ string, records int, reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.batches = append(g.batches, fmt.Sprintf("%d %s", records, reason))
}

func (g *gaveUp) all() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.batches...)
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// lines returns the JSON log lines at level.
func (l *logBuffer) lines(t *testing.T, level string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["level"] == level {
			out = append(out, m)
		}
	}
	return out
}

// offsetClock is a clock the test moves.
type offsetClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *offsetClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *offsetClock) set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off = d
}

// A KPL aggregate encoder for tests (amazon-kinesis-producer's
// aggregation-format.md).

type kplRecord struct {
	key, ehk string // ehk empty: none
	data     string
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendBytesField(b []byte, num int, v []byte) []byte {
	b = appendVarint(b, uint64(num)<<3|2)
	b = appendVarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendVarintField(b []byte, num int, v uint64) []byte {
	return appendVarint(appendVarint(b, uint64(num)<<3), v)
}

// aggregate encodes records as one KPL-aggregated record.
func aggregate(recs ...kplRecord) []byte {
	var keys, ehks []string
	index := func(table *[]string, s string) uint64 {
		for i, k := range *table {
			if k == s {
				return uint64(i)
			}
		}
		*table = append(*table, s)
		return uint64(len(*table) - 1)
	}
	var body []byte
	for _, r := range recs {
		var m []byte
		m = appendVarintField(m, 1, index(&keys, r.key))
		if r.ehk != "" {
			m = appendVarintField(m, 2, index(&ehks, r.ehk))
		}
		m = appendBytesField(m, 3, []byte(r.data))
		m = appendBytesField(m, 4, appendBytesField(nil, 1, []byte("tag"))) // a Tag, ignored
		body = appendBytesField(body, 3, m)
	}
	var msg []byte
	for _, k := range keys {
		msg = appendBytesField(msg, 1, []byte(k))
	}
	for _, k := range ehks {
		msg = appendBytesField(msg, 2, []byte(k))
	}
	msg = append(msg, body...)
	sum := md5.Sum(msg)
	return append(append(append([]byte(nil), kplMagic...), msg...), sum[:]...)
}

func md5sum(b []byte) []byte {
	s := md5.Sum(b)
	return s[:]
}
