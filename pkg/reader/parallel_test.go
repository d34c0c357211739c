package reader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/shardloop/shardloop/pkg/lease"
)

func hashOf(s string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return h.Sum32()
}

// TestRun_KeepsPerKeyOrderAndTheCheckpointRuleAtFactors1_4And10 reads a
// closed shard of 3,000 records on 37 keys to its end on the in-memory
// Kinesis, with deliveries that take 10 to 60 ms and now and then settle
// only half their batch, so lanes finish out of order. Whatever the
// factor: every record reaches the target, each key's records first arrive
// in order, no two deliveries of one key overlap, no checkpoint is written
// while a record at or before it has not settled, and SHARD_END comes last.
func TestRun_KeepsPerKeyOrderAndTheCheckpointRuleAtFactors1_4And10(t *testing.T) {
	for _, factor := range []int{1, 4, 10} {
		t.Run(fmt.Sprintf("factor %d", factor), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMemStream(t)
				m.put(t, keys(37), 3000)
				m.close(t)
				tgt := newKeyedTarget(t)
				tgt.took = func(b Batch) time.Duration {
					return time.Duration(10+hashOf(aws.ToString(b.Records[0].SequenceNumber))%50) * time.Millisecond
				}
				var mu sync.Mutex
				halved := map[string]bool{}
				tgt.fail = func(b Batch) (int, error) {
					first := aws.ToString(b.Records[0].SequenceNumber)
					mu.Lock()
					defer mu.Unlock()
					if len(b.Records) > 1 && hashOf(first)%5 == 0 && !halved[first] {
						halved[first] = true
						return len(b.Records) / 2, nil // batchItemFailures from the middle
					}
					return len(b.Records), nil
				}
				rs := &ruleStore{Store: m.store, m: m, tgt: tgt}
				o := Options{Kinesis: m.k, Store: rs, Target: tgt, Mapping: Mapping{BatchSize: 50, ParallelizationFactor: factor}, RunLength: 5 * time.Second, RetryMin: 10 * time.Millisecond}
				st := runLoop(t, o, m.state("A"), 100, nil)
				if st.Reason != ReasonShardEnd {
					t.Fatalf("ended %q", st.Reason)
				}
				if len(tgt.seen) != len(m.seqs) {
					t.Errorf("delivered %d distinct records of %d", len(tgt.seen), len(m.seqs))
				}
				if tgt.disorder != 0 || tgt.overlaps != 0 {
					t.Errorf("%d records of a key first delivered out of order, %d deliveries of a key overlapping", tgt.disorder, tgt.overlaps)
				}
				if len(rs.breaches) > 0 {
					t.Errorf("checkpoint rule broken: %v", rs.breaches)
				}
				if n := len(rs.written); n == 0 || rs.written[n-1] != lease.ShardEnd {
					t.Errorf("checkpoints %v, want SHARD_END last", rs.written)
				}
				if tgt.maxInFlight > factor || (factor > 1 && tgt.maxInFlight < 2) {
					t.Errorf("at most %d deliveries at once, want more than one and at most the factor %d", tgt.maxInFlight, factor)
				}
				t.Logf("factor %d: %d deliveries, at most %d at once, %d checkpoints, %s of virtual time", factor, tgt.calls, tgt.maxInFlight, len(rs.written), time.Since(time.Unix(946684800, 0)))
			})
		})
	}
}

// poisonTarget fails every batch holding a record of key while sick: it
// settles the records before it (batchItemFailures), as a handler that
// cannot parse that record would.
func poisonTarget(t *testing.T, key string, sick func() bool) *keyedTarget {
	tgt := newKeyedTarget(t)
	tgt.took = func(Batch) time.Duration { return 20 * time.Millisecond }
	tgt.fail = func(b Batch) (int, error) {
		if !sick() {
			return len(b.Records), nil
		}
		for i, r := range b.Records {
			if aws.ToString(r.PartitionKey) == key {
				return i, errors.New("cannot parse the record of " + key)
			}
		}
		return len(b.Records), nil
	}
	return tgt
}

// TestRun_APoisonKeyHoldsBackOnlyItsOwnLane: at factor 4 a key whose
// records the target cannot take (the failure policy's default: retry until
// they settle) holds back its lane (the keys hashed with it), not the
// shard: over four runs the other lanes deliver every record of theirs,
// exactly once though the checkpoint stays before the poison, and the loop
// carries what they settled from run to run. Once the target heals,
// everything is delivered, in order per key, still exactly once.
func TestRun_APoisonKeyHoldsBackOnlyItsOwnLane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const factor = 4
		m := newMemStream(t)
		ks := keys(16)
		m.put(t, ks, 1600)
		m.close(t)
		poison := ks[3]
		var sick sync.Mutex
		healed := false
		tgt := poisonTarget(t, poison, func() bool { sick.Lock(); defer sick.Unlock(); return !healed })
		rs := &ruleStore{Store: m.store, m: m, tgt: tgt}
		o := Options{Kinesis: m.k, Store: rs, Target: tgt, Mapping: Mapping{BatchSize: 25, ParallelizationFactor: factor}, RunLength: 3 * time.Second, RetryMin: 50 * time.Millisecond, RetryMax: 400 * time.Millisecond}
		st := m.state("A")
		firstPoison := ""
		for i, k := range m.keys {
			if k == poison {
				firstPoison = m.seqs[i]
				break
			}
		}
		for range 4 {
			next, err := Run(t.Context(), o, st)
			if err != nil || !next.Continue {
				t.Fatalf("Run = %+v, %v", next, err)
			}
			st = next
			if row, _ := m.store.Get(t.Context(), m.stream, m.shard); row.Checkpoint != "" && !seqLess(row.Checkpoint, firstPoison) {
				t.Fatalf("checkpoint %s at or past the poison %s", row.Checkpoint, firstPoison)
			}
		}
		blocked := laneOf(poison, factor)
		for i, seq := range m.seqs {
			k := m.keys[i]
			want := laneOf(k, factor) != blocked || seqLess(seq, firstPoison) && k != poison
			if got := tgt.settled(seq); laneOf(k, factor) != blocked && !got {
				t.Fatalf("record %d (%s, lane %d) not delivered while lane %d is poisoned", i, k, laneOf(k, factor), blocked)
			} else if !want && got {
				t.Fatalf("record %d (%s) of the poisoned lane delivered past the poison", i, k)
			}
		}
		if st.FailingSeq != firstPoison || st.FailedAttempts < 10 || st.SettledTo == "" || len(st.Lanes) != factor {
			t.Errorf("state %+v: want the poison's failure carried and the other lanes' progress", st)
		}
		sick.Lock()
		healed = true
		sick.Unlock()
		st = runLoop(t, o, st, 20, nil)
		if st.Reason != ReasonShardEnd {
			t.Fatalf("ended %q", st.Reason)
		}
		for data, n := range tgt.seen {
			if n != 1 {
				t.Errorf("%s delivered %d times", data, n)
			}
		}
		if len(tgt.seen) != len(m.seqs) || tgt.disorder != 0 || tgt.overlaps != 0 || len(rs.breaches) > 0 {
			t.Errorf("delivered %d of %d, %d out of order, %d overlapping, rule breaches %v", len(tgt.seen), len(m.seqs), tgt.disorder, tgt.overlaps, rs.breaches)
		}
	})
}

// TestRun_APoisonKeyWithARetryLimitIsGivenUpAloneAtFactor4: with bisection
// and a retry limit, the poison key's records are given up one by one and
// everything else is delivered; the other lanes never waited for it.
func TestRun_APoisonKeyWithARetryLimitIsGivenUpAloneAtFactor4(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		ks := keys(8)
		m.put(t, ks, 400)
		m.close(t)
		poison := ks[5]
		tgt := poisonTarget(t, poison, func() bool { return true })
		var mu sync.Mutex
		var gaveUp []string
		o := Options{Kinesis: m.k, Store: &ruleStore{Store: m.store, m: m, tgt: tgt}, Target: tgt, Mapping: Mapping{
			BatchSize:                  20,
			ParallelizationFactor:      4,
			BisectBatchOnFunctionError: true,
			MaximumRetryAttempts:       RetryAttempts(1),
			OnFailure: DestinationFunc(func(_ context.Context, fr FailureRecord) error {
				mu.Lock()
				defer mu.Unlock()
				gaveUp = append(gaveUp, fr.KinesisBatchInfo.StartSequenceNumber)
				tgt.giveUp(fr.KinesisBatchInfo.StartSequenceNumber, fr.KinesisBatchInfo.EndSequenceNumber, m)
				return nil
			}),
		},
			RunLength: 5 * time.Second, RetryMin: 10 * time.Millisecond,
		}
		st := runLoop(t, o, m.state("A"), 50, nil)
		if st.Reason != ReasonShardEnd {
			t.Fatalf("ended %q", st.Reason)
		}
		var want []string
		for i, k := range m.keys {
			if k == poison {
				want = append(want, m.seqs[i])
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(gaveUp, want) {
			t.Errorf("gave up %d records %v, want the %d of the poison key alone", len(gaveUp), gaveUp, len(want))
		}
		if len(tgt.seen) != len(m.seqs)-len(want) || tgt.disorder != 0 || st.GivenUp != int64(len(want)) {
			t.Errorf("delivered %d, want %d; %d out of order; given up %d", len(tgt.seen), len(m.seqs)-len(want), tgt.disorder, st.GivenUp)
		}
	})
}

// TestRun_WhatRunsAheadOfTheCheckpointIsBounded: with a poison record at
// the front and a backlog of 30,000, the other lanes deliver, but reads stop
// once MaxAheadRecords are held past the checkpoint; the next runs deliver
// nothing again and read no further.
func TestRun_WhatRunsAheadOfTheCheckpointIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		ks := keys(40)
		m.put(t, ks[:1], 1) // the poison, first in the shard
		m.put(t, ks, 30000)
		tgt := poisonTarget(t, ks[0], func() bool { return true })
		tgt.took = func(Batch) time.Duration { return 5 * time.Millisecond }
		o := Options{Kinesis: m.k, Store: m.store, Target: tgt, Mapping: Mapping{BatchSize: 100, ParallelizationFactor: 4}, RunLength: 20 * time.Second}
		st := m.state("A")
		limit := MaxBatchSize // the read that reached the bound
		for run := range 3 {
			next, err := Run(t.Context(), o, st)
			if err != nil || !next.Continue {
				t.Fatalf("Run = %+v, %v", next, err)
			}
			st = next
			n := len(tgt.seen)
			if n > MaxAheadRecords+limit || n < MaxAheadRecords/2 {
				t.Fatalf("run %d: %d records delivered past the checkpoint, want at most %d and more than a few", run, n, MaxAheadRecords+limit)
			}
			b, _ := json.Marshal(st)
			t.Logf("run %d: %d delivered ahead, state %d bytes", run, n, len(b))
		}
		for data, n := range tgt.seen {
			if n != 1 {
				t.Fatalf("%s delivered %d times: the settled records ahead were not carried", data, n)
			}
		}
	})
}

// TestState_StaysUnder32KBAtFactor10WithEveryLaneFailing: what a run hands
// on stays far under Step Functions' 256 KB payload, whatever the factor:
// ten lanes each carrying a failure with a long error.
func TestState_StaysUnder32KBAtFactor10WithEveryLaneFailing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		ks := keys(200)
		m.put(t, ks, 2000)
		long := strings.Repeat("a long error from the target. ", 200)
		tgt := newKeyedTarget(t)
		tgt.fail = func(b Batch) (int, error) { return 0, errors.New(long) }
		o := Options{Kinesis: m.k, Store: m.store, Target: tgt, Mapping: Mapping{BatchSize: 10, ParallelizationFactor: MaxParallelizationFactor}, RunLength: 2 * time.Second}
		st, err := Run(t.Context(), o, m.state("loop-with-a-fairly-long-owner-id-0123456789"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(st)
		failing := 0
		for _, l := range st.Lanes {
			if l.FailingSeq != "" {
				failing++
			}
		}
		if failing != MaxParallelizationFactor || len(b) >= 32<<10 {
			t.Fatalf("%d lanes failing, state of %d bytes: want %d and under 32 KB", failing, len(b), MaxParallelizationFactor)
		}
		t.Logf("state at factor %d with every lane failing: %d bytes", MaxParallelizationFactor, len(b))
	})
}

// TestRun_ReadsStayWithinTheShardsLimitsAtFactor10: draining a backlog with
// a fast target at factor 10 (reads of 1,000 records) never makes more than
// 5 GetRecords calls in a second and is never throttled.
func TestRun_ReadsStayWithinTheShardsLimitsAtFactor10(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		m.put(t, keys(100), 20000)
		m.close(t)
		rc := &readCounter{KinesisAPI: m.k}
		h := &recHooks{}
		tgt := newKeyedTarget(t)
		o := Options{Kinesis: rc, Store: m.store, Target: tgt, Mapping: Mapping{BatchSize: 100, ParallelizationFactor: 10}, Hooks: h, RunLength: 10 * time.Second}
		began := time.Now()
		st := runLoop(t, o, m.state("A"), 20, nil)
		if st.Reason != ReasonShardEnd || len(tgt.seen) != 20000 {
			t.Fatalf("ended %q with %d records", st.Reason, len(tgt.seen))
		}
		if rc.throttled > 0 || rc.maxPerSecond() > ShardReadsPerSecond {
			t.Errorf("%d throttled reads, at most %d reads in a second: want none and at most %d", rc.throttled, rc.maxPerSecond(), ShardReadsPerSecond)
		}
		t.Logf("%d reads in %s", rc.count(), time.Since(began))
	})
}

// TestRun_AnIdleOrSlowShardReadsNoMoreThanOneLaneWould: the read-ahead
// does not cost the shard's shared reads when there is nothing to read
// ahead: an idle shard is read once a poll interval, and a trickle
// delivered by a slow target once per delivery, as by a sequential reader.
func TestRun_AnIdleOrSlowShardReadsNoMoreThanOneLaneWould(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := newMemStream(t)
			rc := &readCounter{KinesisAPI: m.k}
			o := Options{Kinesis: rc, Store: m.store, Target: newKeyedTarget(t), RunLength: 10 * time.Second}
			if _, err := Run(t.Context(), o, m.state("A")); err != nil {
				t.Fatal(err)
			}
			if n := rc.count(); n < 9 || n > 11 {
				t.Errorf("%d reads in 10 s of an idle shard, want one a second", n)
			}
		})
	})
	t.Run("slow target at the tip", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := newMemStream(t)
			rc := &readCounter{KinesisAPI: m.k}
			tgt := newKeyedTarget(t)
			tgt.took = func(Batch) time.Duration { return 2 * time.Second }
			ctx, stop := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			defer wg.Wait()
			defer stop()
			wg.Go(func() {
				for ctx.Err() == nil {
					m.put(t, keys(3), 1)
					time.Sleep(300 * time.Millisecond)
				}
			})
			o := Options{Kinesis: rc, Store: m.store, Target: tgt, RunLength: 20 * time.Second}
			if _, err := Run(t.Context(), o, m.state("A")); err != nil {
				t.Fatal(err)
			}
			stop()
			if reads, calls := rc.count(), tgt.calls; reads > calls+2 {
				t.Errorf("%d reads for %d deliveries, want about one a delivery", reads, calls)
			}
		})
	})
}
