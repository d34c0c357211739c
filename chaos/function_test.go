package chaos_test

import (
	"testing"
	"time"

	"github.com/shardloop/shardloop/chaos"
	"github.com/shardloop/shardloop/internal/faults"
	"github.com/shardloop/shardloop/internal/testaws"
)

// TestChaos_AFunctionThatRunsOnNeverSeesAKeyTwiceAtOnce is the chaos run
// judged where the user's function runs: the target is a model of a Lambda
// function, whose invocations (0.1 s to 4 s, as long as the lease and its
// renewals) run to their end whatever their caller does, at four lanes a
// shard. Loops are killed
// mid-invocation and at random, a runner at a time loses the lease table
// for twice the lease (its renewals fail, its loops stop at their
// deadlines while their invocations run on), renewals fail and lose their
// answers. Nothing may be lost, and the function must never run two
// invocations carrying one key at once, nor see a key's records out of
// order, re-deliveries included.
func TestChaos_AFunctionThatRunsOnNeverSeesAKeyTwiceAtOnce(t *testing.T) {
	cfg := chaos.Config{
		Kinesis: testaws.Kinesis(t), Dynamo: testaws.Dynamo(t),
		Stream: testaws.Name(t), Table: testaws.Name(t),
		Shards: 3, Runners: 3, Records: 1200, Produce: 25 * time.Second, Keys: 24, Drain: 90 * time.Second,
		KillMin: 6 * time.Second, KillMax: 12 * time.Second, MidBatchKill: 0.03, NoReshard: true,
		Lease: 3 * time.Second, Renew: time.Second, Relist: 2 * time.Second,
		Poll: 200 * time.Millisecond, RunLength: 10 * time.Second, BatchSize: 20, ParallelizationFactor: 4,
		FunctionTimeout: 4 * time.Second, InvokeMin: 100 * time.Millisecond, InvokeMax: 4 * time.Second,
		PartitionEvery: 15 * time.Second,
		StoreFaults:    faults.StoreRates{Before: 0.03, After: 0.03},
		TargetFaults:   faults.TargetRates{Fail: 0.02},
		Seed:           seed(t),
		Logf:           t.Logf,
	}
	rep, err := chaos.Run(t.Context(), cfg)
	t.Log(rep.Summary())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems() {
		t.Error(p)
	}
	if rep.Invocations == 0 || len(rep.Kills) == 0 || rep.Faults[faults.StorePartitioned] == 0 {
		t.Errorf("not the run asked for: %d invocations, %d kills, %d calls cut off by a partition", rep.Invocations, len(rep.Kills), rep.Faults[faults.StorePartitioned])
	}
}
