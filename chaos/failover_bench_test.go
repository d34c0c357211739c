package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/shardloop/shardloop/internal/quiet"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/runner"
	"github.com/shardloop/shardloop/pkg/shards"
)

// benchTargetTimeout is the target function's timeout in the failover
// benchmarks: the fence a takeover waits out after a holder died with an
// invocation in flight.
const benchTargetTimeout = 3 * time.Second

// functionTarget is a model of a Lambda function for the failover
// benchmarks: each invocation runs for run, to its end whatever its caller
// does, and its start counts as a delivery of its shard (events). A caller
// whose context ends gets its error at once.
func functionTarget(ev *events, run time.Duration) reader.Target {
	return reader.FuncTarget(func(ctx context.Context, b reader.Batch) (int, error) {
		now := time.Now()
		ev.mu.Lock()
		ev.deliveries[b.ShardID] = append(ev.deliveries[b.ShardID], now)
		ev.mu.Unlock()
		done := make(chan struct{})
		go func() { time.Sleep(run); close(done) }()
		select {
		case <-done:
			return len(b.Records), nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	})
}

// BenchmarkFailover kills the loops of 8 shards, three rounds (24 kills),
// on one runner at default settings whose target is a function with a 3 s
// timeout, each loop killed idle: nothing was produced to its shard for two
// renew intervals, so its last renewal recorded no fence. Records are
// produced to a shard from its kill on, and the benchmark measures from the
// kill to the new owner's first delivery: about a lease (10 s), the fence
// costing nothing. It measures the deployment's event path: a kill is
// reported to the coordinator as a failed execution is (runner.Kill calls
// coordinator.Failed), which watches the shard's lease until it lapses on
// its own clock and takes it.
func BenchmarkFailover(b *testing.B) {
	guard := quiet.Begin(b, "failover_p50_s", "failover_p99_s")
	total, toTake, toFirst := failover(b, "failover", false)
	guard.Check(b)
	fmt.Printf("bench failover_p50_s %.2f s (killed idle, a 3 s target timeout; event path: the kill reported as a failed execution, the shard watched until its lease lapses)\n", quantile(total, 0.5))
	fmt.Printf("bench failover_p99_s %.2f s (%d kills; max %.2f s)\n", quantile(total, 0.99), len(total), quantile(total, 1))
	fmt.Printf("bench failover_breakdown_mean_s kill→take %.2f, take→first delivery %.2f s\n", mean(toTake), mean(toFirst))
	b.ReportMetric(quantile(total, 0.99), "p99_s")
}

// BenchmarkFailoverInflight is BenchmarkFailover with every loop killed in
// the middle of an invocation of its target (2 s invocations back to back,
// a 3 s timeout): the invocation runs on after its caller died, so the new
// owner waits the lease and the target's timeout (the fence) before its
// first delivery: about 13 s.
func BenchmarkFailoverInflight(b *testing.B) {
	guard := quiet.Begin(b, "failover_inflight_p50_s", "failover_inflight_p99_s")
	total, toTake, toFirst := failover(b, "failover-inflight", true)
	guard.Check(b)
	fmt.Printf("bench failover_inflight_p50_s %.2f s (killed mid-invoke, a 3 s target timeout: the lease and the fence)\n", quantile(total, 0.5))
	fmt.Printf("bench failover_inflight_p99_s %.2f s (%d kills; max %.2f s; kill→take %.2f, take→first delivery %.2f s on average)\n",
		quantile(total, 0.99), len(total), quantile(total, 1), mean(toTake), mean(toFirst))
	b.ReportMetric(quantile(total, 0.99), "p99_s")
}

// failover runs three rounds of kills of the loops of 8 shards and returns,
// per kill, the seconds from the kill to the new owner's first delivery,
// to the coordinator's take, and from the take to that delivery. inflight:
// records flow all along into 2 s invocations and each loop is killed
// mid-invocation; else production stops before each round, for the loops
// to go idle, and goes on to a shard from its kill.
func failover(b *testing.B, name string, inflight bool) (total, toTake, toFirst []float64) {
	const nShards, rounds = 8, 3
	kc, dc := startLocal(b)
	stream, table := name, name+"-leases"
	ss := newStream(b, kc, dc, stream, table, nShards)
	ev := newEvents()
	run := 50 * time.Millisecond
	if inflight {
		run = 2 * time.Second
	}
	r := startRunner(b, kc, dc, stream, table, ev, functionTarget(ev, run), func(o *runner.Options) { o.Reader.TargetTimeout = benchTargetTimeout })
	ctx, stop := context.WithCancel(b.Context())
	defer stop()
	prodCtx, stopProd := context.WithCancel(ctx)
	go produceEvery(prodCtx, kc, stream, ss, 250*time.Millisecond)
	begin := time.Now()
	if !waitUntil(ctx, 60*time.Second, func() bool {
		for _, s := range ss {
			if _, ok := ev.firstDeliveryAfter(s.ID, begin); !ok {
				return false
			}
		}
		return true
	}) {
		b.Fatal("not every shard delivered within 60 s")
	}
	rng := rand.New(rand.NewPCG(defaultSeed, 2))
	var mu sync.Mutex
	var samples []failoverSample
	for round := range rounds {
		if !inflight {
			stopProd()
			time.Sleep(2*lease.DefaultRenewInterval + time.Second) // each loop's last renewal finds it idle
		}
		var roundProd []context.CancelFunc
		var wg sync.WaitGroup
		for _, s := range ss {
			delay := time.Duration(rng.Int64N(int64(4 * time.Second)))
			pctx, cancel := context.WithCancel(ctx)
			roundProd = append(roundProd, cancel)
			wg.Go(func() {
				time.Sleep(delay)
				owner := r.Kill(stream, s.ID)
				killed := time.Now()
				if owner == "" {
					b.Errorf("round %d: no loop of %s to kill", round, s.ID)
					return
				}
				if !inflight {
					go produceEvery(pctx, kc, stream, []shards.Shard{s}, 250*time.Millisecond)
				}
				var first time.Time
				if !waitUntil(ctx, 90*time.Second, func() bool {
					var ok bool
					first, ok = ev.firstDeliveryAfter(s.ID, killed)
					return ok
				}) {
					b.Errorf("round %d: %s not taken over within 90 s", round, s.ID)
					return
				}
				ev.mu.Lock()
				expiry := ev.renewed[owner].Add(lease.DefaultDuration)
				var take time.Time
				for _, t := range ev.takes[s.ID] {
					if t.at.After(killed) && t.owner != owner {
						take = t.at
						break
					}
				}
				ev.mu.Unlock()
				sec := func(t time.Time) float64 { return t.Sub(begin).Seconds() }
				mu.Lock()
				samples = append(samples, failoverSample{Shard: s.ID, Round: round, At: sec(killed), Lease: sec(expiry), Take: sec(take), First: sec(first)})
				total = append(total, first.Sub(killed).Seconds())
				toTake = append(toTake, take.Sub(killed).Seconds())
				toFirst = append(toFirst, first.Sub(take).Seconds())
				mu.Unlock()
			})
		}
		wg.Wait()
		for _, cancel := range roundProd {
			cancel()
		}
		if !inflight {
			prodCtx, stopProd = context.WithCancel(ctx)
			go produceEvery(prodCtx, kc, stream, ss, 250*time.Millisecond)
			time.Sleep(3 * time.Second)
		}
	}
	stopProd()
	if len(total) < 20 {
		b.Fatalf("only %d takeovers measured", len(total))
	}
	writeData(b, name, samples)
	return total, toTake, toFirst
}
