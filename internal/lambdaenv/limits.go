package lambdaenv

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/shardloop/shardloop/internal/awsconf"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
)

// Limits of the settings, one definition each. The functions' environment
// and the CLI's flags are checked against them by the same code (the
// Limit values below); infra/shardloop imports them, and template/ (YAML)
// keeps copies that a test compares.
const (
	// MinPollInterval: a shard allows 5 GetRecords calls a second, shared
	// by every consumer of it; one reader waiting 200 ms after each empty
	// read stays within them.
	MinPollInterval = 200 * time.Millisecond
	MaxPollInterval = time.Minute
	// MinRunLength and MaxRunLength bound one reader run (one shardreader
	// invocation). The shardreader's timeout is the run length plus
	// ShardReaderTimeoutMargin, so MaxRunLength keeps it within Lambda's
	// 15 minutes.
	MinRunLength = 5 * time.Second
	MaxRunLength = reader.MaxRunLength
	// DefaultRunLength is a deployed loop's run length (SHARDLOOP_RUN_LENGTH
	// unset, the construct's and the SAM template's default). Each run costs
	// two state transitions (Read, Decide) and a shardreader invocation, so
	// 10 minutes cost a tenth of what 1 minute does ($0.22 a shard-month of
	// transitions instead of $2.16). The price: new shardreader code or
	// settings reach a loop at its next run, up to 10 minutes after a deploy,
	// and a run whose execution was stopped (ABORTED) goes on reading until
	// its end. docs/deploy.md weighs the choice. The local runner keeps
	// reader.DefaultRunLength (60 s): transitions cost nothing there.
	DefaultRunLength = 10 * time.Minute
	// ShardReaderTimeoutMargin is added to the run length to make the
	// shardreader's timeout: time to finish a delivery begun before the
	// run's end and return the state.
	ShardReaderTimeoutMargin = time.Minute
	// MinBatchSize and MaxBatchSize bound the GetRecords limit.
	MinBatchSize = 1
	MaxBatchSize = reader.MaxBatchSize
	// MaxCreateShards bounds SHARDLOOP_CREATE_SHARDS (0: never create).
	MaxCreateShards = 10000
	// MinWindow and MaxWindow bound the coordinator's relisting window,
	// under Lambda's 15-minute cap. A window is optional: without one (the
	// default) each scheduled invocation passes once, and the coordinator
	// runs when there is something to do (a loop's execution that failed, a
	// reader's nudge).
	MinWindow = time.Second
	MaxWindow = 14 * time.Minute
	// CoordinatorTimeoutMargin is added to what one coordinator invocation
	// may take (its window, or a watch) to make its timeout.
	CoordinatorTimeoutMargin = 15 * time.Second
	// WatchSlack is how much longer than a run a watch after a failed loop
	// lasts at most: the run of an execution that was stopped goes on to
	// its end, and its lease then lapses a lease duration later (two lease
	// durations, so that a watch begun late still sees it lapse).
	WatchSlack = 2 * lease.DefaultDuration
	// MaxRetryAttempts and MaxBatchingWindow are Lambda's own limits for its
	// Kinesis trigger.
	MaxRetryAttempts  = reader.MaxRetryAttemptsLimit
	MaxBatchingWindow = reader.MaxBatchingWindow
	// DefaultPollInterval and DefaultMaxIterations are the reader's.
	DefaultPollInterval  = reader.DefaultPollInterval
	DefaultMaxIterations = reader.DefaultMaxIterations
	// DefaultParallelizationFactor and MaxParallelizationFactor bound the
	// lanes of one shard (SHARDLOOP_PARALLELIZATION_FACTOR, run
	// --parallelization-factor, the construct's ParallelizationFactor):
	// the reader's own, Lambda's bounds for its trigger.
	DefaultParallelizationFactor = reader.DefaultParallelizationFactor
	MaxParallelizationFactor     = reader.MaxParallelizationFactor
	// MaxTumblingWindowSeconds bounds a tumbling window in seconds
	// (SHARDLOOP_TUMBLING_WINDOW_SECONDS, run --tumbling-window-seconds, the
	// construct's TumblingWindowInSeconds, the SAM parameter): 1 to 900 as
	// Lambda's TumblingWindowInSeconds, 0 (the default) for none. A window
	// needs a parallelization factor of 1 (CheckTumblingWindow).
	MaxTumblingWindowSeconds = int(reader.MaxTumblingWindow / time.Second)
	// MaxFilters bounds the filters of event filtering
	// (SHARDLOOP_FILTER_CRITERIA, run --filter, the construct's Filters):
	// the reader's own, Lambda's default quota per event source mapping.
	MaxFilters = reader.MaxFilters
	// MinTargetTimeout and MaxTargetTimeout bound the target's timeout as
	// configured (Lambda allows 1 s to 15 min); the default is the maximum.
	MinTargetTimeout = time.Second
	MaxTargetTimeout = awsconf.MaxTargetTimeout
	// DefaultReadAheadMiB, MinReadAheadMiB and MaxReadAheadMiB bound the
	// shardreader's memory budget for records read ahead
	// (SHARDLOOP_READ_AHEAD_MIB, run --read-ahead-mib, the construct's
	// ReadAheadMiB, the SAM parameter), in MiB: the reader's
	// ReadAheadBytes. The default suits a 128 MB function.
	DefaultReadAheadMiB = reader.DefaultReadAheadBytes >> 20
	MinReadAheadMiB     = reader.MinReadAheadBytes >> 20
	MaxReadAheadMiB     = reader.MaxReadAheadBytes >> 20
)

// WatchFor is how long a coordinator invocation watches the shard of a
// loop whose execution ended FAILED, TIMED_OUT or ABORTED for its lease to
// lapse: a run of that execution may still be going on (a stopped
// execution's run reads on to its end).
func WatchFor(runLength time.Duration) time.Duration { return runLength + WatchSlack }

// CoordinatorTimeout is the coordinator function's timeout: room for its
// window (0 for none) and for a watch after a failed loop of runLength.
// It is at most 15 minutes for the limits above.
func CoordinatorTimeout(window, runLength time.Duration) time.Duration {
	return max(window, WatchFor(runLength)) + CoordinatorTimeoutMargin
}

// ShardReaderTimeout is the shardreader function's timeout for a run length.
func ShardReaderTimeout(runLength time.Duration) time.Duration {
	return runLength + ShardReaderTimeoutMargin
}

// WantError is a refused setting: Want says what was expected.
type WantError struct{ Want string }

func (e *WantError) Error() string { return "want " + e.Want }

// DurationLimit is the closed range a duration setting must fall in.
type DurationLimit struct {
	Min, Max time.Duration
	// Why, when set, is said after the range.
	Why string
}

// Want describes the range.
func (l DurationLimit) Want() string {
	w := fmt.Sprintf("a Go duration from %s to %s", l.Min, l.Max)
	if l.Why != "" {
		w += "; " + l.Why
	}
	return w
}

// Check returns nil for a duration in the range, else a *WantError.
func (l DurationLimit) Check(d time.Duration) error {
	if d < l.Min || d > l.Max {
		return &WantError{Want: l.Want()}
	}
	return nil
}

// IntLimit is the closed range an integer setting must fall in.
type IntLimit struct {
	Min, Max int
	Why      string
}

// Want describes the range.
func (l IntLimit) Want() string {
	w := fmt.Sprintf("an integer from %d to %d", l.Min, l.Max)
	if l.Why != "" {
		w += "; " + l.Why
	}
	return w
}

// Check returns nil for an integer in the range, else a *WantError.
func (l IntLimit) Check(n int) error {
	if n < l.Min || n > l.Max {
		return &WantError{Want: l.Want()}
	}
	return nil
}

// The limits of each setting.
var (
	PollIntervalLimit   = DurationLimit{Min: MinPollInterval, Max: MaxPollInterval, Why: "a shard allows 5 GetRecords calls a second, shared by every consumer"}
	RunLengthLimit      = DurationLimit{Min: MinRunLength, Max: MaxRunLength, Why: "under Lambda's 15-minute cap"}
	WindowLimit         = DurationLimit{Min: MinWindow, Max: MaxWindow}
	BatchingWindowLimit = DurationLimit{Min: 0, Max: MaxBatchingWindow}
	RecordAgeLimit      = DurationLimit{Min: MinRecordAge, Max: MaxRecordAge}
	TargetTimeoutLimit  = DurationLimit{Min: MinTargetTimeout, Max: MaxTargetTimeout, Why: "the target function's own timeout; Lambda allows at most 15m0s"}
	BatchSizeLimit      = IntLimit{Min: MinBatchSize, Max: MaxBatchSize, Why: "GetRecords returns at most 10000 records"}
	CreateShardsLimit   = IntLimit{Min: 0, Max: MaxCreateShards, Why: "0 never creates the stream"}
	MaxIterationsLimit  = IntLimit{Min: 1, Max: MaxIterations}
	RetryAttemptsLimit  = IntLimit{Min: -1, Max: MaxRetryAttempts, Why: "-1 retries until the records expire"}
	// ParallelizationFactorLimit bounds the lanes of one shard, as Lambda
	// bounds its trigger's ParallelizationFactor.
	ParallelizationFactorLimit = IntLimit{Min: 1, Max: MaxParallelizationFactor, Why: "lanes delivering one shard concurrently, as Lambda's ParallelizationFactor"}
	// ReadAheadMiBLimit bounds the memory budget for records read ahead.
	ReadAheadMiBLimit = IntLimit{Min: MinReadAheadMiB, Max: MaxReadAheadMiB, Why: "MiB of records read and not yet settled; the default suits a 128 MB function"}
	// TumblingWindowLimit bounds a tumbling window in seconds.
	TumblingWindowLimit = IntLimit{Min: 0, Max: MaxTumblingWindowSeconds, Why: "seconds, as Lambda's TumblingWindowInSeconds; 0: no windows"}
)

// TumblingWindowWant is what CheckTumblingWindow wants of the
// parallelization factor.
const TumblingWindowWant = "a parallelization factor of 1 with a tumbling window: a window's state is one per shard, and Lambda's trigger refuses ParallelizationFactor above 1 with TumblingWindowInSeconds"

// CheckTumblingWindow checks a tumbling window (seconds) and the
// parallelization factor it goes with.
func CheckTumblingWindow(seconds, factor int) error {
	if err := TumblingWindowLimit.Check(seconds); err != nil {
		return err
	}
	if seconds > 0 && factor != 1 {
		return &WantError{Want: TumblingWindowWant}
	}
	return nil
}

// StartForms are the start positions ParseStart reads.
const StartForms = "TRIM_HORIZON, LATEST or AT_TIMESTAMP:<unix seconds or RFC 3339 time> as Lambda's trigger spells them; or horizon, latest, timestamp:<unix ms or RFC 3339 time> or sequence:<shard id>:<sequence number>"

// Trigger spellings of a start position, as Lambda's Kinesis trigger names
// its StartingPosition (and StartingPositionTimestamp, in seconds).
const (
	StartTrimHorizon = "TRIM_HORIZON"
	StartLatest      = "LATEST"
	StartAtTimestamp = "AT_TIMESTAMP"
)

// maxTriggerSeconds: an AT_TIMESTAMP beyond this many seconds (the year
// 5138) is taken for milliseconds given by mistake and refused, since
// AT_TIMESTAMP counts seconds as Lambda's StartingPositionTimestamp does.
const maxTriggerSeconds = 1e11

// ParseStart checks a configured start position and returns it in the
// text form the lease rows record, so that one start has one form however
// it was spelled: TRIM_HORIZON is horizon, LATEST is latest, AT_TIMESTAMP:
// <unix seconds> (fractions allowed) or AT_TIMESTAMP:<RFC 3339 time> and
// timestamp:<RFC 3339 time> become timestamp:<unix ms>. (A start's form
// names its generation: TRIM_HORIZON where horizon was deployed is the
// same start, not a new one.) The empty string, no start configured, is
// returned unchanged.
func ParseStart(s string) (string, error) {
	switch {
	case s == "":
		return "", nil
	case s == StartTrimHorizon:
		return string(reader.Horizon), nil
	case s == StartLatest:
		return string(reader.Latest), nil
	case strings.HasPrefix(s, StartAtTimestamp+":"):
		return parseAtTimestamp(strings.TrimPrefix(s, StartAtTimestamp+":"))
	case s == StartAtTimestamp:
		return "", &WantError{Want: "AT_TIMESTAMP:<unix seconds or RFC 3339 time>, e.g. AT_TIMESTAMP:1767366245 or AT_TIMESTAMP:2026-01-02T15:04:05Z: the time the trigger takes as StartingPositionTimestamp"}
	}
	p, err := reader.ParseUserPosition(s)
	if err != nil {
		return "", &WantError{Want: StartForms}
	}
	return p.String(), nil
}

// parseAtTimestamp reads the time of AT_TIMESTAMP:<time>: unix seconds, as
// Lambda's StartingPositionTimestamp, or an RFC 3339 time.
func parseAtTimestamp(v string) (string, error) {
	want := func(why string) error {
		return &WantError{Want: "AT_TIMESTAMP:<unix seconds or RFC 3339 time>" + why}
	}
	var at time.Time
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		switch {
		case math.IsNaN(secs) || secs < 0:
			return "", want(", not before 1970")
		case secs >= maxTriggerSeconds:
			return "", want(fmt.Sprintf(": %s seconds is after the year 5000; AT_TIMESTAMP counts seconds, as the trigger's StartingPositionTimestamp does (for milliseconds write timestamp:%s)", v, v))
		}
		at = time.UnixMilli(int64(math.Round(secs * 1000)))
	} else {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil || t.UnixMilli() < 0 {
			return "", want(", e.g. AT_TIMESTAMP:1767366245 or AT_TIMESTAMP:2026-01-02T15:04:05Z")
		}
		at = t
	}
	return reader.Position{Kind: reader.Timestamp, At: time.UnixMilli(at.UnixMilli()).UTC()}.String(), nil
}

// iamARN is an IAM principal's ARN: a role's, a user's, the account root.
var iamARN = regexp.MustCompile(`^arn:aws[a-zA-Z-]*:iam::[0-9]{12}:(role/.+|user/.+|root)$`)

// InvokeIdentityWant is what CheckInvokeIdentityARN wants.
const InvokeIdentityWant = "an IAM role ARN, arn:aws:iam::<account>:role/<name> (or a user's, arn:aws:iam::<account>:user/<name>)"

// CheckInvokeIdentityARN checks the ARN the records' invokeIdentityArn
// carries.
func CheckInvokeIdentityARN(arn string) error {
	if !iamARN.MatchString(arn) {
		return &WantError{Want: InvokeIdentityWant}
	}
	return nil
}
