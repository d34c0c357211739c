package reader

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardloop/shardloop/pkg/filter"
	"github.com/shardloop/shardloop/pkg/lease"
)

// KinesisAPI is the part of the Kinesis client the reader uses: reads, and
// once a run the stream's creation time (a run of a deleted stream's row
// must not read the stream created again under its name). A wrapper
// implements all of it: none of it is optional.
type KinesisAPI interface {
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
}

// Store is what a run uses of the lease table: its holder's writes
// (lease.HolderStore) and the tumbling window it opens with
// (lease.WindowReader). lease.MemoryStore and lease.DynamoStore are
// Stores; a wrapper implements both interfaces whole.
type Store interface {
	lease.HolderStore
	lease.WindowReader
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
	// MaxRetryAttemptsLimit is the largest MaximumRetryAttempts, as Lambda's.
	MaxRetryAttemptsLimit = 10000
	// MaxBatchingWindow is the longest MaximumBatchingWindow, as Lambda's.
	MaxBatchingWindow = 300 * time.Second
	// MaxBatchBytes ends a batching window early: a batch of this much data
	// fills one Lambda request.
	MaxBatchBytes = MaxLambdaPayload
	// IteratorMaxAge is how old a stored iterator may be and still be used:
	// Kinesis expires iterators 5 minutes after issue; 30 s are kept spare.
	IteratorMaxAge = 4*time.Minute + 30*time.Second
	// DefaultParallelizationFactor and MaxParallelizationFactor bound
	// ParallelizationFactor, as Lambda bounds its Kinesis trigger's (1 to
	// 10). The functions, the CLI and the CDK construct check against them.
	DefaultParallelizationFactor = 1
	MaxParallelizationFactor     = 10
	// MaxFilters is the most patterns in FilterCriteria, as Lambda's event
	// filtering allows per event source mapping by default. The functions,
	// the CLI and the CDK construct check against it.
	MaxFilters = 5
	// DefaultReadAheadBytes, MinReadAheadBytes and MaxReadAheadBytes bound
	// ReadAheadBytes. The default leaves a 128 MB function room for the
	// decoding of one read (a GetRecords answer, up to 10 MB, decodes
	// through about three times its size) and for the batches in flight.
	DefaultReadAheadBytes = 8 << 20
	MinReadAheadBytes     = 1 << 20
	MaxReadAheadBytes     = 1 << 30
)

// MaxFenceCut is how much below TargetTimeout Options.Fence may be, for a
// lease of duration d renewed every interval: the lease less its margin
// and a renew interval, the time a fresh renewal leaves an invocation to
// run before the holder's deadline.
func MaxFenceCut(d, interval time.Duration) time.Duration {
	if d == 0 {
		d = lease.DefaultDuration
	}
	if interval == 0 {
		interval = lease.DefaultRenewInterval
	}
	return d - d/10 - interval
}

// Mapping is the part of Options that mirrors a Lambda event source mapping
// on a Kinesis stream: a field for each of its settings the reader takes,
// under the setting's name and with its limits (a time.Duration where the
// setting counts seconds, without InSeconds). The zero Mapping is the
// trigger's defaults but for BatchSize: 1000 here, 100 for the trigger.
// StartingPosition is the coordinator's (coordinator.Subscription.Start),
// FunctionResponseTypes is always ReportBatchItemFailures (LambdaTarget),
// and docs/deploy.md, "Moving from the Kinesis trigger", maps every setting.
type Mapping struct {
	// BatchSize is Lambda's BatchSize: the most records the target gets in
	// one batch. A read is not a batch: it asks for as many records as keep
	// every lane fed within the shard's 5 reads and 2 MiB a second (at
	// least MinReadLimit, at most 10000, within ReadAheadBytes), and batches
	// are cut from what was read. Default 1000, at most 10000.
	BatchSize int32
	// MaximumBatchingWindow is Lambda's MaximumBatchingWindowInSeconds:
	// when positive, the run keeps reading after a read that returned fewer
	// than BatchSize records, until BatchSize records or MaxBatchBytes are
	// gathered or the window has passed since the first record was read,
	// then delivers them as one batch. At most MaxBatchingWindow. 0: deliver
	// what each read returned (default).
	MaximumBatchingWindow time.Duration
	// ParallelizationFactor is Lambda's ParallelizationFactor: the number of
	// lanes delivering one shard's records concurrently. Records go to a
	// lane by a hash of their partition key, so one key's records are
	// delivered in order and never overlap at the target; the checkpoint
	// moves past a record only once every record before it settled; a
	// failing record holds back only its own lane (docs/failure-policy.md).
	// Default 1 (one lane: the shard's records in order), at most
	// MaxParallelizationFactor.
	ParallelizationFactor int
	// FilterCriteria is Lambda's FilterCriteria: the patterns of its Filters
	// (docs/filtering.md), at most MaxFilters. A record that matches none
	// is consumed before batching (BatchSize counts the records that pass):
	// never delivered, passed by the checkpoint, and counted
	// (EventCounter.EventsFilteredOut). A read whose records all fail the
	// filters costs no delivery. None (default): every record passes.
	FilterCriteria []string

	// The failure policy (docs/failure-policy.md). The zero values keep the
	// default: retry a failing batch until it settles or leaves the stream,
	// blocking the shard, with nothing given up.

	// MaximumRetryAttempts is Lambda's MaximumRetryAttempts: when set and
	// not negative, a failing batch is given up after that many retries (so
	// N+1 deliveries), 0 to MaxRetryAttemptsLimit. nil or negative: retry
	// until the records settle or expire from the stream (default).
	// RetryAttempts(n) builds the pointer.
	MaximumRetryAttempts *int
	// MaximumRecordAge is Lambda's MaximumRecordAgeInSeconds: when positive,
	// records are given up instead of delivered once they are older than
	// this by ApproximateArrivalTimestamp (and Clock). 0: no limit
	// (default).
	MaximumRecordAge time.Duration
	// BisectBatchOnFunctionError is Lambda's BisectBatchOnFunctionError: a
	// failed delivery of more than one record is split in halves and each
	// half delivered on its own, down to single records, so a bad record is
	// isolated and only it is given up. Splits do not count as retries.
	// Default false.
	BisectBatchOnFunctionError bool
	// OnFailure is Lambda's DestinationConfig.OnFailure: it receives a
	// FailureRecord for each batch given up, before the checkpoint moves
	// past it; a failed send is retried and nothing is checkpointed until it
	// succeeded. nil: a given-up batch is only logged at error level and
	// reported to Hooks.BatchGivenUp (default).
	OnFailure Destination

	// TumblingWindow is Lambda's TumblingWindowInSeconds: when positive,
	// each shard's records are grouped into tumbling windows of this length
	// by arrival time. The Target must be a WindowTarget, which gets each
	// window's state with its batches and returns the next, and a final
	// invocation when the window is over. Whole seconds, 1 s to
	// MaxTumblingWindow; ParallelizationFactor must be 1. Checkpoints are
	// then written with the window's state, at once, not on the renewals.
	// 0: no windows (default).
	TumblingWindow time.Duration
}

// Options configure a run. Kinesis, Store and Target are required; every
// other field has the default its comment states. The settings a Lambda
// event source mapping has are in Mapping, under its names; the rest are
// shardloop's own.
type Options struct {
	Kinesis KinesisAPI
	Store   Store
	Target  Target

	Mapping

	// ReadAheadBytes is the memory budget for the records a run read and
	// has not settled (their data and partition keys): reads pause while
	// that much waits, and a read asks for no more records than fit in
	// what is left, at the average size of the records the run read so far
	// (its first read asks for MinReadLimit). Default
	// DefaultReadAheadBytes (8 MiB), MinReadAheadBytes (1 MiB) to
	// MaxReadAheadBytes (1 GiB).
	ReadAheadBytes int
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
	// LeaseDuration is the lease's length. A run whose renewals have all
	// failed (network errors, not ErrNotOwner; each call bounded by
	// RenewInterval) for LeaseDuration - RenewInterval presumes the lease
	// lost and stops, before another owner can take the shard. Default
	// lease.DefaultDuration.
	LeaseDuration time.Duration
	// ReadErrorWait is the wait after a failed read. Default 1 s.
	ReadErrorWait time.Duration
	// MaxReadErrors consecutive failed reads release the lease and stop the
	// loop. Default 11.
	MaxReadErrors int
	// TargetTimeout is the longest one invocation of the target can run
	// from its start whatever the reader does: a Lambda function's
	// configured timeout (a synchronous invocation cannot be cancelled; it
	// runs on when the reader gives up on it). The lease then covers it:
	// while invocations may be running, the row records it as its fence,
	// and a new owner (another loop, or another run of this loop) delivers
	// nothing until every invocation this run started could have ended
	// (docs/design.md, "The fence"). A delivery also starts only when it
	// can end before the run must stop (ctx's deadline less Margin/2). It
	// must be shorter than RunLength. 0: the target stops when its context
	// ends (an in-process Go function that honours it, the default); a
	// Lambda target must set it.
	TargetTimeout time.Duration
	// Fence, when positive and below TargetTimeout, is how long a new
	// owner waits, past the lease, for this loop's invocations instead of
	// the whole TargetTimeout: the reader then starts an invocation only
	// while it would end, by TargetTimeout, within the lease (renewing
	// first when it would not), so a failover after a crash is shorter. It
	// may be at most LeaseDuration - LeaseDuration/10 - RenewInterval below
	// TargetTimeout. 0: TargetTimeout (default).
	Fence time.Duration
	// RetryMin and RetryMax bound the exponential backoff between
	// deliveries of a batch the target did not settle. Defaults 100 ms, 10 s.
	RetryMin, RetryMax time.Duration
	// Deaggregate decodes KPL-aggregated records into their user records
	// (Batch.Subs tells them apart); a corrupt one is still reported as an
	// AggregatedRecordError. false: aggregated records are reported and
	// skipped (default).
	Deaggregate bool

	// EagerCheckpoints writes each checkpoint as soon as the ledger allows
	// it. Default false: checkpoints ride on the lease renewals (one lease
	// write every RenewInterval carries both), so a busy shard costs the lease
	// writes an idle one does; SHARD_END, the end of a run and a release are
	// written at once. The price: after a takeover, up to one renew interval
	// more of records is delivered again.
	EagerCheckpoints bool

	// Clock returns the time. Default time.Now.
	Clock func() time.Time
	// Hooks observe the run. Default NopHooks.
	Hooks Hooks
	// Lag, when set, tells how far behind the tip of a shard its reader is
	// (ok false: not known), recorded with each checkpoint the run writes
	// (lease.HolderOptions.Lag), which shardloop status shows; for example
	// metrics.Recorder.Lag, fed by Hooks' MillisBehindLatest. nil: none.
	Lag func(stream, shardID string) (millis int64, ok bool)
	// Yield, when closed, asks the run to give its shard up: it starts no
	// new delivery (a delivery in flight settles; a failed one is not
	// retried, so nothing is in flight), writes the checkpoint of what
	// settled, releases the lease and ends with ReasonReleased. Waits (the
	// poll interval, backoffs) end at once; a read in flight completes. A
	// local runner closes it to hand a shard to another runner, or to stop
	// on Ctrl-C. nil: never.
	Yield <-chan struct{}
	// Nudge, when set, is called (best effort, errors are the callee's) after
	// a SHARD_END checkpoint or a release, so the coordinator relists now.
	Nudge func(ctx context.Context)
	// Logger gets the run's logs. Default discards.
	Logger *slog.Logger

	filters *filter.Set // FilterCriteria as validate compiled them

	// The seams of the package's own tests and benchmarks, which set them
	// on an Options they build.

	// sleep waits d or until ctx ends. Default a timer.
	sleep func(ctx context.Context, d time.Duration) error
	// noReadPacing turns off the pacing of reads within a shard's limits
	// (ShardReadsPerSecond GetRecords calls and ShardReadBytes a second),
	// for a stand-in for Kinesis that has none (a benchmark of the reader
	// itself). Kinesis throttles a reader that goes past them. Default
	// false: paced.
	noReadPacing bool
}

func (o *Options) setDefaults() {
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.ParallelizationFactor == 0 {
		o.ParallelizationFactor = DefaultParallelizationFactor
	}
	if o.ReadAheadBytes == 0 {
		o.ReadAheadBytes = DefaultReadAheadBytes
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
	if o.sleep == nil {
		o.sleep = sleep
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
	case o.ParallelizationFactor < 1 || o.ParallelizationFactor > MaxParallelizationFactor:
		return bad("ParallelizationFactor", o.ParallelizationFactor, fmt.Sprintf("1 to %d", MaxParallelizationFactor))
	case o.ReadAheadBytes < MinReadAheadBytes || o.ReadAheadBytes > MaxReadAheadBytes:
		return bad("ReadAheadBytes", o.ReadAheadBytes, fmt.Sprintf("%d (1 MiB) to %d (1 GiB)", MinReadAheadBytes, MaxReadAheadBytes))
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
	case o.TargetTimeout < 0 || (o.TargetTimeout > 0 && o.TargetTimeout >= o.RunLength):
		return bad("TargetTimeout", o.TargetTimeout, "0 (the target stops when its context ends) or a duration shorter than RunLength ("+o.RunLength.String()+")")
	case o.Fence < 0 || (o.Fence > 0 && o.Fence < o.TargetTimeout && o.TargetTimeout-o.Fence > MaxFenceCut(o.LeaseDuration, o.RenewInterval)):
		return bad("Fence", o.Fence, fmt.Sprintf("0 (TargetTimeout) or at least TargetTimeout (%s) less %s", o.TargetTimeout, MaxFenceCut(o.LeaseDuration, o.RenewInterval)))
	case o.RetryMin < 0 || o.RetryMax < o.RetryMin:
		return bad("RetryMax", o.RetryMax, "at least RetryMin ("+o.RetryMin.String()+")")
	case o.MaximumRetryAttempts != nil && *o.MaximumRetryAttempts > MaxRetryAttemptsLimit:
		return bad("MaximumRetryAttempts", *o.MaximumRetryAttempts, fmt.Sprintf("-1 (no limit) or 0 to %d", MaxRetryAttemptsLimit))
	case o.MaximumRecordAge < 0:
		return bad("MaximumRecordAge", o.MaximumRecordAge, "0 (no limit) or a positive duration")
	case o.MaximumBatchingWindow < 0 || o.MaximumBatchingWindow > MaxBatchingWindow:
		return bad("MaximumBatchingWindow", o.MaximumBatchingWindow, "0 to "+MaxBatchingWindow.String())
	}
	if err := o.validateWindow(); err != nil {
		return err
	}
	return o.compileFilters()
}

// RetryAttempts returns a MaximumRetryAttempts of n: nil (no limit) when n is
// negative.
func RetryAttempts(n int) *int {
	if n < 0 {
		return nil
	}
	return &n
}

// retryLimit is MaximumRetryAttempts, -1 for no limit.
func (o *Options) retryLimit() int {
	if o.MaximumRetryAttempts == nil || *o.MaximumRetryAttempts < 0 {
		return -1
	}
	return *o.MaximumRetryAttempts
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
// goroutines (its lanes deliver concurrently), must be fast and safe for
// concurrent use. Embed NopHooks to implement only some.
//
// Hooks keeps these nine methods: what a run reports later is added as an
// optional one-method interface that the run finds on the Hooks value by a
// type assertion (WindowStateLost, InvocationGivenUp), so an implementation
// written today, with NopHooks embedded or not, still compiles and still
// means what it meant.
type Hooks interface {
	// RecordsDelivered: n records settled at the target.
	RecordsDelivered(stream, shardID string, n int)
	// Batch: one batch of a lane fully settled (records counts Kinesis
	// records), took after its first delivery began.
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
	// BatchGivenUp: records (Kinesis records, not sub-records) were given up
	// under the failure policy; reason is the on-failure condition
	// (ConditionRetryAttemptsExhausted or ConditionRecordAgeExceeded). Called
	// once the checkpoint may move past them: after the on-failure
	// destination accepted the record, or at once when there is none.
	BatchGivenUp(stream, shardID string, records int, reason string)
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
func (NopHooks) BatchGivenUp(string, string, int, string) {}

var _ Hooks = NopHooks{}
