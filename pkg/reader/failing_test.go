package reader

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

func TestMergeRowFailures(t *testing.T) {
	row := encodeFailures(map[string]Failure{
		"10": {FailingSeq: "10", FailingLast: "12", FailedAttempts: 3},
		"20": {FailingSeq: "20", FailingLast: "20", FailedAttempts: 1},
		"5":  {FailingSeq: "5", FailingLast: "6", FailedAttempts: 9},
	})
	cases := []struct {
		name    string
		carried map[string]Failure
		row     string
		eff     string
		want    map[string]int // attempts by FailingSeq
	}{
		{"a fresh loop takes the row's, after the checkpoint", map[string]Failure{}, row, "8",
			map[string]int{"10": 3, "20": 1}},
		{"nothing checkpointed: all of them", map[string]Failure{}, row, "",
			map[string]int{"5": 9, "10": 3, "20": 1}},
		{"the state counted more: it stays", map[string]Failure{"10": {FailingSeq: "10", FailedAttempts: 4}}, row, "8",
			map[string]int{"10": 4, "20": 1}},
		{"the row counted more: it wins", map[string]Failure{"20": {FailingSeq: "20", FailedAttempts: 0}}, row, "8",
			map[string]int{"10": 3, "20": 1}},
		{"SHARD_END: none", map[string]Failure{}, row, lease.ShardEnd, map[string]int{}},
		{"unreadable: none", map[string]Failure{}, "{not json", "", map[string]int{}},
		{"empty: none", map[string]Failure{}, "", "", map[string]int{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mergeRowFailures(c.carried, c.row, c.eff)
			got := map[string]int{}
			for seq, f := range c.carried {
				got[seq] = f.FailedAttempts
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for seq, n := range c.want {
				if got[seq] != n {
					t.Fatalf("got %v, want %v", got, c.want)
				}
			}
		})
	}
}

func TestEncodeFailures_FitsTheRow(t *testing.T) {
	by := map[string]Failure{}
	for i := range 40 {
		seq := strings.Repeat("1", 50) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		by[seq] = Failure{FailingSeq: seq, FailingLast: seq, FailedAttempts: i, FailedError: strings.Repeat("e", MaxFailedError)}
	}
	s := encodeFailures(by)
	if len(s) > lease.MaxFailing || len(s) == 0 {
		t.Fatalf("encoded %d bytes, want 1 to %d", len(s), lease.MaxFailing)
	}
	if fs := decodeFailures(s); len(fs) != 40 || fs[0].FailedError != "" {
		t.Fatalf("decoded %d failures (first error %q): want all 40, their errors left out", len(fs), fs[0].FailedError)
	}
	if encodeFailures(nil) != "" {
		t.Fatal("no failures: want the empty string")
	}
}

// TestRun_AFailedDeliveryReachesTheRowBeforeTheRunCanDie: the count of a
// delivery that failed is written to the row at once, not with the next
// renewal. A run killed just after the failure (it writes nothing more)
// leaves the count to the next loop; left to the renewal, a loop dying so
// each time would retry the batch for good under a retry limit.
func TestRun_AFailedDeliveryReachesTheRowBeforeTheRunCanDie(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		m.put(t, keys(3), 5)
		ps := &partitionedStore{Store: m.store, loop: "A"}
		ctx, kill := context.WithCancel(t.Context())
		tgt := FuncTarget(func(context.Context, Batch) (int, error) {
			go func() {
				time.Sleep(100 * time.Millisecond) // long before the next renewal
				ps.cut.Store(true)                 // the host dies: nothing it sends arrives
				kill()
			}()
			return 0, fmt.Errorf("%w: the record is poisoned", ErrFunction)
		})
		o := Options{Kinesis: m.k, Store: ps, Target: tgt, Mapping: Mapping{
			BatchSize:            5,
			MaximumRetryAttempts: RetryAttempts(3),
		},
			RunLength:    30 * time.Second,
			PollInterval: 200 * time.Millisecond, RenewInterval: 3 * time.Second,
			RetryMin: 2 * time.Second, RetryMax: 2 * time.Second}
		if _, err := Run(ctx, o, m.state("A")); err != nil {
			t.Fatal(err)
		}
		row, err := m.store.Get(t.Context(), m.stream, m.shard)
		if err != nil {
			t.Fatal(err)
		}
		fs := decodeFailures(row.Failing)
		if len(fs) != 1 || fs[0].FailedAttempts != 1 || fs[0].FailingSeq != m.seqs[0] {
			t.Fatalf("the row's Failing after the killed run is %q, want one failure of %s with 1 attempt", row.Failing, m.seqs[0])
		}
	})
}
