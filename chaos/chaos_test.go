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

// TestChaos_NothingLostUnderKillsReshardingAndFaults is the chaos run at the
// size kinesis-local handles well (about 2,400 records): three owners share
// one lease table on dynalite and read a 4-shard stream while loops are
// killed (some mid-batch), one shard is split and the children merged, and
// reads, lease writes and deliveries fail at injected rates. Lease timings
// are shortened (3 s lease, 1 s renew, 2 s relist) so that 30 s of
// production see many takeovers; the checks do not depend on them.
func TestChaos_NothingLostUnderKillsReshardingAndFaults(t *testing.T) {
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
		Lease:         3 * time.Second,
		Renew:         time.Second,
		Relist:        2 * time.Second,
		Poll:          250 * time.Millisecond,
		RunLength:     4 * time.Second,
		BatchSize:     50,
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
	// The run must have been a chaos run, not a quiet one.
	switch {
	case rep.Produced < cfg.Records:
		t.Errorf("produced %d records, want %d", rep.Produced, cfg.Records)
	case len(rep.Kills) < 3:
		t.Errorf("only %d kills", len(rep.Kills))
	case rep.Split == "" || rep.Merged[0] == "":
		t.Errorf("resharding did not happen: split %q, merged %q", rep.Split, rep.Merged)
	case rep.Owners < 2:
		t.Errorf("only %d owners delivered", rep.Owners)
	}
	for _, kind := range []string{faults.KinesisThrottle, faults.KinesisExpired, faults.StoreBefore, faults.StoreAfter, faults.TargetFail} {
		if rep.Faults[kind] == 0 {
			t.Errorf("no %s fault was injected", kind)
		}
	}
}
