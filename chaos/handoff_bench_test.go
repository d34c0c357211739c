package chaos_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardloop/shardloop/internal/quiet"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/runner"
)

// handoffSample is one shard handed to a runner that joined, or taken by
// another when its runner left, in seconds from the join or the leave.
type handoffSample struct {
	Event  string  `json:"event"` // "join" or "leave"
	Runner string  `json:"runner"`
	Shard  string  `json:"shard"`
	After  float64 `json:"after"`
}

// owners records, per shard, each change of the runner delivering it: the
// first delivery of each new one.
type owners struct {
	mu      sync.Mutex
	changes map[string][]change // by shard
}

type change struct {
	runner string
	at     time.Time
}

func (o *owners) target(id string) reader.Target {
	return reader.FuncTarget(func(_ context.Context, b reader.Batch) (int, error) {
		now := time.Now()
		o.mu.Lock()
		defer o.mu.Unlock()
		cs := o.changes[b.ShardID]
		if len(b.Records) > 0 && (len(cs) == 0 || cs[len(cs)-1].runner != id) {
			o.changes[b.ShardID] = append(cs, change{id, now})
		}
		return len(b.Records), nil
	})
}

// firstAfter returns the first delivery of a new runner on shard at or
// after at, by runner when runner is not "", else by any runner but not.
func (o *owners) firstAfter(shard string, at time.Time, runner, not string) (string, time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range o.changes[shard] {
		if !c.at.Before(at) && c.runner != not && (runner == "" || c.runner == runner) {
			return c.runner, c.at, true
		}
	}
	return "", time.Time{}, false
}

// BenchmarkHandoff runs runners on one DynamoDB lease table over 12 shards
// at default settings (10 s lease, 3 s renewals and heartbeats, 10 s relist,
// 1 s poll, 60 s runs; looks at the other runners every 500 ms) and changes
// how many share it: 1, 2, 3, 4 (joins), 3, 2 (Ctrl-C on two) and 3 again
// (a join). For every shard handed to a runner that joined it measures the
// time from the join to the runner's first delivery on the shard (KCL's
// lease stealing waits for the lease to expire instead); for a leave, from
// the Ctrl-C to the first delivery by the shard's next owner. After each
// change settles it counts the leases per runner.
func BenchmarkHandoff(b *testing.B) {
	const nShards = 12
	guard := quiet.Begin(b, "handoff_p99_s", "handoff_leave_p99_s")
	kc, dc := startLocal(b)
	stream, table := "handoff", "handoff-leases"
	ss := newStream(b, kc, dc, stream, table, nShards)
	store, err := lease.NewDynamoStore(dc, table)
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(b.Context())
	defer stop()
	go produceEvery(ctx, kc, stream, ss, 250*time.Millisecond)

	fd := &owners{changes: map[string][]change{}}
	type running struct {
		stop context.CancelFunc
		done chan struct{}
	}
	live := map[string]running{}
	defer func() {
		for _, r := range live {
			r.stop()
			<-r.done
		}
	}()
	counts := func() map[string]int {
		rows, err := store.List(ctx, stream)
		if err != nil {
			b.Fatal(err)
		}
		out := map[string]int{}
		for id := range live {
			out[id] = 0
		}
		for _, r := range rows {
			if r.Owner != "" {
				out[lease.OwnerRunner(r.Owner)]++
			}
		}
		return out
	}
	even := func(c map[string]int) bool {
		lo, hi, total := nShards, 0, 0
		for id, n := range c {
			if _, ok := live[id]; !ok && n > 0 {
				return false // a runner gone still named on a row
			}
			lo, hi, total = min(lo, n), max(hi, n), total+n
		}
		return total == nShards && hi-lo <= 1
	}
	spread := 0 // the worst max-min after a change settled
	var samples []handoffSample
	settle := func(what string) {
		began := time.Now()
		for !even(counts()) && time.Since(began) < 60*time.Second {
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(3 * time.Second) // settled: nothing moves any more
		c := counts()
		lo, hi := nShards, 0
		for id := range live {
			lo, hi = min(lo, c[id]), max(hi, c[id])
		}
		spread = max(spread, hi-lo)
		ids := slices.Sorted(maps.Keys(c))
		var parts []string
		for _, id := range ids {
			parts = append(parts, fmt.Sprintf("%s=%d", id, c[id]))
		}
		b.Logf("%s: %s (settled after %.1f s)", what, strings.Join(parts, " "), time.Since(began).Seconds()-3)
	}
	join := func(id string) {
		r, err := runner.New(runner.Options{
			Subscriptions: []coordinator.Subscription{{Stream: stream, Start: "horizon"}},
			Store:         store,
			Kinesis:       kc,
			Reader:        reader.Options{Target: fd.target(id)},
			Balance:       &runner.Balance{ID: id},
		})
		if err != nil {
			b.Fatal(err)
		}
		rc, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		at := time.Now()
		go func() { _ = r.Run(rc); close(done) }()
		live[id] = running{cancel, done}
		settle("join " + id)
		for _, sh := range ss {
			if _, t, ok := fd.firstAfter(sh.ID, at, id, ""); ok {
				samples = append(samples, handoffSample{Event: "join", Runner: id, Shard: sh.ID, After: t.Sub(at).Seconds()})
			}
		}
	}
	leave := func(id string) {
		before := counts()
		rows, err := store.List(ctx, stream)
		if err != nil {
			b.Fatal(err)
		}
		var held []string
		for _, r := range rows {
			if lease.OwnerRunner(r.Owner) == id {
				held = append(held, r.ShardID)
			}
		}
		at := time.Now()
		live[id].stop() // Ctrl-C
		<-live[id].done
		delete(live, id)
		settle(fmt.Sprintf("leave %s (held %d)", id, before[id]))
		for _, shard := range held {
			if _, t, ok := fd.firstAfter(shard, at, "", id); ok {
				samples = append(samples, handoffSample{Event: "leave", Runner: id, Shard: shard, After: t.Sub(at).Seconds()})
			} else {
				b.Errorf("%s: no delivery after %s left", shard, id)
			}
		}
	}
	join("r1")
	join("r2")
	join("r3")
	join("r4")
	leave("r4")
	leave("r3")
	join("r5")

	var joins, leaves []float64
	for _, s := range samples {
		if s.Event == "join" {
			if s.Runner != "r1" { // r1 joined an empty table: nothing was handed over
				joins = append(joins, s.After)
			}
		} else {
			leaves = append(leaves, s.After)
		}
	}
	if len(joins) < 15 {
		b.Fatalf("only %d handoffs to joining runners measured", len(joins))
	}
	writeData(b, "handoff", samples)
	guard.Check(b)
	fmt.Printf("bench handoff_p99_s %.2f s (%d shards handed to joining runners; p50 %.2f s, max %.2f s; 10 s lease)\n",
		quantile(joins, 0.99), len(joins), quantile(joins, 0.5), quantile(joins, 1))
	fmt.Printf("bench handoff_leave_p99_s %.2f s (%d shards of runners stopped with Ctrl-C, to their next owner's first delivery)\n",
		quantile(leaves, 0.99), len(leaves))
	fmt.Printf("bench balance_max_minus_min %d shards (12 shards; 1 to 4 runners and back to 3, the worst once settled)\n", spread)
	b.ReportMetric(quantile(joins, 0.99), "handoff_p99_s")
}
