package sim

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardloop/shardloop/pkg/filter"
)

// plainWorld is a small world without faults: one local runner reading
// from the oldest record, deployed after a minute and a half of backlog,
// with a split at one minute, so that a closed parent is read while its
// children wait.
func plainWorld() Config {
	return Config{
		Seed: 7, Shards: 2, Keys: 8, Rate: 12, Produce: 5 * time.Minute, DataSize: 16, Drain: 5 * time.Minute,
		Deployments: []Deployment{{Name: "a", Runners: 1, Start: "horizon", At: 90 * time.Second}},
		Reader: ReaderConfig{
			BatchSize: 10, Poll: time.Second, RunLength: 30 * time.Second, Lease: 10 * time.Second, Renew: 3 * time.Second,
			Relist: 10 * time.Second, MaxIterations: 500, MaxRetryAttempts: -1, FunctionTimeout: 10 * time.Second,
		},
		Faults: Faults{StoreLatency: 5 * time.Millisecond, KinesisLatency: 10 * time.Millisecond, TargetLatency: 80 * time.Millisecond},
		Events: []Event{
			{At: time.Minute, Kind: Split, Pick: 0},
			{At: 90 * time.Second, Kind: Deploy, Deployment: 0},
		},
	}
}

// Each check catches the rule it is for: the plain world passes, and
// breaking one rule in it on purpose is caught by the matching check.
func TestChecks_CatchEachBrokenRule(t *testing.T) {
	for _, mod := range []func(*Config){
		func(*Config) {},
		func(c *Config) { c.Reader.Filters = []string{`{"data":{"t":["a"]}}`} },
		func(c *Config) { c.Reader.TumblingWindow = 120 * time.Second },
		func(c *Config) { c.Reader.TumblingWindow, c.Reader.LambdaTarget = 120*time.Second, true },
		func(c *Config) { c.Reader.ParallelizationFactor = 4 },
	} {
		cfg := plainWorld()
		mod(&cfg)
		if res := runWorld(t, cfg); res.Failed() {
			t.Fatalf("the plain world fails: %v\n%s", res.Violations, strings.Join(res.Trace(80), "\n"))
		}
	}
	for _, c := range []struct {
		sabotage Sabotage
		want     string
	}{
		{DropRecord, "not settled"},
		{Steal, "delivered from"},
		// The table refuses a checkpoint behind the row's (checkpoints only
		// move forward, in the store's own condition), so the sabotage
		// cannot land: the world keeps the promise.
		{CheckpointBack, ""},
		{EarlyChild, "before its parents"},
		{EarlyEnd, "wrote SHARD_END while record"},
		{Unfiltered, "matches none of the filters"},
		{WindowLost, "with a state that lacks record"},
	} {
		t.Run(string(c.sabotage), func(t *testing.T) {
			cfg := plainWorld()
			switch c.sabotage {
			case Unfiltered:
				cfg.Reader.Filters = []string{`{"data":{"t":["a"]}}`}
			case WindowLost:
				cfg.Reader.TumblingWindow = 120 * time.Second
			}
			cfg.Sabotage = c.sabotage
			res := runWorld(t, cfg)
			if c.want == "" {
				if len(res.Violations) > 0 {
					t.Errorf("sabotage %s: want it refused by the table, got %v", c.sabotage, res.Violations)
				}
				return
			}
			for _, v := range res.Violations {
				if strings.Contains(v.What, c.want) {
					return
				}
			}
			t.Errorf("sabotage %s: no violation says %q; got %v\n%s", c.sabotage, c.want, res.Violations, strings.Join(res.Trace(60), "\n"))
		})
	}
}

// The filters worlds draw from are valid FilterCriteria patterns, and each
// lets some records through and keeps others out.
func TestFilterPool_CompilesAndSplitsTheRecords(t *testing.T) {
	for _, p := range FilterPool {
		set, err := filter.Compile([]string{p})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		pass := 0
		for k := range 40 {
			for n := range 100 {
				if set.Match(filter.Record{Data: recordData(k, n, "xx"), PartitionKey: "k" + strconv.Itoa(k)}) {
					pass++
				}
			}
		}
		if p != `{"data":{"z":[{"exists":true}]}}` && (pass == 0 || pass == 4000) {
			t.Errorf("%s passes %d of 4000 records: want some, not all", p, pass)
		}
	}
}

// A re-creation waits on past its drain wait only while what is owed still
// settles: a record that never will fails the world one window after the
// wait, not at the end of the longest it may wait.
func TestRecreate_ARecordThatNeverSettlesFailsOneWindowAfterTheWait(t *testing.T) {
	cfg := plainWorld()
	cfg.Sabotage = DropRecord // two minutes in
	cfg.Events = append(cfg.Events, Event{At: 3 * time.Minute, Kind: Recreate, Shards: 2})
	res := runWorld(t, cfg)
	want := "still not settled after " + (cfg.drainWait() + slowWindow).String() + ", before the stream is deleted"
	for _, v := range res.Violations {
		if strings.Contains(v.What, want) {
			return
		}
	}
	t.Errorf("no violation says %q; got %v\n%s", want, res.Violations, strings.Join(res.Trace(60), "\n"))
}

// Every reduction leaves a world whose events name only its deployments:
// a shrunk world that names one it dropped panics in the world's own code
// (a Supersede's By once did, under "one deployment").
func TestReductions_LeaveEventsNamingOnlyTheWorldsDeployments(t *testing.T) {
	for seed := uint64(1); seed <= 2000; seed++ {
		for i, r := range Reductions {
			c := Draw(seed)
			r.Apply(&c)
			for _, e := range c.Events {
				if e.Deployment >= len(c.Deployments) || e.Kind == Supersede && e.By >= len(c.Deployments) {
					t.Fatalf("world %d under reduction %d (%s): event %+v names a deployment of %d", seed, i, r.Name, e, len(c.Deployments))
				}
			}
		}
	}
}
