package chaos_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/shardloop/shardloop/chaos"
	"github.com/shardloop/shardloop/internal/faults"
	"github.com/shardloop/shardloop/internal/testaws"
)

func TestMain(m *testing.M) { os.Exit(testaws.Main(m)) }

// defaultSeed makes every run of the test make the same random choices
// (up to goroutine scheduling); SHARDLOOP_CHAOS_SEED replays another.
const defaultSeed = 20261130

func seed(t testing.TB) uint64 {
	t.Helper()
	s := uint64(defaultSeed)
	if v := os.Getenv("SHARDLOOP_CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SHARDLOOP_CHAOS_SEED=%q: %v", v, err)
		}
		s = n
	}
	t.Logf("chaos seed %d (SHARDLOOP_CHAOS_SEED=%d replays it)", s, s)
	return s
}

// TestChaos_NothingLostAcrossConfigurationsClocksAndTiming is the chaos run
// at the size kinesis-local handles well (about 3,000 records): three
// runners share one lease table on dynalite and read a 4-shard stream, as
// two deployments with different starts (two at "latest", one at a
// sequence start), on clocks up to 30 s apart. Mid-run one restarts at the
// horizon (a new generation the others stand down for). Loops are killed at
// random, some mid-batch and some before their first checkpoint; one shard
// is split and the children merged; reads, lease writes and deliveries fail
// at injected rates and some renewals succeed late. After a drain the stream
// is deleted and created again under its name, and more records follow.
// Lease timings are shortened (3 s lease, 1 s renew, 2 s relist) so that the
// run sees many takeovers; the checks do not depend on them: every record
// delivered, per-key order, and no two owners of one shard delivering at
// overlapping times.
func TestChaos_NothingLostAcrossConfigurationsClocksAndTiming(t *testing.T) {
	cfg := chaos.Config{
		Kinesis:       testaws.Kinesis(t),
		Dynamo:        testaws.Dynamo(t),
		Stream:        testaws.Name(t),
		Table:         testaws.Name(t),
		Shards:        4,
		Runners:       3,
		Records:       2400,
		Produce:       30 * time.Second,
		Keys:          32,
		Drain:         45 * time.Second,
		KillMin:       1500 * time.Millisecond,
		KillMax:       3500 * time.Millisecond,
		MidBatchKill:  0.03,
		EarlyKill:     0.3,
		Lease:         3 * time.Second,
		Renew:         time.Second,
		Relist:        2 * time.Second,
		Poll:          250 * time.Millisecond,
		RunLength:     4 * time.Second,
		BatchSize:     50,
		Starts:        []string{"latest", "latest", "sequence:marker"},
		Changes:       []chaos.StartChange{{At: 15 * time.Second, Runner: 0, Start: "horizon"}},
		Skew:          30 * time.Second,
		Recreate:      true,
		KinesisFaults: faults.KinesisRates{Throttle: 0.05, Expired: 0.02, Other: 0.02, ListShards: 0.05},
		// Slow renewals scaled to the 1 s renew interval: those under it
		// succeed late, the others time out (their writes may land).
		StoreFaults:  faults.StoreRates{Before: 0.02, After: 0.02, SlowRenew: 0.05, SlowMin: 600 * time.Millisecond, SlowMax: 1500 * time.Millisecond},
		TargetFaults: faults.TargetRates{Fail: 0.03, Partial: 0.03},
		Seed:         seed(t),
		Logf:         t.Logf,
	}
	rep, err := chaos.Run(t.Context(), cfg)
	t.Log(rep.Summary())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems() {
		t.Error(p)
	}
	// The run must have been a chaos run, not a quiet one.
	early := 0
	for _, k := range rep.Kills {
		if k.Early {
			early++
		}
	}
	switch {
	case rep.Produced < cfg.Records+cfg.Records/3:
		t.Errorf("produced %d records, want %d", rep.Produced, cfg.Records+cfg.Records/3)
	case len(rep.Kills) < 3 || early < 1:
		t.Errorf("only %d kills, %d before a first checkpoint", len(rep.Kills), early)
	case rep.Split == "" || rep.Merged[0] == "":
		t.Errorf("resharding did not happen: split %q, merged %q", rep.Split, rep.Merged)
	case rep.Owners < 2:
		t.Errorf("only %d owners delivered", rep.Owners)
	case !rep.Recreated:
		t.Error("the stream was not re-created")
	case len(rep.Generations) < 3:
		t.Errorf("generations %v: want the starts, the change and the new incarnation's", rep.Generations)
	}
	for _, kind := range []string{faults.KinesisThrottle, faults.KinesisExpired, faults.StoreBefore, faults.StoreAfter, faults.StoreSlowRenew, faults.TargetFail} {
		if rep.Faults[kind] == 0 {
			t.Errorf("no %s fault was injected", kind)
		}
	}
}

// TestChaos_BalancedRunnersHandShardsOverWithoutLoss is the chaos run with
// the runners sharing the table as `shardloop run` processes do: they
// divide the shards and hand them over as two of them restart (each a leave
// and a join), while loops are killed, a shard is split and its children
// merged, faults are injected and the runners' clocks are up to 30 s apart.
// Every record is delivered, each key in order, and no two owners of a
// shard deliver at overlapping times.
func TestChaos_BalancedRunnersHandShardsOverWithoutLoss(t *testing.T) {
	cfg := chaos.Config{
		Kinesis:       testaws.Kinesis(t),
		Dynamo:        testaws.Dynamo(t),
		Stream:        testaws.Name(t),
		Table:         testaws.Name(t),
		Shards:        4,
		Runners:       3,
		Balance:       true,
		Records:       1600,
		Produce:       20 * time.Second,
		Keys:          32,
		Drain:         45 * time.Second,
		KillMin:       2 * time.Second,
		KillMax:       4 * time.Second,
		MidBatchKill:  0.03,
		Lease:         3 * time.Second,
		Renew:         time.Second,
		Relist:        2 * time.Second,
		Poll:          250 * time.Millisecond,
		RunLength:     4 * time.Second,
		BatchSize:     50,
		Starts:        []string{"horizon"},
		Changes:       []chaos.StartChange{{At: 7 * time.Second, Runner: 1, Start: "horizon"}, {At: 14 * time.Second, Runner: 2, Start: "horizon"}},
		Skew:          30 * time.Second,
		KinesisFaults: faults.KinesisRates{Throttle: 0.05, Expired: 0.02, Other: 0.02, ListShards: 0.05},
		StoreFaults:   faults.StoreRates{Before: 0.02, After: 0.02},
		TargetFaults:  faults.TargetRates{Fail: 0.03, Partial: 0.03},
		Seed:          seed(t),
		Logf:          t.Logf,
	}
	rep, err := chaos.Run(t.Context(), cfg)
	t.Log(rep.Summary())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems() {
		t.Error(p)
	}
	switch {
	case rep.Produced < cfg.Records:
		t.Errorf("produced %d records, want %d", rep.Produced, cfg.Records)
	case len(rep.Kills) < 3:
		t.Errorf("only %d kills", len(rep.Kills))
	case rep.Split == "" || rep.Merged[0] == "":
		t.Errorf("resharding did not happen: split %q, merged %q", rep.Split, rep.Merged)
	case rep.Owners < 5:
		t.Errorf("only %d owners delivered: the runners did not share the shards", rep.Owners)
	}
}
