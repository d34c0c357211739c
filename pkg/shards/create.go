package shards

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Defaults of CreateOptions.
const (
	// DefaultCreateTimeout bounds the wait for a stream to become ACTIVE.
	DefaultCreateTimeout = time.Minute
	// DefaultCreatePollInterval is the pause between DescribeStreamSummary
	// calls while waiting (the API allows 20 calls a second per account).
	DefaultCreatePollInterval = time.Second
)

// CreateAPI is the part of the Kinesis client that CreateIfMissing calls.
type CreateAPI interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
	CreateStream(ctx context.Context, in *kinesis.CreateStreamInput, optFns ...func(*kinesis.Options)) (*kinesis.CreateStreamOutput, error)
}

var _ CreateAPI = (*kinesis.Client)(nil)

// CreateOptions tune CreateIfMissing. The zero value means the defaults.
type CreateOptions struct {
	// Timeout bounds the wait for ACTIVE. Default DefaultCreateTimeout.
	Timeout time.Duration
	// PollInterval is the pause between status checks. Default
	// DefaultCreatePollInterval.
	PollInterval time.Duration
}

func (o *CreateOptions) setDefaults() {
	if o.Timeout == 0 {
		o.Timeout = DefaultCreateTimeout
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultCreatePollInterval
	}
}

func (o CreateOptions) validate() error {
	if o.Timeout < 0 {
		return &InvalidError{Field: "Timeout", Value: o.Timeout.String(), Want: "a positive duration"}
	}
	if o.PollInterval < 0 {
		return &InvalidError{Field: "PollInterval", Value: o.PollInterval.String(), Want: "a positive duration"}
	}
	return nil
}

// ErrNotActive matches every NotActiveError.
var ErrNotActive = errors.New("stream not active")

// NotActiveError reports a stream that did not become ACTIVE in time, or
// that is being deleted. It matches ErrNotActive with errors.Is.
type NotActiveError struct {
	Stream string
	// Status is the last status seen; empty when the stream was not found
	// yet.
	Status types.StreamStatus
	// Waited is the timeout CreateIfMissing waited for; zero when it did
	// not wait (a stream being deleted).
	Waited time.Duration
}

func (e *NotActiveError) Error() string {
	status := string(e.Status)
	if status == "" {
		status = "not found yet"
	}
	if e.Waited == 0 {
		return fmt.Sprintf("stream %s is %s, not ACTIVE", e.Stream, status)
	}
	return fmt.Sprintf("stream %s not ACTIVE after %s (last status: %s)", e.Stream, e.Waited, status)
}

func (e *NotActiveError) Is(target error) bool { return target == ErrNotActive }

// CreateIfMissing makes sure the stream exists and is usable. A missing
// stream is created in provisioned mode with shardCount shards; then, or
// when the stream is still CREATING, it waits until the stream is ACTIVE,
// at most CreateOptions.Timeout (one minute by default), and after that
// fails with a *NotActiveError. An existing stream is left as it is, whatever
// its shard count or capacity mode; ACTIVE and UPDATING both count as
// usable. A stream being deleted is a *NotActiveError at once.
//
// stream is a name or an ARN (then the stream is created by the ARN's name,
// in the region and account of api). created reports whether this call
// created the stream, also when the wait that followed failed; a concurrent
// creator (ResourceInUseException) is not this call.
func CreateIfMissing(ctx context.Context, api CreateAPI, stream string, shardCount int, optFns ...func(*CreateOptions)) (created bool, err error) {
	name, err := StreamName(stream)
	if err != nil {
		return false, err
	}
	if shardCount < 1 || shardCount > math.MaxInt32 {
		return false, &InvalidError{Field: "shardCount", Value: strconv.Itoa(shardCount), Want: "at least 1"}
	}
	var o CreateOptions
	for _, f := range optFns {
		f(&o)
	}
	o.setDefaults()
	if err := o.validate(); err != nil {
		return false, err
	}
	describe := &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)}
	if isARN(stream) {
		describe = &kinesis.DescribeStreamSummaryInput{StreamARN: aws.String(stream)}
	}

	status, err := streamStatus(ctx, api, describe)
	switch {
	case errors.As(err, new(*types.ResourceNotFoundException)):
		_, err = api.CreateStream(ctx, &kinesis.CreateStreamInput{
			StreamName:        aws.String(name),
			ShardCount:        aws.Int32(int32(shardCount)),
			StreamModeDetails: &types.StreamModeDetails{StreamMode: types.StreamModeProvisioned},
		})
		switch {
		case err == nil:
			created = true
		case errors.As(err, new(*types.ResourceInUseException)):
			// Someone else created it meanwhile; wait for theirs.
		default:
			return false, fmt.Errorf("create stream %s: %w", name, err)
		}
		status = ""
	case err != nil:
		return false, fmt.Errorf("describe stream %s: %w", name, err)
	}
	if usable(status) {
		return created, nil
	}
	if status == types.StreamStatusDeleting {
		return false, &NotActiveError{Stream: name, Status: status}
	}
	return created, waitActive(ctx, api, describe, name, o)
}

func usable(s types.StreamStatus) bool {
	return s == types.StreamStatusActive || s == types.StreamStatusUpdating
}

func streamStatus(ctx context.Context, api CreateAPI, in *kinesis.DescribeStreamSummaryInput) (types.StreamStatus, error) {
	out, err := api.DescribeStreamSummary(ctx, in)
	if err != nil {
		return "", err
	}
	if out.StreamDescriptionSummary == nil {
		return "", nil
	}
	return out.StreamDescriptionSummary.StreamStatus, nil
}

// waitActive polls until the stream is usable or o.Timeout has passed. Not
// found is waited out too: a new stream may not be visible at once.
func waitActive(ctx context.Context, api CreateAPI, in *kinesis.DescribeStreamSummaryInput, name string, o CreateOptions) error {
	errTimeout := errors.New("wait timed out")
	wctx, cancel := context.WithTimeoutCause(ctx, o.Timeout, errTimeout)
	defer cancel()
	var last types.StreamStatus
	timer := time.NewTimer(0) // the first check at once
	defer timer.Stop()
	for {
		select {
		case <-wctx.Done():
			if !errors.Is(context.Cause(wctx), errTimeout) {
				return fmt.Errorf("wait for stream %s: %w", name, ctx.Err())
			}
			return &NotActiveError{Stream: name, Status: last, Waited: o.Timeout}
		case <-timer.C:
		}
		status, err := streamStatus(wctx, api, in)
		switch {
		case wctx.Err() != nil:
			continue // reported by the select above
		case errors.As(err, new(*types.ResourceNotFoundException)):
			last = ""
		case err != nil:
			return fmt.Errorf("wait for stream %s: describe: %w", name, err)
		case usable(status):
			return nil
		case status == types.StreamStatusDeleting:
			return &NotActiveError{Stream: name, Status: status}
		default:
			last = status
		}
		timer.Reset(o.PollInterval)
	}
}
