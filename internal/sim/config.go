package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/shardloop/shardloop/pkg/reader"
)

// Config is one world: the stream, the deployments reading it, their
// settings, the faults and the events of its timeline. Draw makes one from
// a seed; Run runs it. Every random choice Run makes at run time (which
// call fails, how long a call takes, each host's clock) is drawn from
// streams seeded by Seed too.
type Config struct {
	Seed uint64

	// Shards is the stream's open shards at creation; Keys the partition
	// keys records are written on, Rate records a second over all keys
	// (each key written in order: its next record only once the last one
	// was acknowledged), for Produce. DataSize pads each record.
	Shards   int
	Keys     int
	Rate     float64
	Produce  time.Duration
	DataSize int
	// Drain bounds the wait, after production, for every record owed to be
	// settled; a world that does not drain has lost records.
	Drain time.Duration
	// ReshardDelay is how long a split or merge keeps the stream UPDATING.
	ReshardDelay time.Duration

	Deployments []Deployment
	Reader      ReaderConfig
	Faults      Faults
	Clocks      ClockConfig
	// Events happen at their time into the world, in order.
	Events []Event

	// Sabotage breaks one rule of the system on purpose, in the world's
	// network or table, for the simulator's own tests (that each check
	// catches what it is for): see the Sabotage constants. Empty in every
	// drawn world.
	Sabotage Sabotage

	// ReaderHook, when set, adjusts every reader's options after the world
	// set them: the place for settings the world does not draw yet (KPL
	// aggregation). dep is the deployment's name.
	ReaderHook func(dep string, o *reader.Options) `json:"-"`

	// Budgets bound what one world may take; zero fields are the defaults
	// (DefaultBudgets). A world past one panics naming its seed, which
	// fails that world alone (TestSim runs worlds in a child process that
	// reports the world a panic ended).
	Budgets Budgets `json:"-"`
}

// Budgets bound a world. Stop is the virtual time its deployments may take
// to stop after production and the drain (a local runner's stop timeout, a
// Lambda function's last invocations, the waits of a stream created
// again): a world that hangs in its code under test would otherwise hold
// TestSim for ever, its producer writing on. Events bounds its trace, the one
// record a world keeps that grows with what it does: a runaway loop (a
// shard delivered again and again) fails instead of filling the machine's
// memory.
type Budgets struct {
	Stop   time.Duration
	Events int
}

// DefaultBudgets are far above what drawn worlds take (seeds 1 to 1,000):
// they end within 36 % of the time budget, their deployments stop within
// 12 s of the drain, and their traces hold at most 12,300 events.
var DefaultBudgets = Budgets{Stop: 30 * time.Minute, Events: 1_000_000}

// Deployment is one subscription of the stream on the shared lease table:
// a local runner (one or more processes of `shardloop run`) or the Lambda
// shape (a coordinator function on a one-minute schedule, a Step Functions
// loop per shard, a shardreader invocation per iteration).
type Deployment struct {
	Name   string
	Lambda bool
	// Runners is how many local runner processes share the deployment.
	Runners int
	// Start is the configured start position: "" (none), "latest",
	// "horizon", "timestamp:<offset>" (a Go duration relative to the
	// moment of deployment, e.g. timestamp:-90s) or "sequence" (a record
	// already written, chosen at deployment).
	Start string
	// At is when it is first deployed.
	At time.Duration
}

// ReaderConfig is what every reader of the world runs with.
type ReaderConfig struct {
	BatchSize     int32
	Poll          time.Duration
	RunLength     time.Duration
	Lease, Renew  time.Duration
	Relist        time.Duration
	MaxIterations int
	// MaxRetryAttempts < 0: no limit.
	MaxRetryAttempts int
	Bisect           bool
	MaxRecordAge     time.Duration
	// TargetTimeout is the target's timeout as the reader knows it (0:
	// unknown); FunctionTimeout the target function's own.
	TargetTimeout   time.Duration
	FunctionTimeout time.Duration
	// FenceCut is how far below the target's timeout a new owner's wait
	// for a lost holder's invocations is cut (reader.Options.Fence, set by
	// SHARDLOOP_TARGET_TIMEOUT or --target-timeout below the function's
	// timeout): the readers then start an invocation only while it would
	// end within their lease and that fence. 0: the whole timeout.
	FenceCut time.Duration
	// LambdaTarget delivers through reader.LambdaTarget, the Kinesis event
	// as JSON, to a model of a Lambda function answering with
	// batchItemFailures; otherwise the target is called in process.
	LambdaTarget bool
	// ParallelizationFactor is the lanes per shard (0 or 1: one);
	// BatchingWindow gathers reads into one delivery.
	ParallelizationFactor int
	BatchingWindow        time.Duration
	// Filters are FilterCriteria patterns (pkg/filter) over the records'
	// data ({"k":<key>,"n":<number>,"t":"a"|"b",...}) or partition key.
	Filters []string
	// TumblingWindow, when set (with one lane), makes the target a
	// reader.WindowTarget whose state names what it folded in the window.
	TumblingWindow time.Duration
}

// Faults are the shares of calls that fail or are slow, and the latencies.
type Faults struct {
	// The lease store: latency of every call (typical, and a tail one call
	// in twenty reaches), writes failing before they are made and after
	// (the answer lost), renewals that succeed slowly (1 to SlowRenewMax).
	StoreLatency, StoreTail time.Duration
	StoreBefore, StoreAfter float64
	SlowRenew               float64
	SlowRenewMax            time.Duration
	// SlowStart: the starts a generation records row by row succeed slowly
	// (1 to SlowRenewMax), holding its application open.
	SlowStart float64
	// Late: writes held on their way LateMin to LateMax (the rare ones,
	// window checkpoints aside, four times as often), which land at their
	// time even when their caller gave up meanwhile: a request the table
	// serves after the client's timeout, beside the newer writes the
	// caller made since.
	Late             float64
	LateMin, LateMax time.Duration
	// SlowRecord: a generation's record lands 1 s to SlowRecord after it
	// is sent, so that the stream may have changed since the listing it
	// was recorded over.
	SlowRecord time.Duration
	// SlowRecordMin, when set, is the least a generation's record takes
	// to land (SlowRecord the most).
	SlowRecordMin time.Duration
	// SlowRead: a coordinator's read of the rows (GetMany) made while a
	// generation is applied (a start written within SlowRenewMax) answers
	// slowly (1 to SlowRenewMax after the rows were read), so that its
	// pass judges rows the application has moved past since.
	SlowRead float64
	// Kinesis reads: latency, throttles, expired iterators, internal
	// failures (half after the call was served), ListShards limits.
	KinesisLatency, KinesisTail       time.Duration
	Throttle, Expired, Internal, List float64
	// The target: latency, failures, partial answers (batchItemFailures),
	// slow deliveries (up to TargetSlowMax, past the function's timeout
	// they time out), and answers lost after the function ran.
	TargetLatency, TargetTail                         time.Duration
	TargetFail, TargetPartial, TargetSlow, TargetLost float64
	TargetSlowMax                                     time.Duration
	// TargetBroken: a call to a function that runs on breaks part way (a
	// connection reset), the function running to its end.
	TargetBroken float64
	// EndRelease: a release of a row read to its end fails before the
	// write (the run that wrote SHARD_END may have given up on a call that
	// runs on, and its lease alone then covers it).
	EndRelease float64
	// PoisonEnd: every call carrying a closed shard's last record breaks
	// (the function hangs on it; it runs on to its timeout): the batch is
	// given up once its retries or its age run out, and the run that then
	// reads the shard to its end releases the row with a fence, which its
	// children must wait out.
	PoisonEnd bool
	// PoisonKill: the share of those broken calls after which the loop
	// that made it dies within two renewals (its host crashes on the
	// record, say): a loop that ends without handing its state on, at
	// nearly every attempt, so that the count of failed attempts the
	// renewals carried on the row is what gives the batch up at last.
	PoisonKill float64
	// PoisonKillWithin: how soon after the broken call the loop dies, at
	// most (0: two renew intervals). Short, the host dies before its next
	// renewal: only a count written at once after the failure reaches the
	// row.
	PoisonKillWithin time.Duration
	// TargetNoState: with tumbling windows, the function answers without a
	// state (a failed invocation, as Lambda's trigger counts it).
	TargetNoState float64
	// DestinationFail: the on-failure destination refuses a record.
	DestinationFail float64
	// The Lambda shape: Read invocations refused before the function runs
	// (throttled; retried), failing while the function goes on running
	// (retried: the retry overlaps the first), crashing mid-run (the
	// execution fails), executions failing between states, nudges lost,
	// StartExecution failing before or after starting the execution, and
	// cold starts.
	InvokeBefore, InvokeAfter, Crash, ExecutionFail, NudgeLost float64
	StartBefore, StartAfter                                    float64
	ColdStart                                                  time.Duration
}

// ClockConfig bounds each host's clock: a skew in [-Skew, +Skew] and a
// drift in [-Drift, +Drift] (a rate: 0.01 runs 1 % fast or slow).
type ClockConfig struct {
	Skew  time.Duration
	Drift float64
}

// EventKind is what an Event does.
type EventKind string

// The events of a world's timeline.
const (
	// Deploy starts deployment Deployment (its first deployment).
	Deploy EventKind = "deploy"
	// Split splits an open shard (Pick chooses which), Merge merges two
	// adjacent open shards.
	Split EventKind = "split"
	Merge EventKind = "merge"
	// Kill kills the loop reading a shard (Pick chooses the shard) in
	// deployment Deployment: it writes and delivers nothing more and never
	// releases its lease. For the Lambda shape: its invocation crashes.
	Kill EventKind = "kill"
	// Crash kills a whole local runner process (Pick chooses which) with
	// every loop in it; it starts again after Pause.
	Crash EventKind = "crash"
	// Redeploy deploys deployment Deployment again with Start: a new
	// generation when the start changed.
	Redeploy EventKind = "redeploy"
	// Recreate waits for every record owed so far to be settled, moves
	// deployments with a sequence start to a timestamp start of that
	// moment, deletes the stream and creates it again with Shards shards.
	// Start names a race at the deletion, in deployment Deployment:
	// "describe", a host freezes for Pause as its coordinator's
	// description of the old stream arrives, and the deletion goes ahead
	// at once (where Pick < 0.5, the host wakes earlier, as the next start
	// write lands: the new stream's generation applied, its rows not yet
	// taken); "start", the deployment is deployed again with a start of
	// that moment, and a host freezes for Pause as its first start write
	// leaves, the deletion going ahead at once; "freeze", a host (Pick
	// chooses which) is frozen for Pause as the stream is deleted, and the
	// new stream splits twice before it wakes.
	Recreate EventKind = "recreate"
	// Partition cuts a host of deployment Deployment (Pick chooses which,
	// among those made so far) off from the lease table (Start "store") or
	// the target (Start "target") for Pause; Pause freezes one for Pause
	// (its calls wait, whatever their context, and go on when it wakes).
	Partition EventKind = "partition"
	Pause     EventKind = "pause"
	// Supersede freezes the hosts of deployment Deployment that write the
	// start it is configured with now, as the write leaves: from the first
	// one, for Pause. It then deploys deployment By again with Start
	// ("sequence", or "sequence-closed": a record of a closed shard when
	// one was written), while they sleep (see World.supersede).
	Supersede EventKind = "supersede"
	// Strike arms a host loss that waits for its moment in deployment
	// Deployment, then strikes the host that meets it first (Start names
	// the moment): "quiet", the first invocation of a shard after a quiet
	// spell (nothing started for two renew intervals, so the row may
	// record no fence), which runs slow (half to all of the function's
	// timeout) while its host is lost for Pause (Pick: its loop killed,
	// the host cut off from the table, or frozen); "brownout", an
	// invocation that hangs to the function's timeout (a downstream
	// outage), its host then cut off from the table for Pause, and one in
	// two of the invocations it starts meanwhile (drawn) hanging as well;
	// "renewal", a renewal whose write lands and whose answer comes back
	// late (past the lease's margin, within the renew interval), its host
	// then cut off from the table for Pause, in a brown-out as above.
	Strike EventKind = "strike"
)

// Event is one moment of the timeline.
type Event struct {
	At         time.Duration
	Kind       EventKind
	Deployment int
	Pick       float64
	Start      string
	Shards     int
	Pause      time.Duration
	// Newest makes a split or merge act on the newest open shard (a
	// merge: it and its neighbour in hash order) instead of Pick's.
	Newest bool
	// By is the deployment a Supersede deploys again.
	By int `json:",omitempty"`
	// Overlap, on a Supersede, also freezes By's hosts as they write a
	// start from then, until Overlap after Deployment's hosts wake.
	Overlap time.Duration `json:",omitempty"`
}

// Sabotage is a deliberate bug a world can carry.
type Sabotage string

// The sabotages, each of which one check must catch.
const (
	// DropRecord: one GetRecords answer, two minutes in, leaves out a
	// record from the middle of its batch.
	DropRecord Sabotage = "drop-record"
	// Steal: two minutes in, one shard's held row looks free to the
	// coordinators and their take of it succeeds.
	Steal Sabotage = "steal"
	// CheckpointBack: one checkpoint, two minutes in, writes the one before.
	CheckpointBack Sabotage = "checkpoint-back"
	// EarlyChild: the coordinators see every parent read to its end.
	EarlyChild Sabotage = "early-child"
	// EarlyEnd: reading a closed shard ends before its last records.
	EarlyEnd Sabotage = "early-end"
	// Unfiltered: the readers get none of the world's filters (the checker
	// keeps them).
	Unfiltered Sabotage = "unfiltered"
	// WindowLost: two minutes in, the lease table no longer finds any
	// shard's tumbling window: a run resumes mid-window with a fresh state.
	WindowLost Sabotage = "window-lost"
)

// Draw makes the world of seed: the stream (1–4 shards, keys, rates, JSON
// records), one or two deployments with their starts, the reader's
// settings, the faults and their rates, the clocks, and the timeline
// (reshards, kills, crashes, a redeploy, a re-creation). Last, so that the
// rest stays as earlier versions drew it for a seed, the delivery features:
// parallel lanes (40 %: factor 2–10), else a tumbling window (25 %: 5–120 s,
// its target folding each window's records into its state, with answers
// without a state among the faults); a batching window (25 %: 0.2–3 s);
// filters (30 %: 1–3 patterns of FilterPool).
func Draw(seed uint64) Config {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	f := r.Float64
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo)+1)) }
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	rate := func(p, max float64) float64 { // on with probability p, then up to max
		if f() >= p {
			return 0
		}
		return max * f()
	}

	c := Config{
		Seed:         seed,
		Shards:       1 + r.IntN(4),
		Keys:         2 + r.IntN(40),
		Rate:         1 + 24*f(),
		Produce:      between(10*time.Minute, 12*time.Minute),
		DataSize:     8 + r.IntN(56),
		Drain:        15 * time.Minute,
		ReshardDelay: []time.Duration{0, 0, time.Second, 3 * time.Second}[r.IntN(4)],
	}

	starts := []string{"", "", "latest", "horizon", "horizon", "timestamp:-90s", "timestamp:-10m", "timestamp:+5s", "sequence"}
	n := 1
	if f() < 0.4 {
		n = 2
	}
	for i := range n {
		d := Deployment{Name: string(rune('a' + i)), Lambda: f() < 0.5, Runners: 1 + r.IntN(3), At: between(2*time.Second, 40*time.Second)}
		d.Start = starts[r.IntN(len(starts))]
		for i == 1 && d.Start == c.Deployments[0].Start { // two deployments differ in their start
			d.Start = starts[r.IntN(len(starts))]
		}
		c.Deployments = append(c.Deployments, d)
		c.Events = append(c.Events, Event{At: d.At, Kind: Deploy, Deployment: i})
	}

	rc := ReaderConfig{
		BatchSize:        []int32{1, 10, 100, 100, 500}[r.IntN(5)],
		Poll:             []time.Duration{200 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond, time.Second, time.Second, time.Second, time.Second, time.Second}[r.IntN(8)],
		RunLength:        []time.Duration{20 * time.Second, 30 * time.Second, 60 * time.Second}[r.IntN(3)],
		Lease:            10 * time.Second,
		Renew:            3 * time.Second,
		Relist:           10 * time.Second,
		MaxIterations:    []int{3, 500}[r.IntN(2)],
		MaxRetryAttempts: -1,
		FunctionTimeout:  between(3*time.Second, 15*time.Second),
		LambdaTarget:     f() < 0.3,
	}
	if f() < 0.2 {
		rc.Lease, rc.Renew = 6*time.Second, 2*time.Second
	}
	if f() < 0.5 {
		rc.MaxRetryAttempts = r.IntN(4)
	}
	rc.Bisect = f() < 0.3
	if f() < 0.15 {
		rc.MaxRecordAge = between(90*time.Second, 5*time.Minute)
	}
	if f() < 0.5 {
		rc.TargetTimeout = rc.FunctionTimeout
	}
	if rc.BatchSize == 1 {
		// One record a read, five reads a second per shard shared by the
		// deployments: keep the stream slow enough to be read.
		c.Rate = min(c.Rate, float64(c.Shards))
	}
	c.Reader = rc

	c.Faults = Faults{
		StoreLatency: between(time.Millisecond, 15*time.Millisecond), StoreTail: between(50*time.Millisecond, 800*time.Millisecond),
		StoreBefore: rate(0.6, 0.05), StoreAfter: rate(0.6, 0.05), SlowRenew: rate(0.4, 0.1), SlowRenewMax: between(2*time.Second, 6*time.Second),
		KinesisLatency: between(2*time.Millisecond, 30*time.Millisecond), KinesisTail: between(100*time.Millisecond, 2*time.Second),
		Throttle: rate(0.5, 0.1), Expired: rate(0.3, 0.03), Internal: rate(0.5, 0.05), List: rate(0.4, 0.1),
		TargetLatency: between(time.Millisecond, 200*time.Millisecond), TargetTail: between(300*time.Millisecond, 3*time.Second),
		TargetFail: rate(0.6, 0.08), TargetPartial: rate(0.5, 0.08), TargetSlow: rate(0.4, 0.03), TargetLost: rate(0.3, 0.03),
		TargetSlowMax:   between(5*time.Second, 40*time.Second),
		DestinationFail: rate(0.5, 0.3),
		InvokeBefore:    rate(0.5, 0.05), InvokeAfter: rate(0.5, 0.03), Crash: rate(0.4, 0.02), ExecutionFail: rate(0.4, 0.01),
		NudgeLost: rate(0.5, 0.3), StartBefore: rate(0.4, 0.05), StartAfter: rate(0.4, 0.05),
		ColdStart: between(50*time.Millisecond, 1500*time.Millisecond),
	}
	if f() < 0.75 {
		c.Clocks.Skew = 30 * time.Second
	}
	switch x := f(); {
	case x < 0.1:
		c.Clocks.Drift = 0.04
	case x < 0.7:
		c.Clocks.Drift = 0.01
	}
	// driftApart sets the clocks 4 % apart in nine in ten of the worlds
	// that call it, those where a holder hands its row back with a fence
	// measured on its clock and the next owner waits it out on its own
	// (the function's timeout runs on neither).
	driftApart := func() {
		if f() < 0.9 {
			c.Clocks.Drift = 0.04
		}
	}

	// The timeline after the first deployments.
	during := func() time.Duration { return between(time.Minute, c.Produce-time.Minute) }
	for range r.IntN(4) {
		k := Split
		if f() < 0.4 {
			k = Merge
		}
		c.Events = append(c.Events, Event{At: during(), Kind: k, Pick: f()})
	}
	for range r.IntN(9) {
		c.Events = append(c.Events, Event{At: during(), Kind: Kill, Deployment: r.IntN(n), Pick: f()})
	}
	for i, d := range c.Deployments {
		if !d.Lambda {
			for range r.IntN(3) {
				c.Events = append(c.Events, Event{At: during(), Kind: Crash, Deployment: i, Pick: f(), Pause: between(time.Second, 40*time.Second)})
			}
		}
	}
	if f() < 0.35 {
		i := r.IntN(n)
		st := starts[r.IntN(len(starts))]
		c.Events = append(c.Events, Event{At: during(), Kind: Redeploy, Deployment: i, Start: st})
	}
	if f() < 0.15 {
		c.Events = append(c.Events, Event{At: between(c.Produce/3, 2*c.Produce/3), Kind: Recreate, Shards: 1 + r.IntN(4)})
	}

	// Delivery features, drawn last so that the draws above stay those of
	// earlier versions for the same seed.
	switch x := f(); {
	case x < 0.4:
		c.Reader.ParallelizationFactor = 2 + r.IntN(9)
	case x < 0.65:
		c.Reader.TumblingWindow = time.Duration(5+r.IntN(116)) * time.Second
		c.Faults.TargetNoState = rate(0.6, 0.05)
	}
	if f() < 0.25 {
		c.Reader.BatchingWindow = between(200*time.Millisecond, 3*time.Second)
	}
	if f() < 0.3 {
		for _, i := range r.Perm(len(FilterPool))[:1+r.IntN(3)] {
			c.Reader.Filters = append(c.Reader.Filters, FilterPool[i])
		}
	}
	// Whole hosts: partitions longer than a lease, and pauses; drawn last.
	if f() < 0.3 {
		for range 1 + r.IntN(2) {
			c.Events = append(c.Events, Event{At: during(), Kind: Partition, Deployment: r.IntN(n), Pick: f(),
				Start: []string{"store", "target"}[r.IntN(2)], Pause: between(c.Reader.Lease+time.Second, 3*c.Reader.Lease)})
		}
	}
	if f() < 0.3 {
		for range 1 + r.IntN(2) {
			c.Events = append(c.Events, Event{At: during(), Kind: Pause, Deployment: r.IntN(n), Pick: f(), Pause: between(time.Second, 2*c.Reader.Lease)})
		}
	}
	// Generation races, drawn last: a redeploy that moves the start while
	// coordinators race to apply it. Splits shortly before leave closed
	// parents the start re-opens while their children are held; local
	// runners restart one at a time, so processes of both configurations
	// pass at once; a start in the future meets a split before it arrives;
	// and a second redeploy can supersede the first before it has reached
	// every row.
	if f() < 0.4 {
		i := r.IntN(n)
		c.Faults.SlowStart = rate(0.7, 0.5)
		var multi []int
		for j, d := range c.Deployments {
			if !d.Lambda && d.Runners > 1 {
				multi = append(multi, j)
			}
		}
		if len(multi) > 0 && f() < 0.75 {
			i = multi[r.IntN(len(multi))]
		}
		at := between(2*time.Minute, c.Produce-2*time.Minute)
		for range 1 + r.IntN(2) {
			c.Events = append(c.Events, Event{At: at - between(5*time.Second, time.Minute), Kind: Split, Pick: f()})
		}
		ahead := between(3*time.Second, 40*time.Second)
		st := pick("horizon", "timestamp:-10m", "timestamp:-90s", "future", "future")
		if st == "future" {
			st = fmt.Sprintf("timestamp:+%s", ahead.Round(time.Second))
			c.Events = append(c.Events, Event{At: at + between(500*time.Millisecond, ahead), Kind: Split, Pick: f()})
		}
		var stagger time.Duration
		if d := c.Deployments[i]; !d.Lambda && d.Runners > 1 && f() < 0.7 {
			stagger = between(100*time.Millisecond, 8*time.Second)
		}
		c.Events = append(c.Events, Event{At: at, Kind: Redeploy, Deployment: i, Start: st, Pause: stagger})
		if f() < 0.3 {
			c.Events = append(c.Events, Event{At: at + between(0, 3*time.Second), Kind: Redeploy, Deployment: i,
				Start: pick("horizon", "timestamp:-10m", "latest", "timestamp:+20s", "sequence", "sequence")})
		}
	}
	// A fence cut below the function's timeout, drawn last: invocations
	// then start only while they would end within the lease and the cut
	// fence, which a holder keeps by renewing first.
	if f() < 0.3 {
		c.Reader.FenceCut = between(500*time.Millisecond, reader.MaxFenceCut(c.Reader.Lease, c.Reader.Renew))
	}
	// Holders lost with an invocation in flight, drawn last: a slow
	// function (one invocation in five to twenty runs for up to its
	// timeout) whose holders are killed, cut off from the table or frozen
	// at random moments, so that a lost holder's fence, and nothing else,
	// keeps the next owner from invoking beside what it left running.
	// Batches of a hundred records or more keep such a world abreast of
	// its stream.
	if f() < 0.25 && c.Reader.BatchSize >= 100 {
		c.Faults.TargetSlow = max(c.Faults.TargetSlow, 0.05+0.15*f())
		c.Faults.TargetSlowMax = between(c.Reader.FunctionTimeout/2, c.Reader.FunctionTimeout)
		for range 2 + r.IntN(4) {
			i := r.IntN(n)
			switch x := f(); {
			case x < 0.5:
				c.Events = append(c.Events, Event{At: during(), Kind: Kill, Deployment: i, Pick: f()})
			case x < 0.8:
				c.Events = append(c.Events, Event{At: during(), Kind: Partition, Deployment: i, Pick: f(),
					Start: "store", Pause: between(c.Reader.Lease+time.Second, 2*c.Reader.Lease)})
			default:
				c.Events = append(c.Events, Event{At: during(), Kind: Pause, Deployment: i, Pick: f(), Pause: between(time.Second, 2*c.Reader.Lease)})
			}
		}
	}
	// The stream deleted and created again, once more, drawn last: the
	// loops that held its rows must not read the new stream from them.
	if f() < 0.15 {
		c.Events = append(c.Events, Event{At: between(c.Produce/4, 3*c.Produce/4), Kind: Recreate, Shards: 1 + r.IntN(4)})
	}
	// Calls that break while the function runs on (a connection reset
	// after the request left), drawn last: the caller has no answer, and
	// nothing it invokes may run beside what still runs.
	if f() < 0.2 {
		c.Faults.TargetBroken = 0.01 + 0.05*f()
	}
	// Strikes, drawn last: hosts lost at the moments where the fence, and
	// nothing else, keeps the next owner from invoking beside what they
	// left running: an invocation after a quiet spell (the row may not
	// record the fence yet), a brown-out in which the host loses the table
	// while its invocations hang (it goes on starting them up to its
	// deadline), and a renewal answered late just before the host loses
	// the table (its deadline runs from the renewal's sending).
	if f() < 0.3 {
		for range 2 + r.IntN(4) {
			c.Events = append(c.Events, Event{At: during(), Kind: Strike, Deployment: r.IntN(n), Pick: f(),
				Start: pick("quiet", "brownout", "renewal"), Pause: between(c.Reader.Lease+time.Second, 2*c.Reader.Lease)})
		}
		// A fence cut in half the worlds that have none: a holder that
		// goes on invoking through a brown-out must then stop short of its
		// deadline, by the cut.
		if c.Reader.FenceCut == 0 && f() < 0.5 {
			c.Reader.FenceCut = between(500*time.Millisecond, reader.MaxFenceCut(c.Reader.Lease, c.Reader.Renew))
		}
		driftApart()
		// Local runners' coordinators relisting more often
		// (runner.Options.RelistInterval): a taker then sees a lost
		// holder's last renewal soon after it landed and takes the shard
		// as early as the fence allows.
		if x := f(); c.allLocal() && x < 0.75 {
			c.Reader.Relist = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second}[int(x/0.25)]
		}
	}
	// A closed shard's last record that breaks every call carrying it, in
	// every world with calls that break and a batch that is given up at
	// last: a parent's final batch given up with its invocation running
	// on, just before the children open. With bisection too, and in runs
	// with room for one attempt only: the count of failed attempts lives
	// on the row as well as in the loop's state, so a loop that ends
	// without handing its state on (killed, or its take failed) does not
	// start the count again.
	rd := &c.Reader
	if c.Faults.TargetBroken > 0 && (rd.MaxRetryAttempts >= 0 || rd.MaxRecordAge > 0) {
		c.Faults.PoisonEnd = true
		// Half of them run for 20 s: with a function timeout of 8 s or
		// more, a run then has room for one attempt only (its
		// predecessor's fence and the broken call's wait fill it), so
		// what a run hands the next (the count, where a halving got to)
		// is what gives the batch up at last. With bisection, a batching
		// window gathers records before the last one into its batch, so
		// that the halving has something to halve.
		if f() < 0.5 {
			rd.RunLength = 20 * time.Second
			if rd.Bisect && rd.BatchSize > 1 && rd.BatchingWindow == 0 {
				rd.BatchingWindow = between(time.Second, 3*time.Second)
			}
			driftApart() // each run hands the row back with a fence
		}
		// In two in five with a retry limit, the loop dies after most of
		// the calls that break on the record; in half of them after every
		// such call, within a twentieth of a renew interval: no renewal
		// comes first. Each attempt then waits out a lost holder's lease
		// and fence, and every shard closed by a reshard ends so: such a
		// world is given 25 minutes to drain, not 15.
		if rd.MaxRetryAttempts >= 0 && f() < 0.4 {
			c.Faults.PoisonKill = 0.5 + 0.5*f()
			if f() < 0.5 {
				c.Faults.PoisonKill, c.Faults.PoisonKillWithin = 1, rd.Renew/20
			}
			// In half of them, bisection over several lanes: the other
			// lanes hold the checkpoint back, so a new loop's batch
			// begins before the half its dead predecessor had come down
			// to, and the halving must go on from there.
			if f() < 0.5 && rd.TumblingWindow == 0 && rd.BatchSize > 1 {
				rd.Bisect = true
				rd.ParallelizationFactor = max(rd.ParallelizationFactor, 2+r.IntN(4))
				if rd.BatchingWindow == 0 {
					rd.BatchingWindow = between(time.Second, 3*time.Second)
				}
			}
			c.Drain = 25 * time.Minute
		}
	}
	// Reads of the rows that answer slowly, in nine in ten worlds with
	// generation races, drawn last: a pass then reads the rows while a
	// generation is applied row by row and the record after it is done.
	if c.Faults.SlowStart > 0 && f() < 0.9 {
		c.Faults.SlowRead = 0.3 + rate(1, 0.6)
	}
	// Races at a re-creation, drawn last: the deletion lands while a host
	// of the old stream has something under way, and the host wakes once
	// the new stream's coordinators have written (or cleaned up) its rows.
	// A coordinator's pass that described the old stream reads the new
	// stream's listing and rows; a start write of the old stream's
	// generation lands on the new stream's row; a loop of the old stream
	// wakes after its row was deleted as stale.
	if f() < 0.15 {
		c.Events = append(c.Events, Event{At: between(c.Produce/4, 3*c.Produce/4), Kind: Recreate, Shards: 1 + r.IntN(4)})
	}
	for i := range c.Events {
		e := &c.Events[i]
		if e.Kind != Recreate || f() >= 0.8 {
			continue
		}
		e.Deployment, e.Pick = r.IntN(n), f()
		switch e.Start = pick("describe", "start", "freeze"); e.Start {
		case "freeze":
			e.Pause = between(c.Reader.Lease+2*time.Second, 3*c.Reader.Lease)
			// A host whose rows another coordinator cleans up meanwhile:
			// a local runner of several processes, where there is one
			// (with two deployments, the other one's cleans up too).
			for j, d := range c.Deployments {
				if !d.Lambda && d.Runners > 1 {
					e.Deployment = j
				}
			}
		default:
			e.Pause = between(3*time.Second, 25*time.Second)
		}
	}
	// raced are the splits UPDATING when a generation is listed, each with
	// its redeploy.
	// land, when set, is the least the redeploy's record takes to land.
	type racedSplit struct{ split, redeploy, land time.Duration }
	var raced []racedSplit
	// A split still UPDATING when a generation is recorded, in nine in
	// ten worlds with generation races, drawn last: the redeployed
	// coordinator lists the stream before the children appear, and its
	// record of the generation lands slowly (after the split is done), so
	// that it is recorded over the parent alone while a coordinator of the
	// older generation may list the children, take them (the parent read
	// to its end) and read on.
	if c.Faults.SlowStart > 0 && f() < 0.9 {
		var at []time.Duration
		for _, e := range c.Events {
			if e.Kind == Redeploy {
				at = append(at, e.At)
			}
		}
		x := racedSplit{redeploy: at[r.IntN(len(at))]}
		x.split = x.redeploy - between(0, 1500*time.Millisecond)
		c.Events = append(c.Events, Event{At: x.split, Kind: Split, Pick: f()})
		raced = append(raced, x)
		c.ReshardDelay = max(c.ReshardDelay, between(2*time.Second, 8*time.Second))
		c.Faults.SlowRecord = between(c.ReshardDelay, c.ReshardDelay+10*time.Second)
	}
	// Releases after SHARD_END that fail, in three in four worlds with calls
	// that break, drawn last: the finished row stays named by a holder
	// that may have given up on a call whose function runs on.
	if c.Faults.TargetBroken > 0 && f() < 0.75 {
		c.Faults.EndRelease = 0.3 + 0.6*f()
		// In three in four of those with a poisoned end, no retries and no
		// bisection: the closed shard's last batch is given up at its
		// first broken call, and SHARD_END follows while its function
		// still runs.
		if c.Faults.PoisonEnd && f() < 0.75 {
			c.Reader.MaxRetryAttempts, c.Reader.Bisect = 0, false
			// The children then open as soon as the row says the parent
			// is read: over few keys (their first batches carry the keys
			// of the given-up one), with a function whose timeout the
			// lease covers (the renewal that records the given-up batch
			// then records no fence: the lease covers its invocation),
			// releases that fail most of the time, local coordinators
			// that relist every second or two, and loops that live on
			// after the call breaks, with no window (whose final
			// invocation would wait the broken call out before
			// SHARD_END).
			c.Keys = min(c.Keys, 2+r.IntN(3))
			c.Faults.PoisonKill, c.Faults.PoisonKillWithin = 0, 0
			c.Reader.TumblingWindow, c.Faults.TargetNoState = 0, 0
			c.Reader.FunctionTimeout = between(4*time.Second, c.Reader.Lease-time.Second)
			if c.Reader.TargetTimeout > 0 {
				c.Reader.TargetTimeout = c.Reader.FunctionTimeout
			}
			c.Faults.EndRelease = max(c.Faults.EndRelease, 0.8+0.2*f())
			if c.allLocal() {
				c.Reader.Relist = min(c.Reader.Relist, between(time.Second, 2*time.Second))
			}
		}
	}
	// A newer generation over the children of a split that carry a
	// future start, in three in four worlds whose generation races record one,
	// drawn last: the start moved a minute or two ahead, and a second
	// redeploy once the first is applied, listed while a split is
	// UPDATING, its record landing slowly, so that a coordinator of the
	// future start may write it on the split's children meanwhile, or take
	// them and read from it. The newer generation owes those children from
	// their first record, which is earlier.
	//
	// A latest one goes 5.5 to 20.5 s before the future start instead: its
	// tip comes before that start, and its record lands 2 to 6 s after
	// the split's parent is closed and the future start has come, so the
	// parent is read to its end under the future start, skipping what the
	// latest one owes, before the latest start reaches the row (world
	// 300). Nothing else records a generation between the two and until
	// the latest one lands (no redeploy, no crashed runner starting again,
	// no re-creation): it would supersede the future start before its
	// rows are read to their end.
	if i := slices.IndexFunc(c.Events, func(e Event) bool {
		return e.Kind == Redeploy && strings.HasPrefix(e.Start, "timestamp:+")
	}); i >= 0 && c.Faults.SlowStart > 0 && f() < 0.75 {
		e := &c.Events[i]
		ahead := between(150*time.Second, 240*time.Second).Round(time.Second)
		e.Start = fmt.Sprintf("timestamp:+%s", ahead)
		after := between(60*time.Second, 90*time.Second)
		at, dep := e.At+after, e.Deployment
		c.ReshardDelay = max(c.ReshardDelay, between(4*time.Second, 12*time.Second))
		lead, splitPick := between(0, 1500*time.Millisecond), f()
		start := pick("horizon", "timestamp:-10m", "latest")
		var land time.Duration
		if start == "latest" {
			from, gap := e.At, (after-55*time.Second)/2+3*time.Second
			at = from + ahead - gap
			land = gap + c.ReshardDelay + between(2*time.Second, 6*time.Second)
			c.Events = slices.DeleteFunc(c.Events, func(x Event) bool {
				return (x.Kind == Redeploy || x.Kind == Crash || x.Kind == Recreate) && x.At > from && x.At < at+land
			})
		}
		// Other reshards near it would leave the stream UPDATING, and
		// Kinesis refuses a split then.
		c.Events = slices.DeleteFunc(c.Events, func(x Event) bool {
			return (x.Kind == Split || x.Kind == Merge) && x.At > at-2*c.ReshardDelay && x.At < at+c.ReshardDelay
		})
		x := racedSplit{split: at - lead, redeploy: at, land: land}
		c.Events = append(c.Events, Event{At: x.split, Kind: Split, Pick: splitPick},
			Event{At: at, Kind: Redeploy, Deployment: dep, Start: start})
		raced = append(raced, x)
		c.Faults.SlowRecord = max(c.Faults.SlowRecord, c.ReshardDelay+between(5*time.Second, 15*time.Second))
	}
	// A second deployment of the other kind, in four in five worlds whose
	// generation races read rows slowly and that have one deployment,
	// drawn last: a Lambda deployment's coordinator and a local runner's
	// race to apply a generation and read the rows while it is applied.
	if c.Faults.SlowRead > 0 && len(c.Deployments) == 1 && f() < 0.8 {
		first := c.Deployments[0]
		d := Deployment{Name: "b", Lambda: !first.Lambda, Runners: 1 + r.IntN(3), At: between(2*time.Second, 40*time.Second)}
		for d.Start = first.Start; d.Start == first.Start; { // two deployments differ in their start
			d.Start = starts[r.IntN(len(starts))]
		}
		c.Deployments = append(c.Deployments, d)
		c.Events = append(c.Events, Event{At: d.At, Kind: Deploy, Deployment: 1})
	}
	// A missed child read to its end, in every world with a split
	// UPDATING when a generation is listed, drawn last: after each such
	// split, once it is done and a coordinator of the older generation may
	// have taken its children, the newest child splits again, or (half
	// the time) merges with its sibling; and generation records land only
	// once that reshard is done too, before the next pass would take what
	// it made. A loop of the older generation has then read the missed
	// child to its end, its own child not yet taken, when the newer
	// generation re-opens it: a pass that decides on rows read before
	// the re-opening (another coordinator's start landed first) takes a
	// grandchild of a parent read again, and so does a pass that applies
	// the generation over a listing holding the missed children.
	if len(raced) > 0 {
		// Coordinators enough, passing often, that two of them apply the
		// newer generation and re-open the missed child at once: every
		// local deployment runs two or three processes, relisting every
		// one to two seconds, and most starts are slow.
		for j := range c.Deployments {
			if d := &c.Deployments[j]; !d.Lambda {
				d.Runners = max(d.Runners, 2+r.IntN(2))
				c.Reader.Relist = min(c.Reader.Relist, between(time.Second, 2*time.Second))
			}
		}
		c.Faults.SlowStart = max(c.Faults.SlowStart, 0.7+0.3*f())
		after := c.ReshardDelay + between(100*time.Millisecond, time.Second) + between(0, c.Reader.Relist)
		for _, x := range raced {
			c.Faults.SlowRecordMin = max(c.Faults.SlowRecordMin, time.Second, x.split+after+c.ReshardDelay+500*time.Millisecond-x.redeploy, x.land)
		}
		c.Faults.SlowRecord = c.Faults.SlowRecordMin + between(time.Second, c.Reader.Relist)
		// A merge ends both missed children, and their one child waits
		// for both.
		for _, x := range raced {
			kind := Split
			if f() < 0.5 {
				kind = Merge
			}
			c.Events = append(c.Events, Event{At: x.split + after, Kind: kind, Newest: true})
		}
	}
	// Writes that land after their caller gave up, in one world in four,
	// drawn last: a write held on its way a second to a lease and more
	// lands beside the newer writes its caller made since (a renewal or a
	// checkpoint sent again, a release after it), so that only the
	// table's own conditions keep it from moving a row back.
	if f() < 0.25 {
		c.Faults.Late = 0.005 + 0.025*f()
		c.Faults.LateMin, c.Faults.LateMax = time.Second, between(c.Reader.Renew+time.Second, c.Reader.Lease+5*time.Second)
	}
	// A pass that outlives its supersession, in three in four worlds with
	// generation races and two deployments, drawn last: the hosts that
	// write the start of the redeploy that re-reads rows (horizon, a
	// timestamp in the past) freeze as they write it, from the first one
	// for 30 to 90 s, and the other deployment is deployed again
	// meanwhile, to a sequence start. Its generation, newer, keeps rows as
	// they are; it is recorded and applied while they sleep, and the rest
	// of the older one's starts (parents first) land after it: on parents
	// whose children its application passed over as they were. A pass
	// after it re-opens those that have gone on (reopenedParent).
	//
	// In the other worlds with two deployments and such a redeploy, the
	// passes applying the newer start pause too, as their first write
	// leaves, until 0.1 to 2 s after the older one's hosts wake (Overlap):
	// they decided on rows that the older start's writes, landing first,
	// then change. Their start names a record of a closed shard when one
	// was written ("sequence-closed"): a start decided on a parent read to
	// its end means another thing once that parent is re-opened.
	if i := slices.IndexFunc(c.Events, func(e Event) bool {
		return e.Kind == Redeploy && (e.Start == "horizon" || strings.HasPrefix(e.Start, "timestamp:-"))
	}); i >= 0 && len(c.Deployments) == 2 {
		e := c.Events[i]
		s := Event{At: e.At, Kind: Supersede, Deployment: e.Deployment, By: 1 - e.Deployment, Start: "sequence"}
		if c.Faults.SlowStart == 0 || f() >= 0.5 {
			s.Start, s.Overlap = "sequence-closed", between(100*time.Millisecond, 2*time.Second)
		}
		s.Pause = between(30*time.Second, 90*time.Second)
		c.Events = append(c.Events, s)
	}
	// Holders without a fence that lose the table, in one world in four
	// whose in-process target stops when its caller gives up (no timeout
	// told, no Lambda target: nothing runs past the holder's deadline, so
	// no fence is recorded) and that has a local deployment, drawn last:
	// there the holder's deadline, a margin short of the lease on its own
	// clock, is all that keeps it from invoking beside the next owner.
	// Clocks 4 % apart in nine in ten of them, two or three brown-outs or
	// late renewal answers on the local deployments (the host cut off from
	// the table goes on invoking up to its deadline), and local
	// coordinators relisting every one or two seconds, so that a taker
	// sees the last renewal soon after it landed.
	if local := slices.IndexFunc(c.Deployments, func(d Deployment) bool { return !d.Lambda }); local >= 0 &&
		c.Reader.TargetTimeout == 0 && !c.Reader.LambdaTarget && f() < 0.25 {
		driftApart()
		for range 2 + r.IntN(2) {
			dep := local
			if j := r.IntN(len(c.Deployments)); !c.Deployments[j].Lambda {
				dep = j
			}
			c.Events = append(c.Events, Event{At: during(), Kind: Strike, Deployment: dep, Pick: f(),
				Start: pick("brownout", "renewal"), Pause: between(c.Reader.Lease+time.Second, 2*c.Reader.Lease)})
		}
		if c.allLocal() {
			c.Reader.Relist = min(c.Reader.Relist, between(time.Second, 2*time.Second))
		}
	}
	c.keepAbreast()
	sortEvents(c.Events)
	return c
}

// allLocal reports whether every deployment is a local runner's.
func (c *Config) allLocal() bool {
	return !slices.ContainsFunc(c.Deployments, func(d Deployment) bool { return d.Lambda })
}

// keepAbreast bounds the calls whose answer is lost or that break, in a
// world whose target runs on: each leaves its lane waiting out the
// function's timeout (and a tenth), since the invocation may still run. A
// world spends at most a fifth of a lane's time so, reading the whole
// stream through one shard (a few keys may all hash to it) a batch per
// call, so that it stays abreast of its
// stream: a world that cannot keep up says nothing about the promise. No
// draw is made.
func (c *Config) keepAbreast() {
	runsOn := c.Reader.TargetTimeout > 0 || c.Reader.LambdaTarget
	for _, d := range c.Deployments {
		runsOn = runsOn || d.Lambda
	}
	// A delivery of one record that the draw makes partial is an answer
	// lost instead (target.work): count the partial ones too.
	f := &c.Faults
	lost := f.TargetLost + f.TargetBroken + f.TargetPartial
	if !runsOn || lost == 0 || c.Reader.FunctionTimeout <= 0 {
		return
	}
	calls := c.Rate / float64(max(1, c.Reader.BatchSize)) // a second, for a shard that takes every key
	if budget := 0.2 / (calls * 1.1 * c.Reader.FunctionTimeout.Seconds()); lost > budget {
		k := budget / lost
		f.TargetLost, f.TargetBroken, f.TargetPartial = k*f.TargetLost, k*f.TargetBroken, k*f.TargetPartial
	}
}

// FilterPool are the patterns worlds draw their filters from: over the
// records' data, as the producer writes it ({"k":<key>,"n":<its number>,
// "t":"a" or "b",...}), and over the partition key ("k<key>").
var FilterPool = []string{
	`{"data":{"t":["a"]}}`,
	`{"data":{"t":[{"anything-but":["a"]}],"k":[{"numeric":["<",20]}]}}`,
	`{"data":{"k":[{"numeric":[">=",3,"<",30]}]}}`,
	`{"data":{"n":[{"numeric":[">=",20]}]}}`,
	`{"partitionKey":[{"prefix":"k1"}]}`,
	`{"partitionKey":[{"suffix":"7"}]}`,
	`{"data":{"t":["b"],"n":[{"numeric":["<",60]}]}}`,
	`{"data":{"z":[{"exists":true}]}}`,
}

func sortEvents(es []Event) {
	slices.SortStableFunc(es, func(a, b Event) int { return int(a.At - b.At) })
}

// Reductions simplify a world for shrinking: each takes something out.
// Shrink applies those whose bit is set in a mask, in this order.
var Reductions = []struct {
	Name  string
	Apply func(*Config)
}{
	{"no re-creation", func(c *Config) { c.Events = dropEvents(c.Events, Recreate) }},
	{"no redeploys", func(c *Config) { c.Events = dropEvents(c.Events, Redeploy, Supersede) }},
	{"one deployment", func(c *Config) {
		if len(c.Deployments) > 1 {
			c.Deployments = c.Deployments[:1]
			c.Events = slices.DeleteFunc(c.Events, func(e Event) bool { return e.Deployment > 0 || e.Kind == Supersede && e.By > 0 })
		}
	}},
	{"no reshards", func(c *Config) { c.Events = dropEvents(c.Events, Split, Merge) }},
	{"no kills", func(c *Config) { c.Events = dropEvents(c.Events, Kill, Crash) }},
	{"no store faults", func(c *Config) {
		f := &c.Faults
		f.StoreBefore, f.StoreAfter, f.SlowRenew = 0, 0, 0
	}},
	{"no Kinesis faults", func(c *Config) {
		f := &c.Faults
		f.Throttle, f.Expired, f.Internal, f.List = 0, 0, 0, 0
	}},
	{"no target faults", func(c *Config) {
		f := &c.Faults
		f.TargetFail, f.TargetPartial, f.TargetSlow, f.TargetLost, f.DestinationFail, f.TargetNoState, f.TargetBroken = 0, 0, 0, 0, 0, 0, 0
	}},
	{"no Lambda faults", func(c *Config) {
		f := &c.Faults
		f.InvokeBefore, f.InvokeAfter, f.Crash, f.ExecutionFail, f.NudgeLost, f.StartBefore, f.StartAfter = 0, 0, 0, 0, 0, 0, 0
	}},
	{"no latency", func(c *Config) {
		f := &c.Faults
		f.StoreLatency, f.KinesisLatency, f.TargetLatency, f.ColdStart = 0, 0, 0, 0
	}},
	{"true clocks", func(c *Config) { c.Clocks = ClockConfig{} }},
	{"local runners only", func(c *Config) {
		for i := range c.Deployments {
			c.Deployments[i].Lambda = false
		}
	}},
	{"one runner each", func(c *Config) {
		for i := range c.Deployments {
			c.Deployments[i].Runners = 1
		}
		c.Events = dropEvents(c.Events, Crash)
	}},
	{"fewer keys", func(c *Config) { c.Keys = max(1, c.Keys/4) }},
	{"slower production", func(c *Config) { c.Rate = max(0.5, c.Rate/4) }},
	{"one lane", func(c *Config) { c.Reader.ParallelizationFactor = 0 }},
	{"no batching window", func(c *Config) { c.Reader.BatchingWindow = 0 }},
	{"no filters", func(c *Config) { c.Reader.Filters = nil }},
	{"no tumbling window", func(c *Config) { c.Reader.TumblingWindow = 0 }},
	{"no partitions or pauses", func(c *Config) { c.Events = dropEvents(c.Events, Partition, Pause) }},
	{"no strikes", func(c *Config) { c.Events = dropEvents(c.Events, Strike) }},
	{"no poisoned end", func(c *Config) { c.Faults.PoisonEnd, c.Faults.PoisonKill, c.Faults.PoisonKillWithin = false, 0, 0 }},
	{"no late writes", func(c *Config) { c.Faults.Late = 0 }},
}

func dropEvents(es []Event, kinds ...EventKind) []Event {
	return slices.DeleteFunc(slices.Clone(es), func(e Event) bool { return slices.Contains(kinds, e.Kind) })
}

// Shrunk returns Draw(seed) with the reductions of mask applied.
func Shrunk(seed uint64, mask uint64) Config {
	c := Draw(seed)
	for i, r := range Reductions {
		if mask&(1<<i) != 0 {
			r.Apply(&c)
		}
	}
	return c
}

// MaskNames names the reductions of mask.
func MaskNames(mask uint64) string {
	var ns []string
	for i, r := range Reductions {
		if mask&(1<<i) != 0 {
			ns = append(ns, r.Name)
		}
	}
	return strings.Join(ns, ", ")
}

// drainWait is how long a stream's records may take to be settled once
// its producer stops, before it is deleted: 5 minutes, or, in a world
// whose closed shards end in a record no call survives and that retries
// it until it is too old, its age limit and two more minutes (the
// attempt that finds it too old, the fence of the one before, the
// children's opening and reading); in one whose loops die on that
// record (PoisonKill), 10 minutes.
func (c Config) drainWait() time.Duration {
	if c.Faults.PoisonEnd && c.Reader.MaxRetryAttempts < 0 && c.Reader.MaxRecordAge > 0 {
		return max(5*time.Minute, c.Reader.MaxRecordAge+2*time.Minute)
	}
	if c.Faults.PoisonEnd && c.Faults.PoisonKill > 0 {
		// Each attempt then waits out a lost holder's lease and fence.
		return 20 * time.Minute
	}
	if c.Faults.PoisonEnd {
		// Every closed shard ends on a record whose calls hang to the
		// function's timeout until its batch is given up (halved first,
		// with bisection), and a replay meets each such end again.
		return 10 * time.Minute
	}
	return 5 * time.Minute
}

// Summary is a one-line account of the world.
func (c Config) Summary() string {
	var ds []string
	for _, d := range c.Deployments {
		kind := fmt.Sprintf("local×%d", d.Runners)
		if d.Lambda {
			kind = "lambda"
		}
		st := d.Start
		if st == "" {
			st = "none"
		}
		ds = append(ds, fmt.Sprintf("%s=%s/%s@%s", d.Name, kind, st, d.At))
	}
	counts := map[EventKind]int{}
	for _, e := range c.Events {
		counts[e.Kind]++
	}
	rc := c.Reader
	return fmt.Sprintf("%d shards, %d keys, %.1f rec/s for %s; deployments %s; batch %d, poll %s, run %s, lease %s/%s, relist %s, retries %d, bisect %v, max age %s, target timeout %s (fn %s, fence cut %s), lambda target %v, lanes %d, batching %s, filters %d, window %s; skew ±%s drift ±%.0f%%; splits %d merges %d kills %d crashes %d redeploys %d recreate %d partitions %d pauses %d strikes %d poisoned end %v; late writes %.1f%%",
		c.Shards, c.Keys, c.Rate, c.Produce, strings.Join(ds, " "), rc.BatchSize, rc.Poll, rc.RunLength, rc.Lease, rc.Renew, rc.Relist,
		rc.MaxRetryAttempts, rc.Bisect, rc.MaxRecordAge, rc.TargetTimeout, rc.FunctionTimeout, rc.FenceCut, rc.LambdaTarget, max(1, rc.ParallelizationFactor), rc.BatchingWindow, len(rc.Filters), rc.TumblingWindow,
		c.Clocks.Skew, 100*c.Clocks.Drift, counts[Split], counts[Merge], counts[Kill], counts[Crash], counts[Redeploy], counts[Recreate], counts[Partition], counts[Pause], counts[Strike], c.Faults.PoisonEnd, 100*c.Faults.Late)
}
