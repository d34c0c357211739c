package lambdaenv

import (
	"fmt"
	"regexp"
	"time"

	"github.com/shardloop/shardloop/internal/awsconf"
	"github.com/shardloop/shardloop/pkg/reader"
)

// Limits of the settings, one definition each. The functions' environment
// and the CLI's flags are checked against them by the same code (the
// Limit values below); infra/ and template/ keep copies.
const (
	// MinPollInterval: a shard allows 5 GetRecords calls a second, shared
	// by every consumer of it; one reader waiting 200 ms after each empty
	// read stays within them.
	MinPollInterval = 200 * time.Millisecond
	MaxPollInterval = time.Minute
	// MinRunLength and MaxRunLength bound one reader run (one shardreader
	// invocation).
	MinRunLength = 5 * time.Second
	MaxRunLength = reader.MaxRunLength
	// MinBatchSize and MaxBatchSize bound the GetRecords limit.
	MinBatchSize = 1
	MaxBatchSize = reader.MaxBatchSize
	// MaxCreateShards bounds SHARDLOOP_CREATE_SHARDS (0: never create).
	MaxCreateShards = 10000
	// MinWindow and MaxWindow bound the coordinator's relisting window,
	// under Lambda's 15-minute cap.
	MinWindow = time.Second
	MaxWindow = 14 * time.Minute
	// MinTargetTimeout and MaxTargetTimeout bound the target's timeout as
	// configured (Lambda allows 1 s to 15 min); the default is the maximum.
	MinTargetTimeout = time.Second
	MaxTargetTimeout = awsconf.MaxTargetTimeout
)

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
	BatchingWindowLimit = DurationLimit{Min: 0, Max: reader.MaxBatchingWindow}
	RecordAgeLimit      = DurationLimit{Min: MinRecordAge, Max: MaxRecordAge}
	TargetTimeoutLimit  = DurationLimit{Min: MinTargetTimeout, Max: MaxTargetTimeout, Why: "the target function's own timeout; Lambda allows at most 15m0s"}
	BatchSizeLimit      = IntLimit{Min: MinBatchSize, Max: MaxBatchSize, Why: "GetRecords returns at most 10000 records"}
	CreateShardsLimit   = IntLimit{Min: 0, Max: MaxCreateShards, Why: "0 never creates the stream"}
	MaxIterationsLimit  = IntLimit{Min: 1, Max: MaxIterations}
	RetryAttemptsLimit  = IntLimit{Min: -1, Max: reader.MaxRetryAttemptsLimit, Why: "-1 retries until the records expire"}
	// ParallelizationFactorLimit bounds the lanes of one shard, as Lambda
	// bounds its trigger's ParallelizationFactor; infra/ reads the same
	// constants from pkg/reader.
	ParallelizationFactorLimit = IntLimit{Min: 1, Max: reader.MaxParallelizationFactor, Why: "lanes delivering one shard concurrently, as Lambda's ParallelizationFactor"}
)

// StartForms are the start positions ParseStart reads.
const StartForms = "latest, horizon, timestamp:<unix ms or RFC 3339 time> or sequence:<shard id>:<sequence number>"

// ParseStart checks a configured start position and returns it in the
// text form the lease rows record (an RFC 3339 time becomes
// timestamp:<unix ms>). The empty string, no start configured, is returned
// unchanged.
func ParseStart(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	p, err := reader.ParseUserPosition(s)
	if err != nil {
		return "", &WantError{Want: StartForms}
	}
	return p.String(), nil
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
