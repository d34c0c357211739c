package reader

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardloop/shardloop/pkg/lease"
)

// KinesisAPI is the part of the Kinesis client the reader uses.
type KinesisAPI interface {
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

// Defaults and limits of Options.
const (
	DefaultBatchSize     = 1000
	MaxBatchSize         = 10000 // GetRecords' own limit
	DefaultPollInterval  = time.Second
	DefaultRunLength     = 60 * time.Second
	MaxRunLength         = 14 * time.Minute // under Lambda's 15-minute cap
	DefaultMargin        = 5 * time.Second
	MaxMargin            = time.Minute
	DefaultMaxIterations = 500
	DefaultReadErrorWait = time.Second
	// DefaultMaxReadErrors consecutive read errors end the run with
	// ReasonReadErrors and release the lease (SPEC §4: the 11th error).
	DefaultMaxReadErrors = 11
	DefaultRetryMin      = 100 * time.Millisecond
	DefaultRetryMax      = 10 * time.Second
	// IteratorMaxAge is how old a stored iterator may be and still be used:
	// Kinesis expires iterators 5 minutes after issue; 30 s are kept spare.
	IteratorMaxAge = 4*time.Minute + 30*time.Second
)

// Options configure a run. Kinesis, Store and Target are required; every
// other field has the default its comment states.
type Options struct {
	Kinesis KinesisAPI
	Store   lease.Store
	Target  Target

	// BatchSize is the GetRecords limit; the target gets what one
	// GetRecords returned. Default 1000, at most 10000.
	BatchSize int32
	// PollInterval is the wait after a read that returned no records, and
	// after a throttled read. Default 1 s.
	PollInterval time.Duration
	// RunLength bounds one run. Default 60 s, at most 14 min.
	RunLength time.Duration
	// Margin: the run starts no new read or delivery later than Margin
	// before ctx's deadline, and cuts a delivery still running Margin/2
	// before it, leaving time to return the state. Default 5 s, at most 1 min.
	Margin time.Duration
	// MaxIterations: when a run that continues is the loop's
	// MaxIterations-th, it sets ContinueAsNew. Default 500.
	MaxIterations int
	// RenewInterval between lease renewals. Default lease.DefaultRenewInterval.
	RenewInterval time.Duration
	// LeaseDuration: a run whose renewals have all failed for this long
	// (network errors, not ErrNotOwner) presumes the lease lost and stops.
	// Default lease.DefaultDuration.
	LeaseDuration time.Duration
	// ReadErrorWait is the wait after a failed read. Default 1 s.
	ReadErrorWait time.Duration
	// MaxReadErrors consecutive failed reads release the lease and stop the
	// loop. Default 11.
	MaxReadErrors int
	// RetryMin and RetryMax bound the exponential backoff between
	// deliveries of a batch the target did not settle. Defaults 100 ms, 10 s.
	RetryMin, RetryMax time.Duration

	// Clock returns the time. Default time.Now.
	Clock func() time.Time
	// Sleep waits d or until ctx ends. Default a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Hooks observe the run. Default NopHooks.
	Hooks Hooks
	// Nudge, when set, is called (best effort, errors are the callee's) after
	// a SHARD_END checkpoint or a release, so the coordinator relists now.
	Nudge func(ctx context.Context)
	// Logger gets the run's logs. Default discards.
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.RunLength == 0 {
		o.RunLength = DefaultRunLength
	}
	if o.Margin == 0 {
		o.Margin = DefaultMargin
	}
	if o.MaxIterations == 0 {
		o.MaxIterations = DefaultMaxIterations
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = lease.DefaultRenewInterval
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = lease.DefaultDuration
	}
	if o.ReadErrorWait == 0 {
		o.ReadErrorWait = DefaultReadErrorWait
	}
	if o.MaxReadErrors == 0 {
		o.MaxReadErrors = DefaultMaxReadErrors
	}
	if o.RetryMin == 0 {
		o.RetryMin = DefaultRetryMin
	}
	if o.RetryMax == 0 {
		o.RetryMax = DefaultRetryMax
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	if o.Hooks == nil {
		o.Hooks = NopHooks{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

func (o *Options) validate() error {
	bad := func(field string, v any, want string) error {
		return &InvalidError{Field: field, Value: fmt.Sprint(v), Want: want}
	}
	switch {
	case o.Kinesis == nil:
		return bad("Kinesis", "nil", "a Kinesis client")
	case o.Store == nil:
		return bad("Store", "nil", "a lease store")
	case o.Target == nil:
		return bad("Target", "nil", "a target")
	case o.BatchSize < 1 || o.BatchSize > MaxBatchSize:
		return bad("BatchSize", o.BatchSize, fmt.Sprintf("1 to %d", MaxBatchSize))
	case o.PollInterval < 0:
		return bad("PollInterval", o.PollInterval, "a positive duration")
	case o.RunLength < 0 || o.RunLength > MaxRunLength:
		return bad("RunLength", o.RunLength, "a positive duration up to "+MaxRunLength.String())
	case o.Margin < 0 || o.Margin > MaxMargin:
		return bad("Margin", o.Margin, "a positive duration up to "+MaxMargin.String())
	case o.MaxIterations < 1:
		return bad("MaxIterations", o.MaxIterations, "at least 1")
	case o.RenewInterval < 0 || o.LeaseDuration < 0 || o.RenewInterval >= o.LeaseDuration:
		return bad("RenewInterval", o.RenewInterval, "a positive duration shorter than LeaseDuration ("+o.LeaseDuration.String()+")")
	case o.ReadErrorWait < 0:
		return bad("ReadErrorWait", o.ReadErrorWait, "a positive duration")
	case o.MaxReadErrors < 1:
		return bad("MaxReadErrors", o.MaxReadErrors, "at least 1")
	case o.RetryMin < 0 || o.RetryMax < o.RetryMin:
		return bad("RetryMax", o.RetryMax, "at least RetryMin ("+o.RetryMin.String()+")")
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Hooks observe a run, for metrics. Methods are called from the run's
// goroutines, must be fast and safe for concurrent use. Embed NopHooks to
// implement only some.
type Hooks interface {
	// RecordsDelivered: n records settled at the target.
	RecordsDelivered(stream, shardID string, n int)
	// Batch: one GetRecords batch fully settled, after took.
	Batch(stream, shardID string, records int, took time.Duration)
	// TargetError: a delivery failed or settled only part of its batch.
	TargetError(stream, shardID string, err error)
	// ReadError: a GetShardIterator or GetRecords call failed.
	ReadError(stream, shardID string, err error, throttled bool)
	// AggregatedRecord: a KPL-aggregated record was skipped.
	AggregatedRecord(err *AggregatedRecordError)
	// MillisBehindLatest from each GetRecords answer.
	MillisBehindLatest(stream, shardID string, ms int64)
	// LeaseLost: the run lost (or could not take) the lease.
	LeaseLost(stream, shardID, owner string)
	// ShardEnd: SHARD_END was checkpointed.
	ShardEnd(stream, shardID string)
}

// NopHooks does nothing; embed it to implement part of Hooks.
type NopHooks struct{}

func (NopHooks) RecordsDelivered(string, string, int)     {}
func (NopHooks) Batch(string, string, int, time.Duration) {}
func (NopHooks) TargetError(string, string, error)        {}
func (NopHooks) ReadError(string, string, error, bool)    {}
func (NopHooks) AggregatedRecord(*AggregatedRecordError)  {}
func (NopHooks) MillisBehindLatest(string, string, int64) {}
func (NopHooks) LeaseLost(string, string, string)         {}
func (NopHooks) ShardEnd(string, string)                  {}

var _ Hooks = NopHooks{}
