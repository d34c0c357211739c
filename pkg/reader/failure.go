package reader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// The conditions of a FailureRecord, named as Lambda names them.
const (
	// ConditionRetryAttemptsExhausted: the batch failed MaximumRetryAttempts+1
	// deliveries.
	ConditionRetryAttemptsExhausted = "RetryAttemptsExhausted"
	// ConditionRecordAgeExceeded: the records were older than MaximumRecordAge.
	ConditionRecordAgeExceeded = "RecordAgeExceeded"
)

// FailureRecord describes a batch the reader gave up. Its JSON is the
// on-failure record Lambda's Kinesis event source mapping sends to its
// on-failure destination (requestContext, responseContext, version,
// timestamp, KinesisBatchInfo), so tooling written for that record reads it,
// plus a "shardloop" object with what Lambda's lacks. It names the records;
// it does not carry their data: read them from the stream while they are
// retained (GetShardIterator AT_SEQUENCE_NUMBER startSequenceNumber).
type FailureRecord struct {
	RequestContext   FailureRequest   `json:"requestContext"`
	ResponseContext  FailureResponse  `json:"responseContext"`
	Version          string           `json:"version"`   // "1.0"
	Timestamp        string           `json:"timestamp"` // when the batch was given up, RFC 3339 UTC with ms
	KinesisBatchInfo KinesisBatchInfo `json:"KinesisBatchInfo"`
	Shardloop        FailureDetail    `json:"shardloop"`

	// batch holds the given-up records and payload the target's event
	// builder: the invocation event an S3 destination stores (Payload).
	batch   Batch
	payload func(Batch) ([]byte, error)
}

// Payload returns the invocation event of the given-up records, as the
// target would have sent it (Lambda's Kinesis event): what an S3 on-failure
// destination stores beside the record.
func (r FailureRecord) Payload() ([]byte, error) {
	if r.payload == nil {
		return (&LambdaTarget{}).Payload(r.batch)
	}
	return r.payload(r.batch)
}

// FailureRequest is the requestContext of a FailureRecord.
type FailureRequest struct {
	// RequestID is a random id of this record (Lambda puts its last
	// invocation's request id here).
	RequestID string `json:"requestId"`
	// FunctionARN is the target function as configured (a name or an
	// ARN); empty for an in-process target.
	FunctionARN string `json:"functionArn"`
	// Condition is ConditionRetryAttemptsExhausted or ConditionRecordAgeExceeded.
	Condition string `json:"condition"`
	// ApproximateInvokeCount is how many deliveries of these records failed
	// (0 when they expired before any).
	ApproximateInvokeCount int `json:"approximateInvokeCount"`
}

// FailureResponse is the responseContext of a FailureRecord: the last
// failed delivery's answer.
type FailureResponse struct {
	// StatusCode is the Invoke API's HTTP status (200 for a function error
	// or a partial batch response), 0 when no answer came.
	StatusCode int `json:"statusCode"`
	// ExecutedVersion is the function version ("$LATEST" unless the target
	// names a qualifier); empty for an in-process target.
	ExecutedVersion string `json:"executedVersion"`
	// FunctionError is "Handled" or "Unhandled" after a function error
	// (a timeout is "Unhandled"), else empty.
	FunctionError string `json:"functionError"`
}

// KinesisBatchInfo names the given-up records, as in Lambda's record.
type KinesisBatchInfo struct {
	ShardID                         string `json:"shardId"`
	StartSequenceNumber             string `json:"startSequenceNumber"`
	EndSequenceNumber               string `json:"endSequenceNumber"`
	ApproximateArrivalOfFirstRecord string `json:"approximateArrivalOfFirstRecord"`
	ApproximateArrivalOfLastRecord  string `json:"approximateArrivalOfLastRecord"`
	// BatchSize counts Kinesis records (an aggregated record counts once).
	BatchSize int    `json:"batchSize"`
	StreamARN string `json:"streamArn"` // empty when the loop has no stream ARN (local runs)
}

// FailureDetail is shardloop's addition to the on-failure record.
type FailureDetail struct {
	Stream   string `json:"stream"`
	Owner    string `json:"owner"`
	Error    string `json:"error"`    // the last delivery error; empty when none was tried
	Attempts int    `json:"attempts"` // failed deliveries, as approximateInvokeCount
}

// timeLayout is how Lambda writes the record's times.
const timeLayout = "2006-01-02T15:04:05.000Z"

func newFailureRecord(now time.Time, cond string, recs []types.Record, b Batch, owner string, tgt Target, lastErr error, attempts int) FailureRecord {
	fr := FailureRecord{
		RequestContext: FailureRequest{RequestID: randomID(), Condition: cond, ApproximateInvokeCount: attempts},
		Version:        "1.0",
		Timestamp:      now.UTC().Format(timeLayout),
		KinesisBatchInfo: KinesisBatchInfo{
			ShardID:             b.ShardID,
			StartSequenceNumber: aws.ToString(recs[0].SequenceNumber),
			EndSequenceNumber:   aws.ToString(recs[len(recs)-1].SequenceNumber),
			BatchSize:           len(recs),
			StreamARN:           b.StreamARN,
		},
		Shardloop: FailureDetail{Stream: b.Stream, Owner: owner, Attempts: attempts},
	}
	fr.batch = b
	fr.batch.Records = recs
	if p, ok := tgt.(interface{ Payload(Batch) ([]byte, error) }); ok {
		fr.payload = p.Payload
	}
	if t := recs[0].ApproximateArrivalTimestamp; t != nil {
		fr.KinesisBatchInfo.ApproximateArrivalOfFirstRecord = t.UTC().Format(timeLayout)
	}
	if t := recs[len(recs)-1].ApproximateArrivalTimestamp; t != nil {
		fr.KinesisBatchInfo.ApproximateArrivalOfLastRecord = t.UTC().Format(timeLayout)
	}
	if ft, ok := tgt.(interface{ FunctionInfo() (arn, version string) }); ok {
		fr.RequestContext.FunctionARN, fr.ResponseContext.ExecutedVersion = ft.FunctionInfo()
	}
	if lastErr != nil {
		fr.Shardloop.Error = lastErr.Error()
		var fe *FunctionError
		var re *smithyhttp.ResponseError
		switch {
		case errors.As(lastErr, &fe):
			fr.ResponseContext.StatusCode = 200
			fr.ResponseContext.FunctionError = "Unhandled"
			if fe.Kind == "Handled" {
				fr.ResponseContext.FunctionError = "Handled"
			}
		case errors.Is(lastErr, ErrPartial), errors.Is(lastErr, ErrBadResponse):
			fr.ResponseContext.StatusCode = 200
		case errors.As(lastErr, &re):
			fr.ResponseContext.StatusCode = re.HTTPStatusCode()
		}
	}
	return fr
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Destination receives the records of given-up batches. Send must return
// when ctx ends; an error makes the reader retry the send (with backoff)
// and checkpoints nothing past the given-up records until it succeeds.
type Destination interface {
	Send(ctx context.Context, rec FailureRecord) error
}

// DestinationFunc is a Destination in a Go function.
type DestinationFunc func(ctx context.Context, rec FailureRecord) error

// Send implements Destination.
func (f DestinationFunc) Send(ctx context.Context, rec FailureRecord) error { return f(ctx, rec) }

// SQSAPI is the part of the SQS client an SQS destination uses: GetQueueUrl
// once, to find the queue of the ARN, then SendMessage.
type SQSAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// SNSAPI is the part of the SNS client an SNS destination uses.
type SNSAPI interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

// ARN is a parsed destination ARN: arn:<partition>:<service>:<region>:<account>:<name>.
type ARN struct {
	Partition, Service, Region, Account, Resource string
}

// DestinationForms says which ARNs an on-failure destination may be.
const DestinationForms = "an SQS queue ARN (arn:aws:sqs:<region>:<account>:<queue>), an SNS topic ARN (arn:aws:sns:<region>:<account>:<topic>) or an S3 bucket ARN (arn:aws:s3:::<bucket>)"

// ParseDestinationARN parses an SQS queue, SNS topic or S3 bucket ARN.
func ParseDestinationARN(s string) (ARN, error) {
	p := strings.SplitN(s, ":", 6)
	bad := &InvalidError{Field: "on-failure destination", Value: s, Want: DestinationForms}
	if len(p) != 6 || p[0] != "arn" || !strings.HasPrefix(p[1], "aws") || p[5] == "" || strings.ContainsAny(p[5], ":/") {
		return ARN{}, bad
	}
	switch p[2] {
	case "sqs", "sns":
		if p[3] == "" || p[4] == "" {
			return ARN{}, bad
		}
	case "s3": // a bucket's ARN has no region or account
		if p[3] != "" || p[4] != "" || !bucketName.MatchString(p[5]) {
			return ARN{}, bad
		}
	default:
		return ARN{}, bad
	}
	return ARN{Partition: p[1], Service: p[2], Region: p[3], Account: p[4], Resource: p[5]}, nil
}

// bucketName is S3's rule for bucket names (3 to 63 lower-case letters,
// digits, dots and hyphens, starting and ending with a letter or digit).
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// NewDestination returns the destination an ARN names: an SQS queue (sent
// with sqsClient) or an SNS topic (published with snsClient). For an S3
// bucket, use NewS3Destination. The client the ARN does not need may be nil.
func NewDestination(arn string, sqsClient SQSAPI, snsClient SNSAPI) (Destination, error) {
	a, err := ParseDestinationARN(arn)
	if err != nil {
		return nil, err
	}
	switch {
	case a.Service == "sqs" && sqsClient != nil:
		return &sqsDestination{client: sqsClient, arn: a}, nil
	case a.Service == "sns" && snsClient != nil:
		return &snsDestination{client: snsClient, arn: arn}, nil
	}
	return nil, &InvalidError{Field: a.Service + " client", Value: "nil", Want: "a client for the destination " + arn}
}

// NewS3Destination returns the destination of an S3 bucket ARN
// (arn:aws:s3:::<bucket>): each given-up batch becomes one object holding
// the on-failure record and the batch's whole invocation event, named and
// shaped as Lambda's Kinesis trigger writes them (docs/failure-policy.md).
func NewS3Destination(arn string, client S3API) (Destination, error) {
	a, err := ParseDestinationARN(arn)
	if err != nil {
		return nil, err
	}
	if a.Service != "s3" {
		return nil, &InvalidError{Field: "on-failure destination", Value: arn, Want: "an S3 bucket ARN (arn:aws:s3:::<bucket>)"}
	}
	if client == nil {
		return nil, &InvalidError{Field: "s3 client", Value: "nil", Want: "a client for the destination " + arn}
	}
	return &s3Destination{client: client, bucket: a.Resource}, nil
}

type sqsDestination struct {
	client SQSAPI
	arn    ARN

	mu  sync.Mutex
	url string
}

func (d *sqsDestination) queueURL(ctx context.Context) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.url != "" {
		return d.url, nil
	}
	out, err := d.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(d.arn.Resource), QueueOwnerAWSAccountId: aws.String(d.arn.Account)})
	if err != nil {
		return "", fmt.Errorf("reader: on-failure destination: get queue url of %s: %w", d.arn.Resource, err)
	}
	d.url = aws.ToString(out.QueueUrl)
	return d.url, nil
}

func (d *sqsDestination) Send(ctx context.Context, rec FailureRecord) error {
	url, err := d.queueURL(ctx)
	if err != nil {
		return err
	}
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := d.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(string(body))}); err != nil {
		return fmt.Errorf("reader: on-failure destination: send to %s: %w", d.arn.Resource, err)
	}
	return nil
}

type snsDestination struct {
	client SNSAPI
	arn    string
}

func (d *snsDestination) Send(ctx context.Context, rec FailureRecord) error {
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := d.client.Publish(ctx, &sns.PublishInput{TopicArn: aws.String(d.arn), Message: aws.String(string(body))}); err != nil {
		return fmt.Errorf("reader: on-failure destination: publish to %s: %w", d.arn, err)
	}
	return nil
}
