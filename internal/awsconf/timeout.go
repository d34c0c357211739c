package awsconf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// TimeoutError is an attempt that got no complete answer within its bound.
// It is what the SDK's operation error wraps; errors.As reaches it.
//
// It deliberately does not match context.DeadlineExceeded: the caller's
// context did not end, one attempt did.
type TimeoutError struct {
	Service   string // the SDK's service id, e.g. "Kinesis"
	Operation string // e.g. "GetRecords"
	Endpoint  string // the URL the attempt was sent to, without its query
	After     time.Duration
	retryable bool
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s %s: no answer from %s within %s (the attempt timeout of %s calls)", e.Service, e.Operation, e.Endpoint, e.After, e.Service)
}

// Timeout reports true, as a net.Error's would.
func (e *TimeoutError) Timeout() bool { return true }

// RetryableError tells the SDK's retryer whether another attempt may be
// made: yes, except for the target's Invoke, which may have run, and for
// GetRecords, which the reader sends again asking for fewer records.
func (e *TimeoutError) RetryableError() bool { return e.retryable }

const attemptTimeoutID = "ShardloopAttemptTimeout"

// attemptTimeout returns the API option that bounds each attempt by
// s.AttemptTimeout. It sits right after the SDK's Retry middleware, so it
// runs once per attempt, around signing, sending and reading the answer. It
// replaces one added before (a Load config's), so a client's own service
// bound wins.
func attemptTimeout(s Settings, retryable bool) func(*middleware.Stack) error {
	m := attemptTimeoutMiddleware{d: s.AttemptTimeout, retryable: retryable}
	return func(stack *middleware.Stack) error {
		_, _ = stack.Finalize.Remove(attemptTimeoutID)
		return stack.Finalize.Insert(m, "Retry", middleware.After)
	}
}

type attemptTimeoutMiddleware struct {
	d         time.Duration
	retryable bool
}

func (attemptTimeoutMiddleware) ID() string { return attemptTimeoutID }

func (m attemptTimeoutMiddleware) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
	middleware.FinalizeOutput, middleware.Metadata, error,
) {
	actx, cancel := context.WithTimeout(ctx, m.d)
	defer cancel() // every operation shardloop calls has read its whole answer by now
	out, md, err := next.HandleFinalize(actx, in)
	if err != nil && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
		err = &TimeoutError{
			Service:   awsmiddleware.GetServiceID(ctx),
			Operation: awsmiddleware.GetOperationName(ctx),
			Endpoint:  endpointOf(in.Request),
			After:     m.d,
			retryable: m.retryable,
		}
	}
	return out, md, err
}

func endpointOf(req any) string {
	r, ok := req.(*smithyhttp.Request)
	if !ok || r.URL == nil {
		return "the endpoint"
	}
	u := *r.URL
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u.String()
}

// InvokeRetryable decides whether an Invoke of the target may be sent
// again: only when the error proves the function did not run.
//
//   - throttled (TooManyRequestsException, HTTP 429): Lambda refused the
//     invoke before running anything: yes;
//   - the request never left this host (the connection could not be
//     dialled, the host name could not be resolved): yes;
//   - anything else (a connection reset or closed after the request was
//     written, an attempt timeout, a 5xx, a canceled context): no. The
//     function may be running; a second invoke would overlap it.
func InvokeRetryable(err error) aws.Ternary {
	if err == nil {
		return aws.UnknownTernary
	}
	var canceled interface{ CanceledError() bool }
	if errors.As(err, &canceled) && canceled.CanceledError() {
		return aws.FalseTernary
	}
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "TooManyRequestsException" {
		return aws.TrueTernary
	}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) && status.HTTPStatusCode() == 429 {
		return aws.TrueTernary
	}
	if neverSent(err) {
		return aws.TrueTernary
	}
	return aws.FalseTernary
}

// neverSent reports whether err says the request could not leave this
// host (NeverLeft), except a name that does not exist: it will not appear
// on a retry.
func neverSent(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return false
	}
	return NeverLeft(err)
}

// NeverLeft reports whether err says a request could not leave this host:
// a failed dial (refused, unreachable, dial timeout) or a failed name
// lookup. Anything that happened on an established connection may have
// come after the request was written.
func NeverLeft(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
