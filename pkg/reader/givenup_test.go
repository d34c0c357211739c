package reader

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// errReset is a call that broke after the request left: the function may
// be running.
var errReset = errors.New("read tcp: connection reset by peer")

// resettingFunction is functionModel whose every third call breaks at once
// (a connection reset after the request was sent) while its invocation runs
// on to its end, as a Lambda invocation does.
type resettingFunction struct {
	*functionModel
	calls atomic.Int64
}

func (f *resettingFunction) Deliver(ctx context.Context, b Batch) (int, error) {
	if f.calls.Add(1)%3 != 0 {
		return f.functionModel.Deliver(ctx, b)
	}
	cut, cancel := context.WithCancel(ctx)
	cancel() // the caller hears of the break at once; the function does not
	n, err := f.functionModel.Deliver(cut, b)
	if err != nil {
		return n, fmt.Errorf("%w (%w)", errReset, err)
	}
	return n, nil
}

// TestRun_ACallThatBrokeIsNotRetriedWhileItsInvocationMayRun: a call to the
// function that fails without its answer (a connection reset, a timeout on
// the way back) leaves the invocation running. Retrying the batch at once
// would run it twice at the function at the same time, one key's records
// in two invocations at once: the lane waits until the broken one could
// have ended (the target's timeout from its start) before it delivers
// again. One shard, one lane: no two invocations may overlap at all.
func TestRun_ACallThatBrokeIsNotRetriedWhileItsInvocationMayRun(t *testing.T) {
	for _, factor := range []int{1, 4} {
		t.Run(fmt.Sprintf("factor-%d", factor), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMemStream(t)
				m.put(t, keys(1), 40) // one key: every lane's batch is the same lane's
				fm := &resettingFunction{functionModel: newFunctionModel(func(Batch) time.Duration { return 1500 * time.Millisecond })}
				gh := &givenUpHooks{}
				o := Options{Kinesis: m.k, Store: m.store, Target: fm, Mapping: Mapping{
					BatchSize:             5,
					ParallelizationFactor: factor,
				},
					RunLength:    5 * time.Minute,
					PollInterval: 200 * time.Millisecond, RetryMin: 100 * time.Millisecond, RetryMax: time.Second,
					TargetTimeout: 4 * time.Second, Hooks: gh}
				st := m.state("A")
				for range 20 {
					next, err := Run(t.Context(), o, st)
					if err != nil {
						t.Fatal(err)
					}
					if _, _, n := fm.report(); n == 40 {
						break
					}
					if !next.Continue {
						t.Fatalf("the loop ended %q", next.Reason)
					}
					st = next
				}
				synctest.Wait()
				time.Sleep(5 * time.Second) // every invocation ran to its end
				overlaps, spans, n := fm.report()
				if n != 40 {
					t.Fatalf("%d of 40 records settled", n)
				}
				if fm.calls.Load() < 6 {
					t.Fatalf("%d calls: not the run asked for", fm.calls.Load())
				}
				if len(overlaps) > 0 {
					t.Fatalf("invocations overlapped at the function (%d invocations): %v", len(spans), overlaps)
				}
				if n, want := gh.n.Load(), fm.calls.Load()/3; n != want || gh.wait.Load() != int64(4400*time.Millisecond) {
					t.Fatalf("InvocationGivenUp reported %d calls given up (want %d, every third), the last waiting %s (want 4.4s)", n, want, time.Duration(gh.wait.Load()))
				}
			})
		})
	}
}

// givenUpHooks counts the calls a run reports given up on.
type givenUpHooks struct {
	NopHooks
	n, wait atomic.Int64
}

func (h *givenUpHooks) InvocationGivenUp(_, _ string, wait time.Duration) {
	h.n.Add(1)
	h.wait.Store(int64(wait))
}

// notRun tells an Invoke Lambda refused (or that never left) from one that
// may have reached the function: only the latter is waited out.
func TestNotRun_RefusedOrNeverSentButNotBroken(t *testing.T) {
	status := func(code int) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: errors.New("api error")}
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"throttled", status(429), true},
		{"not found", status(404), true},
		{"request too large", status(413), true},
		{"service error", status(500), false},
		{"dial refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{"no such host", &net.DNSError{Err: "no such host", IsNotFound: true}, true},
		{"reset after the request left", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, false},
		{"attempt timeout", context.DeadlineExceeded, false},
	} {
		if got := notRun(fmt.Errorf("invoke: %w", c.err)); got != c.want {
			t.Errorf("%s: notRun = %v, want %v", c.name, got, c.want)
		}
	}
}

// throttledFunction refuses every other call before running anything.
type throttledFunction struct {
	*functionModel
	calls atomic.Int64
}

func (f *throttledFunction) Deliver(ctx context.Context, b Batch) (int, error) {
	if f.calls.Add(1)%2 == 0 {
		return 0, fmt.Errorf("invoke: %w: TooManyRequestsException", ErrNotRun)
	}
	return f.functionModel.Deliver(ctx, b)
}

// A call Lambda refused ran nothing: its retry waits the backoff, not the
// function's timeout.
func TestRun_AThrottledCallIsRetriedAfterTheBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		m.put(t, keys(1), 10)
		fm := &throttledFunction{functionModel: newFunctionModel(func(Batch) time.Duration { return 100 * time.Millisecond })}
		o := Options{Kinesis: m.k, Store: m.store, Target: fm, Mapping: Mapping{BatchSize: 5}, RunLength: 30 * time.Second,
			PollInterval: 200 * time.Millisecond, RetryMin: 100 * time.Millisecond, RetryMax: time.Second, TargetTimeout: 10 * time.Second,
			Hooks: &givenUpHooks{}}
		began := time.Now()
		st := m.state("A")
		for {
			next, err := Run(t.Context(), o, st)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, n := fm.report(); n == 10 || !next.Continue {
				break
			}
			st = next
		}
		_, spans, n := fm.report()
		if n != 10 {
			t.Fatalf("%d of 10 records settled", n)
		}
		var last time.Time
		for _, s := range spans {
			if s.end.After(last) {
				last = s.end
			}
		}
		if took := last.Sub(began); took >= o.TargetTimeout {
			t.Fatalf("two throttled batches took %s to settle: waited as if the function ran on", took)
		}
		if n := o.Hooks.(*givenUpHooks).n.Load(); n != 0 {
			t.Fatalf("InvocationGivenUp reported %d throttled calls given up; a refused call ran nothing", n)
		}
	})
}
