package reader

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3API is the part of the S3 client an S3 destination uses.
type S3API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// s3Destination writes each given-up batch as one object, as Lambda's
// Kinesis event source mapping writes to an S3 on-failure destination: the
// on-failure record with "payload", the whole invocation event as a JSON
// string, under aws/lambda/<id>/<shard id>/YYYY/MM/DD/YYYY-MM-DDTHH.MM.SS-<uuid>.
// Lambda's <id> is the mapping's UUID; shardloop has no mapping, so it is a
// UUID derived from the stream and the target function (one per
// subscription, the same in every run).
type s3Destination struct {
	client S3API
	bucket string
}

// s3Object is what the object holds: the record's fields, then payload.
type s3Object struct {
	FailureRecord
	Payload string `json:"payload"`
}

// Send implements Destination.
func (d *s3Destination) Send(ctx context.Context, rec FailureRecord) error {
	payload, err := rec.Payload()
	if err != nil {
		return fmt.Errorf("reader: on-failure destination: the batch's payload: %w", err)
	}
	body, err := json.Marshal(s3Object{FailureRecord: rec, Payload: string(payload)})
	if err != nil {
		return err
	}
	key := s3Key(rec, time.Now())
	if _, err := d.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(d.bucket), Key: aws.String(key), Body: bytes.NewReader(body),
		ContentType: aws.String("application/json"),
	}); err != nil {
		return fmt.Errorf("reader: on-failure destination: put s3://%s/%s: %w", d.bucket, key, err)
	}
	return nil
}

// s3Key names the object of rec, given up at the record's timestamp (at
// now when it does not parse).
func s3Key(rec FailureRecord, now time.Time) string {
	at, err := time.Parse(timeLayout, rec.Timestamp)
	if err != nil {
		at = now
	}
	at = at.UTC()
	source := rec.KinesisBatchInfo.StreamARN
	if source == "" {
		source = rec.Shardloop.Stream
	}
	return fmt.Sprintf("aws/lambda/%s/%s/%s/%s-%s",
		uuidOf(source+"\x00"+rec.RequestContext.FunctionARN), rec.KinesisBatchInfo.ShardID,
		at.Format("2006/01/02"), at.Format("2006-01-02T15.04.05"), randomID())
}

// uuidOf is a UUID (version 8, name-based) derived from s.
func uuidOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x80 // version 8
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
