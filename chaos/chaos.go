package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/faults"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/runner"
	"github.com/shardloop/shardloop/pkg/shards"
)

// Config sizes and paces one chaos run. Zero fields take the defaults in
// their comments.
type Config struct {
	// Kinesis and Dynamo are clients of the emulators (or AWS). The
	// producer and the resharding use Kinesis directly; the runners read
	// through a fault-injecting wrapper of it.
	Kinesis *kinesis.Client
	Dynamo  *dynamodb.Client
	// Stream is created with Shards shards (default 4); Table is the lease
	// table the runners share, created if missing.
	Stream, Table string
	Shards        int
	// Runners is the number of owners sharing the table (default 3).
	Runners int
	// Balance makes the runners divide the shards between them and hand
	// them over as they restart (pkg/runner's Balance), as `shardloop run`
	// processes on one table do; false: each takes what it can, as
	// deployments sharing a table do.
	Balance bool

	// Records are produced over Produce (default 30 s), on Keys partition
	// keys (default 32), each DataSize bytes long at least (default 32).
	// Production goes on past Produce until Records were written.
	Records  int
	Produce  time.Duration
	Keys     int
	DataSize int
	// Drain bounds how long the wait for every record after production
	// ends may go without a record delivered for the first time (default
	// 60 s): a stall, not the whole wait, so that a slow or busy machine
	// drains later and does not fail; what is not delivered when the
	// system stalls that long is lost.
	Drain time.Duration

	// KillMin and KillMax bound the random pause between two kills of a
	// running loop from outside (defaults 2 s and 5 s). MidBatchKill is the
	// share of batches whose delivery kills its own loop halfway through
	// (default 0.03). Kills, partitions and faults go on through the
	// drain.
	KillMin, KillMax time.Duration
	MidBatchKill     float64
	// NoReshard skips the split (at a third of Produce) and the merge (at
	// two thirds).
	NoReshard bool

	// Lease timing of every runner; defaults are lease.DefaultDuration,
	// lease.DefaultRenewInterval, coordinator.DefaultRelistInterval. Relist
	// is the period of each runner's scheduled coordinator passes
	// (runner.Options.RelistInterval); between them the coordinators pass
	// at nudges and watch the shards of the loops killed.
	Lease, Renew, Relist time.Duration
	// Reader options of every loop; zero means the reader's default.
	Poll, RunLength time.Duration
	BatchSize       int32
	// ParallelizationFactor is every loop's number of lanes (default 1).
	ParallelizationFactor int
	// PoisonKey and PoisonFor: when PoisonFor > 0, the target refuses every
	// record of key PoisonKey (0 to Keys-1) for PoisonFor from the start of
	// production, settling the records before it in its batch (as
	// batchItemFailures would), then takes them. With the default failure
	// policy the loops retry them until then; with lanes, only the poison's
	// lane is held back.
	PoisonKey int
	PoisonFor time.Duration

	KinesisFaults faults.KinesisRates
	StoreFaults   faults.StoreRates
	TargetFaults  faults.TargetRates

	// FunctionTimeout, when positive, makes the target a model of a Lambda
	// function: each invocation runs InvokeMin to InvokeMax (cut at
	// FunctionTimeout, which its caller gets as an error) to its own end
	// whatever its caller does; a caller whose context ends gets an error
	// at once while the function runs on, and a mid-batch kill comes
	// halfway through an invocation. The readers' TargetTimeout is
	// FunctionTimeout, as the shardreader reads it from the function. The
	// report then judges what the function saw: HandlerOverlaps and
	// HandlerOrderViolations, over every invocation, re-deliveries included.
	FunctionTimeout, InvokeMin, InvokeMax time.Duration
	// PartitionEvery and PartitionFor: every PartitionEvery (0: never) one
	// runner, at random, loses the lease table for PartitionFor (default
	// twice the lease): every call it makes fails, its loops stop at their
	// holders' deadlines while their invocations run on, and the shards are
	// taken by others once the lease and its fence have passed.
	PartitionEvery, PartitionFor time.Duration

	// The wider world: configuration, clocks and timing.

	// Starts are the runners' start positions, runner i taking
	// Starts[i % len(Starts)] (default all "horizon"): different ones make
	// runners behave as two deployments on one table. "sequence:marker"
	// stands for the first record of the stream's first shard, a marker
	// record written before production. Every start must cover every record
	// produced: production begins only once the stream's generation record
	// is applied (so a "latest" start is pinned before it).
	Starts []string
	// Changes restart a runner with another start position mid-run: a new
	// generation (which must again cover every record produced).
	Changes []StartChange
	// Skew offsets each runner's clock by a seeded amount in [-Skew, +Skew]
	// (coordinator, readers and the expiry its lease store writes).
	Skew time.Duration
	// EarlyKill is the share of loops killed before their first checkpoint,
	// right after they start.
	EarlyKill float64
	// Recreate, after production and a full drain, deletes the stream,
	// creates it again under the same name, sets every "sequence:" runner to
	// "latest" (its record is gone with the old stream), waits for the new
	// incarnation's generation and produces RecreateRecords more over a third
	// of Produce.
	Recreate        bool
	RecreateRecords int

	// Seed makes the run's random choices (kills, faults, keys of the
	// mid-batch kills) reproducible, up to goroutine scheduling.
	Seed uint64
	// Logf gets progress lines (default none); Logger the runners' logs
	// (default discards).
	Logf   func(format string, args ...any)
	Logger *slog.Logger
}

// StartChange restarts one runner with another start position At into the
// run.
type StartChange struct {
	At     time.Duration
	Runner int
	Start  string
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.Shards == 0 {
		c.Shards = 4
	}
	if c.Runners == 0 {
		c.Runners = 3
	}
	if c.Keys == 0 {
		c.Keys = 32
	}
	if c.DataSize == 0 {
		c.DataSize = 32
	}
	if c.MidBatchKill == 0 {
		c.MidBatchKill = 0.03
	}
	def(&c.Produce, 30*time.Second)
	def(&c.Drain, 60*time.Second)
	def(&c.KillMin, 2*time.Second)
	def(&c.KillMax, 5*time.Second)
	def(&c.Lease, lease.DefaultDuration)
	def(&c.Renew, lease.DefaultRenewInterval)
	def(&c.Relist, coordinator.DefaultRelistInterval)
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if len(c.Starts) == 0 {
		c.Starts = []string{"horizon"}
	}
	if c.Recreate && c.RecreateRecords == 0 {
		c.RecreateRecords = max(1, c.Records/3)
	}
	if c.PartitionEvery > 0 && c.PartitionFor == 0 {
		c.PartitionFor = 2 * c.Lease
	}
	if c.FunctionTimeout > 0 && c.InvokeMax < c.InvokeMin {
		c.InvokeMax = c.InvokeMin
	}
}

func (c *Config) validate() error {
	switch {
	case c.Kinesis == nil || c.Dynamo == nil:
		return errors.New("chaos: Kinesis and Dynamo clients are required")
	case c.Stream == "" || c.Table == "":
		return errors.New("chaos: Stream and Table are required")
	case c.Records < 1:
		return errors.New("chaos: Records: want at least 1")
	case c.Runners < 1 || c.Shards < 1:
		return errors.New("chaos: Runners and Shards: want at least 1")
	case c.KillMax < c.KillMin:
		return errors.New("chaos: KillMax: want at least KillMin")
	case c.Skew < 0:
		return errors.New("chaos: Skew: want a positive duration")
	case c.ParallelizationFactor < 0 || c.ParallelizationFactor > reader.MaxParallelizationFactor:
		return fmt.Errorf("chaos: ParallelizationFactor: want 0 (the default) to %d", reader.MaxParallelizationFactor)
	case c.FunctionTimeout < 0 || c.InvokeMin < 0 || c.PartitionEvery < 0 || c.PartitionFor < 0:
		return errors.New("chaos: FunctionTimeout, InvokeMin, PartitionEvery, PartitionFor: want positive durations")
	case c.FunctionTimeout > 0 && c.RunLength > 0 && c.FunctionTimeout >= c.RunLength:
		return errors.New("chaos: FunctionTimeout: want it shorter than RunLength")
	case c.PoisonFor < 0 || (c.PoisonFor > 0 && (c.PoisonKey < 0 || c.PoisonKey >= c.Keys)):
		return fmt.Errorf("chaos: PoisonKey: want a key from 0 to %d, with PoisonFor a positive duration", c.Keys-1)
	}
	for _, ch := range c.Changes {
		if ch.Runner < 0 || ch.Runner >= c.Runners {
			return fmt.Errorf("chaos: Changes: runner %d of %d", ch.Runner, c.Runners)
		}
	}
	return nil
}

// recID names one produced record: its key and its number within the key.
type recID struct{ key, n int }

// delivery is one settled part of a batch as the target saw it.
type delivery struct {
	runner     int
	owner      string // the loop's owner, from its context ("" when unknown)
	shard      string // with the stream incarnation: "2/shardId-…" after a re-creation
	start, end time.Time
	records    int
}

// Kill is one loop killed during the run.
type Kill struct {
	At       time.Time
	Runner   int
	Shard    string
	Owner    string
	MidBatch bool
	Early    bool // before the loop's first run ended
}

// Overlap is a time two owners of one shard both delivered.
type Overlap struct {
	Shard  string
	Owners [2]string
	Length time.Duration
}

// Report is what a run found.
type Report struct {
	Seed     uint64
	Produced int
	// Delivered counts distinct records the target settled; Lost the
	// produced records it never settled.
	Delivered, Lost int
	LostSample      []string
	// Duplicates counts settled deliveries beyond the first of a record.
	Duplicates int
	// OrderViolations counts records whose first delivery came before an
	// earlier record of the same key had been delivered.
	OrderViolations int
	OrderSample     []string
	// Overlaps lists, per shard and pair of owners, the time both delivered;
	// MaxOverlap is the longest. Unattributed counts deliveries whose owner
	// could not be told (a loop killed before its first lease write).
	Overlaps     []Overlap
	MaxOverlap   time.Duration
	Unattributed int
	Lease        time.Duration
	// Generations are the stream's generation records as they changed;
	// Skews each runner's clock offset; Recreated is true when the stream
	// was deleted and created again.
	Generations []string
	Skews       []time.Duration
	Recreated   bool

	Kills       []Kill
	Faults      map[string]int64
	Owners      int // distinct owners that delivered
	Loops       int // loops started by all runners
	Split       string
	Merged      [2]string
	Elapsed     time.Duration
	DrainTook   time.Duration
	ByShard     map[string]int // settled records per shard, duplicates included
	Deliveries  int
	ProduceTook time.Duration

	// With Config.FunctionTimeout, what the function saw. Invocations
	// counts them; HandlerOverlaps the pairs of invocations carrying one
	// key that ran at overlapping times (across owners, runs and lanes),
	// MaxHandlerOverlap the longest; HandlerOrderViolations the times a
	// key's records, over every invocation in the order they ran,
	// re-deliveries included, skipped ahead: after record n of a key, the
	// next one seen must be n+1, or n or earlier (a replay, which must then
	// go on in order).
	Invocations            int
	HandlerOverlaps        int
	MaxHandlerOverlap      time.Duration
	HandlerOverlapSample   []string
	HandlerOrderViolations int
	HandlerOrderSample     []string

	// PoisonRefusals counts the deliveries the target refused for the
	// poison key; PoisonHeld how long it refused them.
	PoisonRefusals int
	PoisonHeld     time.Duration
	// Factor is the loops' ParallelizationFactor.
	Factor int
}

// DuplicateRatio is Duplicates over Produced.
func (r Report) DuplicateRatio() float64 {
	if r.Produced == 0 {
		return 0
	}
	return float64(r.Duplicates) / float64(r.Produced)
}

// Problems lists what breaks the promise: lost records, broken per-key
// order, and two owners of one shard delivering at overlapping times.
func (r Report) Problems() []string {
	var p []string
	if r.Lost > 0 {
		p = append(p, fmt.Sprintf("%d of %d records lost, e.g. %s", r.Lost, r.Produced, strings.Join(r.LostSample, " ")))
	}
	if r.OrderViolations > 0 {
		p = append(p, fmt.Sprintf("per-key order broken %d times, e.g. %s", r.OrderViolations, strings.Join(r.OrderSample, "; ")))
	}
	for _, o := range r.Overlaps {
		p = append(p, fmt.Sprintf("shard %s delivered by %s and %s at overlapping times for %s", o.Shard, o.Owners[0], o.Owners[1], o.Length.Round(time.Millisecond)))
	}
	if r.Unattributed > 0 {
		p = append(p, fmt.Sprintf("%d deliveries by no known loop", r.Unattributed))
	}
	if r.HandlerOverlaps > 0 {
		p = append(p, fmt.Sprintf("%d pairs of invocations of one key overlapped at the function (longest %s), e.g. %s",
			r.HandlerOverlaps, r.MaxHandlerOverlap.Round(time.Millisecond), strings.Join(r.HandlerOverlapSample, "; ")))
	}
	if r.HandlerOrderViolations > 0 {
		p = append(p, fmt.Sprintf("the function saw a key's records out of order %d times, e.g. %s", r.HandlerOrderViolations, strings.Join(r.HandlerOrderSample, "; ")))
	}
	return p
}

// Summary is a one-paragraph account of the run.
func (r Report) Summary() string {
	mid := 0
	for _, k := range r.Kills {
		if k.MidBatch {
			mid++
		}
	}
	var fs []string
	for _, k := range slices.Sorted(mapsKeys(r.Faults)) {
		fs = append(fs, fmt.Sprintf("%s=%d", k, r.Faults[k]))
	}
	var skews []string
	for _, d := range r.Skews {
		skews = append(skews, d.Round(time.Second).String())
	}
	return fmt.Sprintf("seed %d: produced %d in %s, delivered %d unique (%d duplicates, ratio %.4f), lost %d, per-key order violations %d; "+
		"%d kills (%d mid-batch), split %s, merged %s+%s, re-created %v; generations %s; clock skews %s; %d loops, %d owners delivered, %d deliveries; "+
		"max two-owner overlap %s (lease %s), %d unattributed deliveries; faults %s; %d lanes a shard, poison key refused %d times over %s; drain %s, total %s",
		r.Seed, r.Produced, r.ProduceTook.Round(time.Second), r.Delivered, r.Duplicates, r.DuplicateRatio(), r.Lost, r.OrderViolations,
		len(r.Kills), mid, r.Split, r.Merged[0], r.Merged[1], r.Recreated, strings.Join(r.Generations, " > "), strings.Join(skews, " "),
		r.Loops, r.Owners, r.Deliveries, r.MaxOverlap.Round(time.Millisecond), r.Lease, r.Unattributed,
		strings.Join(fs, " "), max(1, r.Factor), r.PoisonRefusals, r.PoisonHeld, r.DrainTook.Round(100*time.Millisecond), r.Elapsed.Round(time.Second)) +
		r.functionSummary()
}

// functionSummary is the Summary's part about the function model, "" without it.
func (r Report) functionSummary() string {
	if r.Invocations == 0 {
		return ""
	}
	return fmt.Sprintf("; the function ran %d invocations: %d pairs of one key overlapped (longest %s), %d out of order",
		r.Invocations, r.HandlerOverlaps, r.MaxHandlerOverlap.Round(time.Millisecond), r.HandlerOrderViolations)
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// harness is one run's shared state.
type harness struct {
	cfg     Config
	in      *faults.Injector
	kin     *faults.Kinesis
	runCtx  context.Context
	runners []*slot

	mu          sync.Mutex
	rng         *rand.Rand
	produced    []int // per key: records 0..n-1 are in the stream
	total       int
	seen        map[recID]int
	next        []int // per key: the next record expected first
	dups        int
	orderBad    int
	orderSample []string
	deliveries  []delivery
	kills       []Kill
	killing     bool
	phase       int             // the stream's incarnation: 1, then 2 after a re-creation
	early       map[string]bool // loops already judged for an early kill, by owner
	marker      string          // "sequence:<shard>:<seq>" of the marker record
	gens        []string
	poisonUntil time.Time // the target refuses the poison key until then
	refusals    int
	invocations []*invocation // with Config.FunctionTimeout, as the function ran them
}

// invocation is one invocation of the function model: the records it
// carried, when it began and when it ended (zero while it runs).
type invocation struct {
	owner      string
	records    []recID
	start, end time.Time
}

// slot is one runner: it may be restarted with another start position.
type slot struct {
	down   atomic.Bool // cut off the lease table (Config.PartitionEvery)
	mu     sync.Mutex
	i      int
	start  string
	skew   time.Duration
	r      *runner.Runner
	cancel context.CancelFunc
	done   chan struct{}
	loops  int // loops of runners this slot ran before the current one
	starts int // runners started in this slot
}

func (sl *slot) runner() *runner.Runner {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.r
}

// Run runs one chaos run and reports what the target received. Its error
// is for a run that could not be carried out (emulators failing, a stream
// that cannot be created); lost or reordered records are in the Report.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return Report{}, err
	}
	began := time.Now()
	h := &harness{
		cfg:      cfg,
		rng:      rand.New(rand.NewPCG(cfg.Seed, 1)),
		in:       faults.NewInjector(cfg.Seed + 1),
		produced: make([]int, cfg.Keys),
		next:     make([]int, cfg.Keys),
		seen:     map[recID]int{},
		killing:  true,
		phase:    1,
		early:    map[string]bool{},
	}
	rep := Report{Seed: cfg.Seed, Lease: cfg.Lease, Factor: cfg.ParallelizationFactor}
	h.kin = &faults.Kinesis{API: cfg.Kinesis, Rates: cfg.KinesisFaults, In: h.in}

	if err := lease.CreateTable(ctx, cfg.Dynamo, cfg.Table); err != nil {
		return rep, fmt.Errorf("chaos: lease table: %w", err)
	}
	if _, err := shards.CreateIfMissing(ctx, cfg.Kinesis, cfg.Stream, cfg.Shards); err != nil {
		return rep, fmt.Errorf("chaos: stream: %w", err)
	}
	if err := h.putMarker(ctx); err != nil {
		return rep, err
	}

	runCtx, stopRunners := context.WithCancel(ctx)
	defer stopRunners()
	h.runCtx = runCtx
	for i := range cfg.Runners {
		sl := &slot{i: i, start: cfg.Starts[i%len(cfg.Starts)]}
		if cfg.Skew > 0 {
			sl.skew = time.Duration(h.rng.Int64N(int64(2*cfg.Skew)+1)) - cfg.Skew
		}
		rep.Skews = append(rep.Skews, sl.skew)
		h.runners = append(h.runners, sl)
		if err := h.startSlot(sl, sl.start); err != nil {
			return rep, err
		}
	}
	defer h.stopAll()
	// Production begins once a generation is applied, so that every start
	// (a "latest" one is pinned then) covers every record produced.
	if err := h.waitGeneration(ctx, 0); err != nil {
		return rep, err
	}

	prodCtx, stopChaos := context.WithCancel(runCtx)
	defer stopChaos()
	var chaosWG sync.WaitGroup
	chaosWG.Go(func() { h.killLoops(prodCtx) })
	if cfg.EarlyKill > 0 {
		chaosWG.Go(func() { h.killEarly(prodCtx) })
	}
	if !cfg.NoReshard {
		chaosWG.Go(func() { h.reshard(prodCtx, time.Now(), &rep) })
	}
	chaosWG.Go(func() { h.changeStarts(prodCtx, time.Now()) })
	if cfg.PartitionEvery > 0 {
		chaosWG.Go(func() { h.partitions(prodCtx) })
	}
	progress := time.NewTicker(5 * time.Second)
	defer progress.Stop()

	produceStart := time.Now()
	if cfg.PoisonFor > 0 {
		h.mu.Lock()
		h.poisonUntil = produceStart.Add(cfg.PoisonFor)
		h.mu.Unlock()
		rep.PoisonHeld = cfg.PoisonFor
	}
	prodErr := h.produceWatching(runCtx, cfg.Records, cfg.Produce, progress, began)
	rep.ProduceTook = time.Since(produceStart)
	if prodErr == nil {
		cfg.Logf("chaos: production done (%d records in %s); draining", h.producedTotal(), rep.ProduceTook.Round(time.Second))
		rep.DrainTook = h.drain(ctx, progress, began)
	}
	if prodErr == nil && cfg.Recreate && ctx.Err() == nil {
		rep.Recreated = true
		if err := h.recreate(ctx); err != nil {
			prodErr = err
		} else {
			prodErr = h.produceWatching(runCtx, cfg.Records+cfg.RecreateRecords, cfg.Produce/3, progress, began)
			if prodErr == nil {
				rep.DrainTook += h.drain(ctx, progress, began)
			}
		}
	}
	stopChaos()
	chaosWG.Wait()
	h.mu.Lock()
	h.killing = false
	h.mu.Unlock()
	h.stopAll()
	for _, sl := range h.runners {
		rep.Loops += sl.loops + len(sl.runner().Loops())
	}
	h.analyze(&rep)
	rep.Faults = h.in.Counts()
	rep.Elapsed = time.Since(began)
	if prodErr != nil {
		return rep, prodErr
	}
	return rep, ctx.Err()
}

// startSlot (re)starts sl's runner with start, on its own clock and lease
// store.
func (h *harness) startSlot(sl *slot, start string) error {
	cfg := h.cfg
	skew := sl.skew
	clock := func() time.Time { return time.Now().Add(skew) }
	ds, err := lease.NewDynamoStore(cfg.Dynamo, cfg.Table, func(o *lease.Options) { o.Duration, o.Clock = cfg.Lease, clock })
	if err != nil {
		return err
	}
	r, err := runner.New(runner.Options{
		Subscriptions: []coordinator.Subscription{{Stream: cfg.Stream, Start: h.resolveStart(start)}},
		Store:         &faults.Partition{Store: &faults.Store{Store: ds, Rates: cfg.StoreFaults, In: h.in}, Down: sl.down.Load, In: h.in},
		Kinesis:       h.kin,
		Reader: reader.Options{
			Target:        &faults.Target{Target: h.sink(sl.i), Rates: cfg.TargetFaults, In: h.in},
			TargetTimeout: cfg.FunctionTimeout,
			Mapping: reader.Mapping{
				BatchSize:             cfg.BatchSize,
				ParallelizationFactor: cfg.ParallelizationFactor,
			},
			PollInterval:  cfg.Poll,
			RunLength:     cfg.RunLength,
			RenewInterval: cfg.Renew,
			LeaseDuration: cfg.Lease,
			Clock:         clock,
			Logger:        cfg.Logger.With("runner", sl.i),
		},
		RelistInterval: cfg.Relist,
		Logger:         cfg.Logger.With("runner", sl.i),
		Balance:        h.balance(sl),
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(h.runCtx)
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	sl.mu.Lock()
	if sl.r != nil {
		sl.loops += len(sl.r.Loops())
	}
	sl.start, sl.r, sl.cancel, sl.done = start, r, cancel, done
	sl.mu.Unlock()
	return nil
}

// balance is the Balance of sl's runner, nil without Config.Balance: a new
// id for each start of the slot, as a restarted process has.
func (h *harness) balance(sl *slot) *runner.Balance {
	if !h.cfg.Balance {
		return nil
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.starts++
	return &runner.Balance{ID: fmt.Sprintf("chaos-%d-%d", sl.i, sl.starts), Host: "chaos", PID: sl.i}
}

// stopSlot stops sl's runner and waits for its loops.
func (h *harness) stopSlot(sl *slot) {
	sl.mu.Lock()
	cancel, done := sl.cancel, sl.done
	sl.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (h *harness) stopAll() {
	for _, sl := range h.runners {
		h.stopSlot(sl)
	}
}

// resolveStart turns "sequence:marker" into the marker's position.
func (h *harness) resolveStart(start string) string {
	if start == "sequence:marker" {
		return h.marker
	}
	return start
}

// putMarker writes the record "sequence:marker" starts name, when a start
// needs it, on the stream's first shard.
func (h *harness) putMarker(ctx context.Context) error {
	need := false
	for _, s := range h.cfg.Starts {
		need = need || s == "sequence:marker"
	}
	for _, c := range h.cfg.Changes {
		need = need || c.Start == "sequence:marker"
	}
	if !need {
		return nil
	}
	ls, err := shards.List(ctx, h.cfg.Kinesis, h.cfg.Stream)
	if err != nil || len(ls) == 0 {
		return fmt.Errorf("chaos: list shards for the marker: %v", err)
	}
	out, err := h.cfg.Kinesis.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(h.cfg.Stream), Data: []byte("marker"),
		PartitionKey: aws.String("marker"), ExplicitHashKey: aws.String(ls[0].HashKeyStart)})
	if err != nil {
		return fmt.Errorf("chaos: put the marker: %w", err)
	}
	h.marker = "sequence:" + aws.ToString(out.ShardId) + ":" + aws.ToString(out.SequenceNumber)
	return nil
}

// waitGeneration waits until the stream's generation record is applied,
// for an incarnation other than not (0: any), and has stayed the same for
// two relist intervals: every runner's coordinator has passed by then, so
// every start configured has been recorded or stood down.
func (h *harness) waitGeneration(ctx context.Context, not int64) error {
	ds, err := lease.NewDynamoStore(h.cfg.Dynamo, h.cfg.Table)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	var stable lease.Generation
	var since time.Time
	for {
		g, err := ds.GetGeneration(ctx, h.cfg.Stream)
		if err == nil && g.Applied && (not == 0 || g.Incarnation != not) {
			h.noteGeneration(g)
			if g.Order != stable.Order || g.Incarnation != stable.Incarnation {
				stable, since = g, time.Now()
			} else if time.Since(since) >= 2*h.cfg.Relist {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: no generation applied within a minute (last: %+v, %v)", g, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (h *harness) noteGeneration(g lease.Generation) {
	s := fmt.Sprintf("%d:%s", g.Order, g.Start)
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.gens); n == 0 || h.gens[n-1] != s {
		h.gens = append(h.gens, s)
	}
}

// changeStarts restarts runners with new start positions as Changes say,
// each a new generation the others' coordinators then stand down for.
func (h *harness) changeStarts(ctx context.Context, began time.Time) {
	changes := slices.Clone(h.cfg.Changes)
	slices.SortFunc(changes, func(a, b StartChange) int { return cmp.Compare(a.At, b.At) })
	for _, ch := range changes {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(began.Add(ch.At))):
		}
		sl := h.runners[ch.Runner]
		h.stopSlot(sl)
		if err := h.startSlot(sl, ch.Start); err != nil {
			h.cfg.Logf("chaos: restart runner %d: %v", ch.Runner, err)
			continue
		}
		h.cfg.Logf("chaos %5.1fs: runner %d restarted with start %s", time.Since(began).Seconds(), ch.Runner, h.resolveStart(ch.Start))
		go h.watchGeneration(ctx)
	}
}

// watchGeneration notes the generation records the run goes through.
func (h *harness) watchGeneration(ctx context.Context) {
	ds, err := lease.NewDynamoStore(h.cfg.Dynamo, h.cfg.Table)
	if err != nil {
		return
	}
	for range 100 {
		if g, err := ds.GetGeneration(ctx, h.cfg.Stream); err == nil {
			h.noteGeneration(g)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// recreate deletes the stream and creates it again under the same name,
// moves "sequence:" runners to "latest", and waits for the new
// incarnation's generation.
func (h *harness) recreate(ctx context.Context) error {
	cfg := h.cfg
	sum, err := cfg.Kinesis.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(cfg.Stream)})
	if err != nil {
		return fmt.Errorf("chaos: describe before re-creating: %w", err)
	}
	old := aws.ToTime(sum.StreamDescriptionSummary.StreamCreationTimestamp).UnixMilli()
	if _, err := cfg.Kinesis.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(cfg.Stream), EnforceConsumerDeletion: aws.Bool(true)}); err != nil {
		return fmt.Errorf("chaos: delete the stream: %w", err)
	}
	for {
		_, err := cfg.Kinesis.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(cfg.Stream)})
		var nf *ktypes.ResourceNotFoundException
		if errors.As(err, &nf) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	// A sequence start names a record of the stream that is gone: an
	// operator changes it before creating the stream again.
	for _, sl := range h.runners {
		if strings.HasPrefix(sl.start, "sequence:") {
			h.stopSlot(sl)
			if err := h.startSlot(sl, "latest"); err != nil {
				return err
			}
		}
	}
	h.mu.Lock()
	h.phase = 2
	h.mu.Unlock()
	if _, err := shards.CreateIfMissing(ctx, cfg.Kinesis, cfg.Stream, cfg.Shards); err != nil {
		return fmt.Errorf("chaos: create the stream again: %w", err)
	}
	cfg.Logf("chaos: stream deleted and created again; waiting for its generation")
	return h.waitGeneration(ctx, old)
}

// produceWatching produces until total records are in over about d,
// logging progress.
func (h *harness) produceWatching(ctx context.Context, total int, d time.Duration, progress *time.Ticker, began time.Time) error {
	done := make(chan error, 1)
	go func() { done <- h.produce(ctx, total, d) }()
	for {
		select {
		case err := <-done:
			return err
		case <-progress.C:
			h.progress(began)
		}
	}
}

// drain waits until every record produced was delivered, or until Drain
// passed without a record delivered for the first time.
func (h *harness) drain(ctx context.Context, progress *time.Ticker, began time.Time) time.Duration {
	start := time.Now()
	check := time.NewTicker(200 * time.Millisecond)
	defer check.Stop()
	seen, moved := h.uniqueDelivered(), start
	for !h.drained() {
		select {
		case <-ctx.Done():
			return time.Since(start)
		case <-progress.C:
			h.progress(began)
		case now := <-check.C:
			if n := h.uniqueDelivered(); n > seen {
				seen, moved = n, now
			} else if now.Sub(moved) >= h.cfg.Drain {
				h.cfg.Logf("chaos: drain stalled: no record delivered for the first time in %s (%d of %d after %s)",
					h.cfg.Drain, n, h.producedTotal(), now.Sub(start).Round(time.Second))
				return time.Since(start)
			}
		}
	}
	return time.Since(start)
}

func (h *harness) uniqueDelivered() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen)
}

func (h *harness) producedTotal() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}

func (h *harness) drained() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen) >= h.total
}

func (h *harness) progress(began time.Time) {
	h.mu.Lock()
	total, uniq, dups, kills := h.total, len(h.seen), h.dups, len(h.kills)
	h.mu.Unlock()
	h.cfg.Logf("chaos %5.1fs: produced %d, delivered %d unique (%d dup), %d kills, %d faults",
		time.Since(began).Seconds(), total, uniq, dups, kills, h.in.Total())
}

// produce writes records until total are in, paced over about d, each key
// at most once per request; a request is retried (its failed entries) until
// all of it is in, so each key's records are in the stream in the order of
// their number.
func (h *harness) produce(ctx context.Context, total int, d time.Duration) error {
	const tick = 100 * time.Millisecond
	cfg := h.cfg
	todo := total - h.producedTotal()
	per := max(1, int(float64(todo)*tick.Seconds()/max(d, tick).Seconds()))
	per = min(per, cfg.Keys, 500)
	t := time.NewTicker(tick)
	defer t.Stop()
	k := h.producedTotal() % cfg.Keys
	pad := strings.Repeat("x", max(0, cfg.DataSize-16))
	for h.producedTotal() < total {
		n := min(per, total-h.producedTotal())
		entries := make([]ktypes.PutRecordsRequestEntry, 0, n)
		h.mu.Lock()
		for range n {
			entries = append(entries, ktypes.PutRecordsRequestEntry{
				PartitionKey: aws.String("key-" + strconv.Itoa(k)),
				Data:         fmt.Appendf(nil, "%d:%d:%s", k, h.produced[k], pad),
			})
			k = (k + 1) % cfg.Keys
		}
		h.mu.Unlock()
		if err := h.put(ctx, entries); err != nil {
			return err
		}
		h.mu.Lock()
		for _, e := range entries {
			id, _ := parse(e.Data)
			h.produced[id.key]++
			h.total++
		}
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

func (h *harness) put(ctx context.Context, entries []ktypes.PutRecordsRequestEntry) error {
	for attempt := 0; len(entries) > 0; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(min(time.Duration(attempt)*100*time.Millisecond, 2*time.Second)):
			}
		}
		if attempt > 50 {
			return fmt.Errorf("chaos: produce: %d records still refused after %d attempts", len(entries), attempt)
		}
		out, err := h.cfg.Kinesis.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(h.cfg.Stream), Records: entries})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			h.cfg.Logf("chaos: put failed, retrying: %v", err)
			continue
		}
		var again []ktypes.PutRecordsRequestEntry
		for i, r := range out.Records {
			if r.ErrorCode != nil {
				again = append(again, entries[i])
			}
		}
		entries = again
	}
	return nil
}

func parse(data []byte) (recID, bool) {
	k, rest, ok := strings.Cut(string(data), ":")
	if !ok {
		return recID{}, false
	}
	n, _, ok := strings.Cut(rest, ":")
	if !ok {
		return recID{}, false
	}
	ki, err1 := strconv.Atoi(k)
	ni, err2 := strconv.Atoi(n)
	return recID{ki, ni}, err1 == nil && err2 == nil
}

var (
	errKilled = errors.New("chaos: loop killed mid-batch")
	errPoison = errors.New("chaos: the target cannot take the poison key's record yet")
)

// sink is runner i's target: it records what it settles and, now and then,
// settles half a batch and kills its own loop, as a process dying in the
// middle of a delivery would.
func (h *harness) sink(i int) reader.Target {
	if h.cfg.FunctionTimeout > 0 {
		return h.function(i)
	}
	return reader.FuncTarget(func(ctx context.Context, b reader.Batch) (int, error) {
		start := time.Now()
		h.mu.Lock()
		n := len(b.Records)
		poisoned := false
		if start.Before(h.poisonUntil) {
			for i, rec := range b.Records {
				if id, ok := parse(rec.Data); ok && id.key == h.cfg.PoisonKey {
					n, poisoned = i, true
					h.refusals++
					break
				}
			}
		}
		kill := !poisoned && h.killing && n >= 2 && h.rng.Float64() < h.cfg.MidBatchKill
		if kill {
			n /= 2
		}
		h.settledLocked(b.ShardID, b.Records[:n])
		owner, _ := runner.LoopOwner(ctx)
		h.deliveries = append(h.deliveries, delivery{runner: i, owner: owner, shard: h.shardLocked(b.ShardID), start: start, end: time.Now(), records: n})
		h.mu.Unlock()
		if poisoned {
			return n, errPoison
		}
		if !kill {
			return n, nil
		}
		killed := h.runners[i].runner().Kill(h.cfg.Stream, b.ShardID)
		h.mu.Lock()
		h.kills = append(h.kills, Kill{At: time.Now(), Runner: i, Shard: b.ShardID, Owner: killed, MidBatch: true})
		h.mu.Unlock()
		return n, errKilled
	})
}

// settledLocked counts what the target settled: records first settled,
// duplicates, and a record first settled before an earlier one of its key.
func (h *harness) settledLocked(shardID string, recs []ktypes.Record) {
	for _, rec := range recs {
		id, ok := parse(rec.Data)
		if !ok {
			continue
		}
		h.seen[id]++
		if h.seen[id] > 1 {
			h.dups++
			continue
		}
		if id.key < len(h.next) {
			if id.n != h.next[id.key] {
				h.orderBad++
				if len(h.orderSample) < 5 {
					h.orderSample = append(h.orderSample, fmt.Sprintf("key %d: record %d first delivered while %d was expected (shard %s)", id.key, id.n, h.next[id.key], shardID))
				}
			}
			h.next[id.key] = max(h.next[id.key], id.n+1)
		}
	}
}

// shardLocked names a shard with the stream's incarnation after a
// re-creation: "2/shardId-…".
func (h *harness) shardLocked(shardID string) string {
	if h.phase > 1 {
		return fmt.Sprintf("%d/%s", h.phase, shardID)
	}
	return shardID
}

// function is runner i's target with Config.FunctionTimeout: a model of a
// Lambda function. Each invocation runs to its own end whatever its caller
// does; the caller gets the answer only if its context outlives it. What
// the function saw is recorded as it began (its records) and ended.
func (h *harness) function(i int) reader.Target {
	return reader.FuncTarget(func(ctx context.Context, b reader.Batch) (int, error) {
		start := time.Now()
		owner, _ := runner.LoopOwner(ctx)
		h.mu.Lock()
		run := h.cfg.InvokeMin + time.Duration(h.rng.Int64N(int64(h.cfg.InvokeMax-h.cfg.InvokeMin)+1))
		timedOut := run > h.cfg.FunctionTimeout
		run = min(run, h.cfg.FunctionTimeout)
		n := len(b.Records)
		poisoned := false
		if start.Before(h.poisonUntil) {
			for k, rec := range b.Records {
				if id, ok := parse(rec.Data); ok && id.key == h.cfg.PoisonKey {
					n, poisoned = k, true
					h.refusals++
					break
				}
			}
		}
		kill := h.killing && h.rng.Float64() < h.cfg.MidBatchKill
		inv := &invocation{owner: owner, start: start}
		for _, rec := range b.Records {
			if id, ok := parse(rec.Data); ok {
				inv.records = append(inv.records, id)
			}
		}
		h.invocations = append(h.invocations, inv)
		shard := h.shardLocked(b.ShardID)
		h.mu.Unlock()
		done := make(chan struct{})
		go func() { // the function: it runs to its end
			time.Sleep(run)
			h.mu.Lock()
			inv.end = time.Now()
			h.deliveries = append(h.deliveries, delivery{runner: i, owner: owner, shard: shard, start: start, end: inv.end, records: n})
			h.mu.Unlock()
			close(done)
		}()
		if kill { // the loop's host dies halfway through the invocation
			go func() {
				time.Sleep(run / 2)
				if killed := h.runners[i].runner().Kill(h.cfg.Stream, b.ShardID); killed != "" {
					h.mu.Lock()
					h.kills = append(h.kills, Kill{At: time.Now(), Runner: i, Shard: b.ShardID, Owner: killed, MidBatch: true})
					h.mu.Unlock()
				}
			}()
		}
		select {
		case <-done:
		case <-ctx.Done():
			return 0, ctx.Err() // the caller gave up; the function did not
		}
		if timedOut {
			return 0, fmt.Errorf("chaos: Task timed out after %s", h.cfg.FunctionTimeout)
		}
		h.mu.Lock()
		h.settledLocked(b.ShardID, b.Records[:n])
		h.mu.Unlock()
		if poisoned {
			return n, errPoison
		}
		return n, nil
	})
}

// partitions cuts one runner at random off the lease table for
// PartitionFor, every PartitionEvery.
func (h *harness) partitions(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(h.cfg.PartitionEvery):
		}
		sl := h.runners[h.rngIntN(len(h.runners))]
		h.cfg.Logf("chaos: runner %d cut off the lease table for %s", sl.i, h.cfg.PartitionFor)
		sl.down.Store(true)
		select {
		case <-ctx.Done():
		case <-time.After(h.cfg.PartitionFor):
		}
		sl.down.Store(false)
	}
}

// killLoops kills a random running loop every KillMin to KillMax.
func (h *harness) killLoops(ctx context.Context) {
	for {
		h.mu.Lock()
		d := h.cfg.KillMin + time.Duration(h.rng.Int64N(int64(h.cfg.KillMax-h.cfg.KillMin)+1))
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		type cand struct {
			runner int
			shard  string
		}
		var cs []cand
		for i, sl := range h.runners {
			for _, l := range sl.runner().Loops() {
				if !l.Done && !l.Killed {
					cs = append(cs, cand{i, l.ShardID})
				}
			}
		}
		if len(cs) == 0 {
			continue
		}
		h.mu.Lock()
		c := cs[h.rng.IntN(len(cs))]
		h.mu.Unlock()
		if owner := h.runners[c.runner].runner().Kill(h.cfg.Stream, c.shard); owner != "" {
			h.mu.Lock()
			h.kills = append(h.kills, Kill{At: time.Now(), Runner: c.runner, Shard: c.shard, Owner: owner})
			h.mu.Unlock()
		}
	}
}

// killEarly kills a share (EarlyKill) of the loops that start, before their
// first run has ended: loops that die before their first checkpoint, which
// must leave where their shard opened on its row.
func (h *harness) killEarly(ctx context.Context) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for i, sl := range h.runners {
			r := sl.runner()
			for _, l := range r.Loops() {
				h.mu.Lock()
				judged := h.early[l.Owner]
				h.early[l.Owner] = true
				kill := !judged && !l.Done && l.Iterations == 0 && h.rng.Float64() < h.cfg.EarlyKill
				h.mu.Unlock()
				if !kill {
					continue
				}
				time.Sleep(time.Duration(h.rngIntN(300)) * time.Millisecond) // somewhere in its first run
				if owner := r.Kill(h.cfg.Stream, l.ShardID); owner == l.Owner {
					h.mu.Lock()
					h.kills = append(h.kills, Kill{At: time.Now(), Runner: i, Shard: l.ShardID, Owner: owner, Early: true})
					h.mu.Unlock()
				}
			}
		}
	}
}

func (h *harness) rngIntN(n int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rng.IntN(n)
}

// reshard splits a random open shard at a third of Produce and merges the
// split's children at two thirds.
func (h *harness) reshard(ctx context.Context, began time.Time, rep *Report) {
	wait := func(at time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Until(began.Add(at))):
			return true
		}
	}
	if !wait(h.cfg.Produce / 3) {
		return
	}
	parent, kids, err := h.split(ctx)
	if err != nil {
		h.cfg.Logf("chaos: split: %v", err)
		return
	}
	h.mu.Lock()
	rep.Split = parent
	h.mu.Unlock()
	h.cfg.Logf("chaos %5.1fs: split %s into %s", time.Since(began).Seconds(), parent, strings.Join(kids, " and "))
	if !wait(2 * h.cfg.Produce / 3) {
		return
	}
	for attempt := 0; ; attempt++ {
		_, err = h.cfg.Kinesis.MergeShards(ctx, &kinesis.MergeShardsInput{StreamName: aws.String(h.cfg.Stream),
			ShardToMerge: aws.String(kids[0]), AdjacentShardToMerge: aws.String(kids[1])})
		var inUse *ktypes.ResourceInUseException
		if errors.As(err, &inUse) && attempt < 20 {
			time.Sleep(250 * time.Millisecond) // the stream is still UPDATING
			continue
		}
		break
	}
	if err != nil {
		h.cfg.Logf("chaos: merge %s and %s: %v", kids[0], kids[1], err)
		return
	}
	h.mu.Lock()
	rep.Merged = [2]string{kids[0], kids[1]}
	h.mu.Unlock()
	h.cfg.Logf("chaos %5.1fs: merged %s and %s", time.Since(began).Seconds(), kids[0], kids[1])
}

func (h *harness) split(ctx context.Context) (string, []string, error) {
	ls, err := shards.List(ctx, h.cfg.Kinesis, h.cfg.Stream)
	if err != nil {
		return "", nil, err
	}
	var open []shards.Shard
	for _, s := range ls {
		if !s.Closed() {
			open = append(open, s)
		}
	}
	h.mu.Lock()
	s := open[h.rng.IntN(len(open))]
	h.mu.Unlock()
	lo, _ := new(big.Int).SetString(s.HashKeyStart, 10)
	hi, _ := new(big.Int).SetString(s.HashKeyEnd, 10)
	mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
	if _, err := h.cfg.Kinesis.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String(h.cfg.Stream),
		ShardToSplit: aws.String(s.ID), NewStartingHashKey: aws.String(mid.String())}); err != nil {
		return "", nil, err
	}
	for range 100 {
		ls, err = shards.List(ctx, h.cfg.Kinesis, h.cfg.Stream)
		if err != nil {
			return "", nil, err
		}
		var kids []shards.Shard
		for _, c := range ls {
			if c.ParentID == s.ID && c.AdjacentParentID == "" {
				kids = append(kids, c)
			}
		}
		if len(kids) == 2 {
			sort.Slice(kids, func(i, j int) bool {
				a, _ := new(big.Int).SetString(kids[i].HashKeyStart, 10)
				b, _ := new(big.Int).SetString(kids[j].HashKeyStart, 10)
				return a.Cmp(b) < 0
			})
			return s.ID, []string{kids[0].ID, kids[1].ID}, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", nil, fmt.Errorf("split of %s: children not listed", s.ID)
}

// judgeFunctionLocked judges what the function model saw (Report's
// Handler fields): per key, every invocation that carried it, in the order
// they began.
func (h *harness) judgeFunctionLocked(rep *Report) {
	rep.Invocations = len(h.invocations)
	type carried struct {
		inv  *invocation
		recs []int // the key's record numbers in it, in order
	}
	byKey := map[int][]carried{}
	for _, inv := range h.invocations {
		recs := map[int][]int{}
		for _, id := range inv.records {
			recs[id.key] = append(recs[id.key], id.n)
		}
		for key, ns := range recs {
			byKey[key] = append(byKey[key], carried{inv: inv, recs: ns})
		}
	}
	for key, cs := range byKey {
		slices.SortStableFunc(cs, func(a, b carried) int { return a.inv.start.Compare(b.inv.start) })
		var last int = -1
		var ends time.Time // the latest end of the invocations before
		var endsBy string
		for _, c := range cs {
			end := c.inv.end
			if end.IsZero() {
				end = time.Now() // still running when the run ended
			}
			if ov := ends.Sub(c.inv.start); ov > 0 {
				rep.HandlerOverlaps++
				rep.MaxHandlerOverlap = max(rep.MaxHandlerOverlap, ov)
				if len(rep.HandlerOverlapSample) < 5 {
					rep.HandlerOverlapSample = append(rep.HandlerOverlapSample, fmt.Sprintf("key %d: an invocation by %s began %s before one by %s ended", key, c.inv.owner, ov.Round(time.Millisecond), endsBy))
				}
			}
			if end.After(ends) {
				ends, endsBy = end, c.inv.owner
			}
			for _, n := range c.recs {
				if last >= 0 && n > last+1 {
					rep.HandlerOrderViolations++
					if len(rep.HandlerOrderSample) < 5 {
						rep.HandlerOrderSample = append(rep.HandlerOrderSample, fmt.Sprintf("key %d: record %d seen right after %d (by %s)", key, n, last, c.inv.owner))
					}
				}
				last = n
			}
		}
	}
}

// analyze fills the report from what was recorded.
func (h *harness) analyze(rep *Report) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rep.Produced = h.total
	rep.Delivered = len(h.seen)
	rep.Duplicates = h.dups
	rep.OrderViolations = h.orderBad
	rep.OrderSample = slices.Clone(h.orderSample)
	rep.Kills = slices.Clone(h.kills)
	rep.Deliveries = len(h.deliveries)
	rep.PoisonRefusals = h.refusals
	for k, n := range h.produced {
		for i := range n {
			if h.seen[recID{k, i}] == 0 {
				rep.Lost++
				if len(rep.LostSample) < 10 {
					rep.LostSample = append(rep.LostSample, fmt.Sprintf("%d:%d", k, i))
				}
			}
		}
	}

	h.judgeFunctionLocked(rep)

	// Per shard and owner, the span from the first delivery's start to the
	// last one's end.
	type span struct{ from, to time.Time }
	spans := map[string]map[string]*span{}
	owners := map[string]bool{}
	rep.ByShard = map[string]int{}
	rep.Generations = slices.Clone(h.gens)
	for _, d := range h.deliveries {
		rep.ByShard[d.shard] += d.records
		owner := d.owner
		if owner == "" {
			rep.Unattributed++
			continue
		}
		owners[owner] = true
		if spans[d.shard] == nil {
			spans[d.shard] = map[string]*span{}
		}
		s := spans[d.shard][owner]
		if s == nil {
			spans[d.shard][owner] = &span{d.start, d.end}
			continue
		}
		if d.start.Before(s.from) {
			s.from = d.start
		}
		if d.end.After(s.to) {
			s.to = d.end
		}
	}
	rep.Owners = len(owners)
	for shard, byOwner := range spans {
		names := slices.Sorted(mapsKeys(byOwner))
		for i, a := range names {
			for _, b := range names[i+1:] {
				sa, sb := byOwner[a], byOwner[b]
				from, to := sa.from, sa.to
				if sb.from.After(from) {
					from = sb.from
				}
				if sb.to.Before(to) {
					to = sb.to
				}
				if ov := to.Sub(from); ov > 0 {
					rep.Overlaps = append(rep.Overlaps, Overlap{Shard: shard, Owners: [2]string{a, b}, Length: ov})
					rep.MaxOverlap = max(rep.MaxOverlap, ov)
				}
			}
		}
	}
}
