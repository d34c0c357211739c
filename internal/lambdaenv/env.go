// Package lambdaenv reads the shardloop functions' configuration from
// environment variables at cold start. Every error names the variable, the
// value and what was expected, so a bad deployment fails before it reads a
// record.
package lambdaenv

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/shards"
)

// Variable names. infra/ and template/ set them.
const (
	VarStream          = "SHARDLOOP_STREAM"
	VarTable           = "SHARDLOOP_LEASE_TABLE"
	VarStateMachine    = "SHARDLOOP_STATE_MACHINE_ARN"
	VarTarget          = "SHARDLOOP_TARGET_FUNCTION"
	VarStart           = "SHARDLOOP_START_POSITION"
	VarBatchSize       = "SHARDLOOP_BATCH_SIZE"
	VarPollInterval    = "SHARDLOOP_POLL_INTERVAL"
	VarRunLength       = "SHARDLOOP_RUN_LENGTH"
	VarCreateShards    = "SHARDLOOP_CREATE_SHARDS"
	VarWindow          = "SHARDLOOP_WINDOW"
	VarCoordinatorFunc = "SHARDLOOP_COORDINATOR_FUNCTION"
	VarMaxIterations   = "SHARDLOOP_MAX_ITERATIONS"
	// VarInvokeIdentityARN is the shardreader's own execution role ARN, for
	// the records' invokeIdentityArn. infra/ and template/ set it.
	VarInvokeIdentityARN = "SHARDLOOP_INVOKE_IDENTITY_ARN"
	// VarTargetTimeout is the target function's own timeout (default
	// MaxTargetTimeout): one Invoke attempt lasts longer than it.
	VarTargetTimeout = "SHARDLOOP_TARGET_TIMEOUT"

	// The failure policy and batching of the shardreader (docs/failure-policy.md).
	VarMaxRetryAttempts = "SHARDLOOP_MAX_RETRY_ATTEMPTS"
	VarMaxRecordAge     = "SHARDLOOP_MAX_RECORD_AGE"
	VarBisectOnError    = "SHARDLOOP_BISECT_ON_ERROR"
	VarOnFailure        = "SHARDLOOP_ON_FAILURE_DESTINATION"
	VarBatchingWindow   = "SHARDLOOP_BATCHING_WINDOW"
	VarDeaggregate      = "SHARDLOOP_DEAGGREGATE"
	// VarParallelizationFactor is the number of lanes delivering one
	// shard's records concurrently (1 to 10, default 1), as Lambda's
	// ParallelizationFactor.
	VarParallelizationFactor = "SHARDLOOP_PARALLELIZATION_FACTOR"
	// VarTumblingWindow is a tumbling window in seconds (0 to 900, default
	// 0: none), as Lambda's TumblingWindowInSeconds.
	VarTumblingWindow = "SHARDLOOP_TUMBLING_WINDOW_SECONDS"
	// VarFilterCriteria is event filtering: a FilterCriteria in the JSON of
	// Lambda's API, {"Filters": [{"Pattern": "..."}]}, at most MaxFilters
	// patterns. Unset or empty: every record is delivered.
	VarFilterCriteria = "SHARDLOOP_FILTER_CRITERIA"

	// VarReadAheadMiB is the shardreader's memory budget for records read
	// and not yet settled, in MiB (reader.Options.ReadAheadBytes; default
	// 8, 1 to 1024): reads pause at it, and a read asks for no more records
	// than fit in what is left.
	VarReadAheadMiB = "SHARDLOOP_READ_AHEAD_MIB"

	// VarPerShardLag, "true", publishes MillisBehindLatest per shard (the
	// Shard dimension) besides the stream's maximum: one more CloudWatch
	// custom metric per shard. The shardreader reads it.
	VarPerShardLag = "SHARDLOOP_PER_SHARD_LAG"
)

// Defaults of the optional variables (DefaultRunLength is in limits.go).
const (
	DefaultBatchSize = 100
	// DefaultWindow: no window. Each scheduled invocation of the
	// coordinator passes once; SHARDLOOP_WINDOW=<duration> makes it relist
	// every 10 s for that long instead, as before the event-driven shape.
	DefaultWindow time.Duration = 0
	// MinRecordAge and MaxRecordAge bound SHARDLOOP_MAX_RECORD_AGE, as
	// Lambda bounds MaximumRecordAgeInSeconds (60 s to 7 days).
	MinRecordAge = time.Minute
	MaxRecordAge = 7 * 24 * time.Hour
)

// MaxIterations caps SHARDLOOP_MAX_ITERATIONS: an iteration costs the state
// machine about 7 history events (25 with every retry), and an execution
// keeps at most 25,000; infra/ and template/ cap it the same way.
const MaxIterations = 900

// ErrEnv is matched by every configuration error.
var ErrEnv = errors.New("invalid environment")

// Error names the variable that was refused.
type Error struct {
	Var, Value, Want string
}

func (e *Error) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s is not set: want %s", e.Var, e.Want)
	}
	return fmt.Sprintf("%s=%q: want %s", e.Var, e.Value, e.Want)
}

func (e *Error) Is(t error) bool { return t == ErrEnv }

// Reader is the shardreader's configuration.
type Reader struct {
	Table       string
	Target      string
	Coordinator string // empty: no nudge
	// InvokeIdentityARN: empty when SHARDLOOP_INVOKE_IDENTITY_ARN is unset.
	InvokeIdentityARN string
	// TargetTimeout: MaxTargetTimeout when SHARDLOOP_TARGET_TIMEOUT is unset.
	TargetTimeout time.Duration
	// TargetTimeoutKnown is true when SHARDLOOP_TARGET_TIMEOUT is set: the
	// reader then starts no delivery the target's timeout would carry past
	// its run (reader.Options.TargetTimeout), and the variable must be
	// shorter than SHARDLOOP_RUN_LENGTH.
	TargetTimeoutKnown bool
	BatchSize          int32
	PollInterval       time.Duration
	RunLength          time.Duration
	MaxIterations      int

	// MaxRetryAttempts: -1 (default) retries until the records expire.
	MaxRetryAttempts int
	// MaxRecordAge: 0 (SHARDLOOP_MAX_RECORD_AGE unset or -1) is no limit.
	MaxRecordAge  time.Duration
	BisectOnError bool
	// OnFailure is an SQS queue or SNS topic ARN; empty for none.
	OnFailure      string
	BatchingWindow time.Duration
	Deaggregate    bool
	// ParallelizationFactor: 1 (default) to reader.MaxParallelizationFactor.
	ParallelizationFactor int
	// TumblingWindow: 0 (none, default) or 1 s to 900 s.
	TumblingWindow time.Duration
	// Filters are the patterns of SHARDLOOP_FILTER_CRITERIA; none when unset.
	Filters []string
	// PerShardLag: SHARDLOOP_PER_SHARD_LAG is "true".
	PerShardLag bool
	// ReadAheadMiB: SHARDLOOP_READ_AHEAD_MIB, DefaultReadAheadMiB when unset.
	ReadAheadMiB int
}

// ReaderPolicy returns the reader options of the failure policy and
// batching; the handler sets the on-failure destination itself.
func (r Reader) ReaderPolicy() reader.Options {
	return reader.Options{
		Mapping: reader.Mapping{
			MaximumRetryAttempts:       reader.RetryAttempts(r.MaxRetryAttempts),
			MaximumRecordAge:           r.MaxRecordAge,
			BisectBatchOnFunctionError: r.BisectOnError,
			MaximumBatchingWindow:      r.BatchingWindow,
			ParallelizationFactor:      r.ParallelizationFactor,
			TumblingWindow:             r.TumblingWindow,
			FilterCriteria:             r.Filters,
		},
		Deaggregate:   r.Deaggregate,
		TargetTimeout: r.knownTargetTimeout(),

		ReadAheadBytes: r.ReadAheadMiB << 20,
	}
}

func (r Reader) knownTargetTimeout() time.Duration {
	if r.TargetTimeoutKnown {
		return r.TargetTimeout
	}
	return 0
}

// Coordinator is the coordinator's configuration.
type Coordinator struct {
	Stream          string
	Table           string
	StateMachineARN string
	Target          string
	Start           string
	CreateShards    int
	// Window is how long a scheduled invocation relists; 0 (the default)
	// is one pass.
	Window time.Duration
	// RunLength is the loops' run length (SHARDLOOP_RUN_LENGTH, which the
	// shardreader reads too): a watch after a failed loop lasts at most
	// WatchFor(RunLength).
	RunLength time.Duration
	// Function is the coordinator's own function name
	// (AWS_LAMBDA_FUNCTION_NAME, which Lambda sets), whose last update is
	// its configuration's deploy time; empty outside Lambda.
	Function string
}

type env struct {
	get  func(string) string
	errs []error
}

func (e *env) required(name, want string) string {
	v := e.get(name)
	if v == "" {
		e.errs = append(e.errs, &Error{Var: name, Want: want})
	}
	return v
}

func (e *env) intIn(name string, def int, l IntLimit) int {
	v := e.get(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || l.Check(n) != nil {
		e.errs = append(e.errs, &Error{Var: name, Value: v, Want: l.Want()})
		return def
	}
	return n
}

func (e *env) duration(name string, def time.Duration, l DurationLimit) time.Duration {
	v := e.get(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || l.Check(d) != nil {
		e.errs = append(e.errs, &Error{Var: name, Value: v, Want: l.Want()})
		return def
	}
	return d
}

func (e *env) boolean(name string) bool {
	switch v := e.get(name); v {
	case "", "false":
		return false
	case "true":
		return true
	default:
		e.errs = append(e.errs, &Error{Var: name, Value: v, Want: "true or false"})
		return false
	}
}

// windowOrNone reads a duration within l, or "0s" (or unset) for none (0).
func (e *env) windowOrNone(name string, l DurationLimit) time.Duration {
	v := e.get(name)
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err == nil && d == 0 {
		return 0
	}
	if err != nil || l.Check(d) != nil {
		e.errs = append(e.errs, &Error{Var: name, Value: v, Want: "0s (no window: one pass per scheduled invocation) or " + l.Want()})
		return 0
	}
	return d
}

// ageOrNone reads a duration within l, or -1 (or unset) for none (0).
func (e *env) ageOrNone(name string, l DurationLimit) time.Duration {
	v := e.get(name)
	if v == "" || v == "-1" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || l.Check(d) != nil {
		e.errs = append(e.errs, &Error{Var: name, Value: v, Want: "-1 (no limit) or " + l.Want()})
		return 0
	}
	return d
}

// ReaderFromEnv reads the shardreader's variables through getenv.
func ReaderFromEnv(getenv func(string) string) (Reader, error) {
	e := &env{get: getenv}
	r := Reader{
		Table:         e.required(VarTable, "the lease table name"),
		Target:        e.required(VarTarget, "the target function's name or ARN"),
		Coordinator:   getenv(VarCoordinatorFunc),
		BatchSize:     int32(e.intIn(VarBatchSize, DefaultBatchSize, BatchSizeLimit)),
		PollInterval:  e.duration(VarPollInterval, DefaultPollInterval, PollIntervalLimit),
		RunLength:     e.duration(VarRunLength, DefaultRunLength, RunLengthLimit),
		MaxIterations: e.intIn(VarMaxIterations, DefaultMaxIterations, MaxIterationsLimit),

		InvokeIdentityARN: getenv(VarInvokeIdentityARN),
		TargetTimeout:     e.duration(VarTargetTimeout, MaxTargetTimeout, TargetTimeoutLimit),

		MaxRetryAttempts: e.intIn(VarMaxRetryAttempts, -1, RetryAttemptsLimit),
		MaxRecordAge:     e.ageOrNone(VarMaxRecordAge, RecordAgeLimit),
		BisectOnError:    e.boolean(VarBisectOnError),
		OnFailure:        getenv(VarOnFailure),
		BatchingWindow:   e.duration(VarBatchingWindow, 0, BatchingWindowLimit),
		Deaggregate:      e.boolean(VarDeaggregate),
		PerShardLag:      e.boolean(VarPerShardLag),
		ReadAheadMiB:     e.intIn(VarReadAheadMiB, DefaultReadAheadMiB, ReadAheadMiBLimit),

		ParallelizationFactor: e.intIn(VarParallelizationFactor, DefaultParallelizationFactor, ParallelizationFactorLimit),
		Filters:               e.filterCriteria(VarFilterCriteria),
	}
	if r.InvokeIdentityARN != "" {
		if err := CheckInvokeIdentityARN(r.InvokeIdentityARN); err != nil {
			e.errs = append(e.errs, &Error{Var: VarInvokeIdentityARN, Value: r.InvokeIdentityARN, Want: InvokeIdentityWant + ", the shardreader's own execution role"})
		}
	}
	if r.OnFailure != "" {
		if _, err := reader.ParseDestinationARN(r.OnFailure); err != nil {
			e.errs = append(e.errs, &Error{Var: VarOnFailure, Value: r.OnFailure, Want: reader.DestinationForms + ", or empty"})
		}
	}
	if secs := e.intIn(VarTumblingWindow, 0, TumblingWindowLimit); secs > 0 {
		if err := CheckTumblingWindow(secs, r.ParallelizationFactor); err != nil {
			e.errs = append(e.errs, &Error{Var: VarParallelizationFactor, Value: getenv(VarParallelizationFactor), Want: TumblingWindowWant + " (" + VarTumblingWindow + " = " + getenv(VarTumblingWindow) + ")"})
		}
		r.TumblingWindow = time.Duration(secs) * time.Second
	}
	r.TargetTimeoutKnown = getenv(VarTargetTimeout) != ""
	if r.TargetTimeoutKnown && r.RunLength > 0 && r.TargetTimeout >= r.RunLength {
		e.errs = append(e.errs, &Error{Var: VarTargetTimeout, Value: getenv(VarTargetTimeout), Want: fmt.Sprintf("a timeout shorter than the run length (%s = %s): a run must be able to wait out one invocation of the target", VarRunLength, r.RunLength)})
	}
	if r.BatchingWindow > 0 && r.RunLength > 0 && r.BatchingWindow >= r.RunLength {
		e.errs = append(e.errs, &Error{Var: VarBatchingWindow, Value: e.get(VarBatchingWindow), Want: fmt.Sprintf("a window shorter than the run length (%s = %s): a run's end closes a window", VarRunLength, r.RunLength)})
	}
	return r, errors.Join(e.errs...)
}

// CoordinatorFromEnv reads the coordinator's variables through getenv.
func CoordinatorFromEnv(getenv func(string) string) (Coordinator, error) {
	e := &env{get: getenv}
	c := Coordinator{
		Stream:          e.required(VarStream, "the stream's name or ARN"),
		Table:           e.required(VarTable, "the lease table name"),
		StateMachineARN: e.required(VarStateMachine, "the shard loop state machine's ARN"),
		Target:          getenv(VarTarget),
		Start:           getenv(VarStart),
		CreateShards:    e.intIn(VarCreateShards, 0, CreateShardsLimit),
		Window:          e.windowOrNone(VarWindow, WindowLimit),
		RunLength:       e.duration(VarRunLength, DefaultRunLength, RunLengthLimit),
		Function:        getenv("AWS_LAMBDA_FUNCTION_NAME"),
	}
	if c.Stream != "" {
		if _, err := shards.StreamName(c.Stream); err != nil {
			e.errs = append(e.errs, &Error{Var: VarStream, Value: c.Stream, Want: "a stream name or a Kinesis stream ARN"})
		}
	}
	// An unset start is no start: checkpoints always win (docs/design.md).
	if start, err := ParseStart(c.Start); err != nil {
		e.errs = append(e.errs, &Error{Var: VarStart, Value: c.Start, Want: StartForms})
	} else {
		c.Start = start
	}
	return c, errors.Join(e.errs...)
}
