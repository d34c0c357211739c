package handlers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/shardloop/shardloop/pkg/reader"
)

// FunctionConfigAPI is the Lambda call TargetTimeout makes.
type FunctionConfigAPI interface {
	GetFunctionConfiguration(ctx context.Context, in *lambda.GetFunctionConfigurationInput, optFns ...func(*lambda.Options)) (*lambda.GetFunctionConfigurationOutput, error)
}

// TargetTimeoutTTL is how long a target's timeout, once read, is trusted:
// a change to the function's configuration is picked up by the first run
// that starts after it (at most this later), or at once after an Invoke
// refused because the function was being updated.
const TargetTimeoutTTL = time.Minute

// TargetTimeout reads the configured timeout of a Lambda target with
// GetFunctionConfiguration, the longest one invocation can run whatever its
// caller does: what the lease's fence must cover. It caches it for
// TargetTimeoutTTL, and forgets it when an Invoke meets the function being
// updated (Stale). Safe for concurrent use.
type TargetTimeout struct {
	api       FunctionConfigAPI
	function  string
	qualifier string
	clock     func() time.Time

	mu     sync.Mutex
	value  time.Duration
	readAt time.Time
}

// NewTargetTimeout returns a TargetTimeout for function (a name or ARN) at
// qualifier (a version or alias; empty for $LATEST).
func NewTargetTimeout(api FunctionConfigAPI, function, qualifier string) *TargetTimeout {
	return &TargetTimeout{api: api, function: function, qualifier: qualifier, clock: time.Now}
}

// Get returns the function's timeout, read again when the last read is
// older than TargetTimeoutTTL or was made stale.
func (t *TargetTimeout) Get(ctx context.Context) (time.Duration, error) {
	t.mu.Lock()
	if !t.readAt.IsZero() && t.clock().Sub(t.readAt) < TargetTimeoutTTL {
		defer t.mu.Unlock()
		return t.value, nil
	}
	t.mu.Unlock()
	in := &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(t.function)}
	if t.qualifier != "" {
		in.Qualifier = aws.String(t.qualifier)
	}
	out, err := t.api.GetFunctionConfiguration(ctx, in)
	if err != nil {
		return 0, fmt.Errorf("read the timeout of the target %s (lambda:GetFunctionConfiguration on it is needed): %w", t.function, err)
	}
	secs := aws.ToInt32(out.Timeout)
	if secs < 1 {
		return 0, fmt.Errorf("read the timeout of the target %s: the configuration has no timeout", t.function)
	}
	d := time.Duration(secs) * time.Second
	t.mu.Lock()
	defer t.mu.Unlock()
	t.value, t.readAt = d, t.clock()
	return d, nil
}

// Stale makes the next Get read the configuration again.
func (t *TargetTimeout) Stale() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.readAt = time.Time{}
}

// staleOnUpdate is a reader.LambdaInvoker that makes tt stale when an
// Invoke finds the function being updated (ResourceConflictException):
// its timeout may be about to change.
type staleOnUpdate struct {
	reader.LambdaInvoker
	tt *TargetTimeout
}

func (s staleOnUpdate) Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	out, err := s.LambdaInvoker.Invoke(ctx, in, optFns...)
	var conflict *ltypes.ResourceConflictException
	if errors.As(err, &conflict) {
		s.tt.Stale()
	}
	return out, err
}

// FenceFor checks a run's bounds against the target's timeout: the run
// must outlast one invocation (runLength), and an explicit fence (0: the
// timeout) may be at most reader.MaxFenceCut below it. It returns the
// fence the reader records.
func FenceFor(timeout, fence, runLength time.Duration) (time.Duration, error) {
	switch {
	case runLength > 0 && timeout >= runLength:
		return 0, fmt.Errorf("the target's timeout (%s) must be shorter than the run length (%s): a run must be able to wait out one invocation; lower the function's timeout or raise the run length", timeout, runLength)
	case fence > 0 && fence < timeout && timeout-fence > reader.MaxFenceCut(0, 0):
		return 0, fmt.Errorf("the fence (%s) may be at most %s below the target's timeout (%s)", fence, reader.MaxFenceCut(0, 0), timeout)
	case fence <= 0 || fence > timeout:
		return timeout, nil
	}
	return fence, nil
}

// lastModifiedLayout is how Lambda writes a function's LastModified.
const lastModifiedLayout = "2006-01-02T15:04:05.000-0700"

// DeployedAt returns when function was last updated (its configuration's
// LastModified, on Lambda's clock): the deploy time of the configuration it
// runs, which orders start generations (coordinator.Subscription.DeployedAt).
func DeployedAt(ctx context.Context, api FunctionConfigAPI, function string) (time.Time, error) {
	out, err := api.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(function)})
	if err != nil {
		return time.Time{}, fmt.Errorf("read the configuration of %s (lambda:GetFunctionConfiguration on it is needed): %w", function, err)
	}
	at, err := time.Parse(lastModifiedLayout, aws.ToString(out.LastModified))
	if err != nil {
		return time.Time{}, fmt.Errorf("read the configuration of %s: LastModified %q: %w", function, aws.ToString(out.LastModified), err)
	}
	return at, nil
}
