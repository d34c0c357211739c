package sim

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/pkg/filter"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
)

// The checker holds what the world knows for sure (every record written,
// with its shard, sequence number and arrival time; every generation
// recorded; every lease write made; every delivery the target saw) and
// checks the invariants against it, as they happen where it can and at
// the end of the world for the rest:
//
//   - every record owed is settled (or given up under the policy and sent
//     to the destination);
//   - per key, the first deliveries of its records, within the epoch that
//     owes them, follow write order;
//   - no two loop owners deliver one shard at overlapping times;
//   - a shard's checkpoint never moves backwards within a generation, and
//     never passes a record owed and not settled;
//   - SHARD_END is written only on a closed shard whose records owed are
//     all settled;
//   - a child's first delivery of an epoch comes after every parent's
//     SHARD_END;
//   - a record the filters drop (computed here with pkg/filter) is never
//     delivered nor given up, and is owed by no start;
//   - with tumbling windows, the checks of window.go.
//
// What is owed follows from the configuration, not from what the code
// under test decided: each generation record (as written to the lease
// table) says, per shard it lists, which records the start owes (all of
// them for horizon; those that arrived at or after a timestamp, or after
// a latest start's pin, read from the record; those from the named record
// of a sequence start; for a shard without a row, under the default
// generation or on the shards a sequence start does not name: what arrived
// after the generation's pinned tip). A shard created after the last
// generation (a child) owes every record. A stream deleted owes nothing
// more of that incarnation (the world waits for it to drain first, and
// flags it if it does not).
//
// Epochs: a row's epoch ends whenever a start is recorded on it (SetStart)
// or it is deleted. A loop's run belongs to the epoch in which it took the
// row; what a run of an earlier epoch still delivers (a revoked holder
// before its next renewal) does not count for the later epoch.
type checker struct {
	tr *tracer

	mu    sync.Mutex
	ev    uint64 // orders deliveries and lease writes
	incs  map[int64]int
	cur   int
	gone  map[int]time.Time // incarnations deleted
	bySeq map[string]*rec
	sh    map[shardKey]*shardState
	keys  map[keyKey][]*rec
	low   map[lowKey]int             // per key and generation, the lowest record number not settled and owed
	bad   map[keyKey]bool            // keys whose order broke (reported once)
	rules map[int64]map[string]*rule // by generation order, per shard id; never changed once stored
	// late is, by generation order, what a timestamp generation whose
	// start is after its pinned tip owes on a shard its listing did not
	// hold (a split after the listing, before the start): from the start.
	late map[int64]*rule
	// ruleInc is the incarnation of each generation order's rules; maxOrder
	// each incarnation's latest generation.
	ruleInc  map[int64]int
	maxOrder map[int]int64
	gens     []lease.Generation
	runs     map[runShard]runTake // a run's take of a shard
	// early are the loops a coordinator started on a shard whose
	// generation's start had not reached the row yet (bug B1).
	early map[string]bool

	// filters are the world's filters, compiled here with pkg/filter (nil:
	// every record passes).
	filters *filter.Set

	// Tumbling windows (window.go): the window's length, the states the
	// target returned by name, the state each reader run kept, and the
	// successful final invocations; curRun is the owner of the last take of
	// a row by each run key (a local loop's runs share one).
	window time.Duration
	folds  map[string]*fold
	nFolds int
	kept   map[string]*keptWindow
	finals []windowFinal
	curRun map[string]string

	// byKey is, per deployment and key, every invocation that carried the
	// key (keys.go); quotedPad the padding of every record's data, quoted
	// (see appendRecordData), and want a buffer the content check builds
	// the data written in; noContent turns the content check off (records
	// the world's hook may change, as KPL aggregation does).
	byKey     map[depKey][]keyDeliv
	kdIdx     map[keyKey]*keyDeliv // keyDelivery's, kept for the next
	quotedPad string
	want      []byte
	noContent bool

	violations []Violation
	stats      Stats
}

type shardKey struct {
	inc int
	id  string
}

func (k shardKey) String() string { return strconv.Itoa(k.inc) + "/" + k.id }

type keyKey struct{ inc, key int }

type lowKey struct {
	keyKey
	order int64
}

// rec is one record written.
type rec struct {
	inc, key, n int
	shard       *shardState
	idx         int
	seq         string
	arrival     time.Time // on the millisecond grain, as Kinesis stamps it
	// filtered: the record matches none of the world's filters (pkg/filter,
	// compiled by the checker): it is consumed, never delivered, and owed
	// by no start.
	filtered bool
	settles  []settle
}

// settle is one settled delivery (or give-up) of a record.
type settle struct {
	ev      uint64
	at      time.Time
	epoch   int
	givenUp bool
}

// shardState is what the checker knows of one shard of one incarnation.
type shardState struct {
	key     shardKey
	parents []string
	closed  bool
	recs    []*rec

	// cfg is what the configuration owes (the last generation covering the
	// shard); nil: everything (a child). cfgEpoch is the epoch from which
	// deliveries count for it.
	cfg      *rule
	cfgEpoch int
	// late is the order of the generation whose start was recorded on the
	// shard although its listing did not hold it (checker.late); 0: none.
	late int64
	// void are the generations that recorded a rule for the shard and were
	// superseded before their start reached its row, by a generation that
	// keeps the row as it is: the row does not read under them (unless
	// their start lands after all, see setStart).
	void map[int64]bool
	// kept is the newest generation that listed the shard and kept its row
	// as it was (a sequence start of another shard, a default generation
	// over an existing row): the row reads under it, by the rule of the
	// generation that last changed it.
	kept int64
	// prior is what the row read under when the generation on its way to
	// it (cfg, not yet applied) was recorded.
	prior int64
	// missed is the newest generation recorded while the shard had a row
	// (a run had taken it) whose listing did not hold the shard (a reshard
	// UPDATING when it listed, or done while its record was written);
	// missedPrior is what the row read under then. A coordinator re-opens
	// such a row when the generation re-opened a parent of the shard
	// (reopenMissedChildren); until a start reaches the row, its runs read
	// under missedPrior.
	missed, missedPrior int64
	taken               bool
	// restart is the newest generation, when it did not list the shard
	// and the row carries an older generation's start later than where
	// it opens a shard created after it began (a late start written on a
	// shard created after the older one's listing): its coordinators
	// start the row again from there (reopenMissedChildren), so the
	// configuration owes that (cfg), and runs read under what governed
	// the row before until the start lands (see owesRestart).
	restart int64
	// row is the rule the row was last reset under (nil: cfg's), the one
	// checkpoints are checked against.
	row *rule
	// pin is the rule of a root shard no generation covered, from its
	// first pin (see pinned).
	pin *rule

	epoch    int
	applied  int64 // order of the last generation whose start reached the row
	created  int64 // the incarnation's latest generation when the shard appeared
	bug      string
	lastCkpt int // index of the last checkpoint in this epoch; -1 none
	// pendingBy is, per loop, the highest checkpoint it wrote or tried to
	// write this epoch (heard written, failed, or its answer lost): a run
	// of the loop that delivers at or behind it again (the same run, or one
	// that took the row later) reopened behind its own position.
	pendingBy map[string]position
	endEpoch  int // epoch of the last SHARD_END; -1 none
	verified  int // records [0, verified) checked settled in this epoch
	first     map[int]bool

	delivs []interval
}

// rule says which records of a shard a start owes.
type rule struct {
	order int64
	kind  ruleKind
	at    time.Time // fromArrival
	idx   int       // fromSeq: the index of the record named in its shard, -1 unknown
	desc  string
	// ifAbsent: the generation opens the shard only where it has no row
	// (at its tip): its write keeps a row an older start made meanwhile.
	ifAbsent bool
}

type ruleKind uint8

const (
	owesAll ruleKind = iota
	owesFromArrival
	owesFromSeq
)

func (r *rule) owes(x *rec) bool {
	if x.filtered {
		return false // consumed without a delivery: the checkpoint may pass it
	}
	if r == nil {
		return true
	}
	switch r.kind {
	case owesFromArrival:
		return !x.arrival.Before(r.at)
	case owesFromSeq:
		return r.idx < 0 || x.idx >= r.idx
	}
	return true
}

// interval is one delivery call.
type interval struct {
	owner      string
	start, end time.Time
}

// Violation is one broken invariant.
type Violation struct {
	At    time.Duration
	Shard string // "<incarnation>/<shard id>", or "" for the world
	What  string
	// Bug names the known bug (see KnownBugs) the violation is, or follows
	// from: it happened on a shard the bug struck first. Empty when none.
	Bug string
}

func (v Violation) String() string {
	sh := v.Shard
	if sh == "" {
		sh = "world"
	}
	s := fmt.Sprintf("%s %s: %s", fmtDur(v.At), sh, v.What)
	if v.Bug != "" {
		s += " [known bug " + v.Bug + "]"
	}
	return s
}

// position is a checkpoint a loop wrote or tried to write: the record's
// index, the run that wrote it, when.
type position struct {
	idx int
	run string
	at  time.Time
}

// runTake is what the checker keeps of a run's take of a row.
// runShard is a run (its key, runKey) and a shard it took.
type runShard struct {
	run string
	k   shardKey
}

type runTake struct {
	at      time.Time
	epoch   int
	parents bool  // every parent was read to its end (in its epoch) then
	order   int64 // the generation the run reads under
	pending bool  // the shard's generation had not reached the row
	// reopening: order is older than the generation that keeps the row,
	// because that one's coordinators are to re-open it for an ancestor a
	// superseded generation re-opened (checker.reopening). The run is no
	// stale one: the loop is the row's, under the newer generation.
	reopening bool
}

// Stats count what a world did.
type Stats struct {
	Produced, Settled, Duplicates, GivenUp int
	Filtered                               int
	Deliveries, Takes, Checkpoints         int
	Generations                            int
}

func newChecker(tr *tracer) *checker {
	return &checker{
		tr: tr, incs: map[int64]int{}, gone: map[int]time.Time{}, bySeq: map[string]*rec{},
		sh: map[shardKey]*shardState{}, keys: map[keyKey][]*rec{}, low: map[lowKey]int{}, ruleInc: map[int64]int{}, maxOrder: map[int]int64{}, bad: map[keyKey]bool{}, rules: map[int64]map[string]*rule{}, late: map[int64]*rule{}, runs: map[runShard]runTake{}, early: map[string]bool{},
		folds: map[string]*fold{}, kept: map[string]*keptWindow{}, curRun: map[string]string{},
	}
}

// fail records a violation; the caller holds mu. It is attributed to the
// known bug that struck the shard, if any.
func (c *checker) fail(shard shardKey, format string, args ...any) {
	bug := ""
	if s := c.sh[shard]; s != nil {
		bug = s.bug
	}
	c.failBug(shard, bug, format, args...)
}

func (c *checker) failBug(shard shardKey, bug, format string, args ...any) {
	sh := ""
	if shard.id != "" {
		sh = shard.String()
	}
	v := Violation{At: time.Since(c.tr.began), Shard: sh, What: fmt.Sprintf(format, args...), Bug: bug}
	c.violations = append(c.violations, v)
	c.tr.add(sh, "CHECK", "VIOLATION: %s", v.What)
}

// incarnation registers a stream incarnation by its creation time.
func (c *checker) incarnation(createdMs int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.incs[createdMs]; ok {
		return n
	}
	c.cur = len(c.incs) + 1
	c.incs[createdMs] = c.cur
	return c.cur
}

func (c *checker) incOf(createdMs int64) int {
	if n, ok := c.incs[createdMs]; ok && createdMs != 0 {
		return n
	}
	return c.cur
}

// deleted notes that the current incarnation was deleted.
func (c *checker) deleted(inc int) {
	c.mu.Lock()
	c.gone[inc] = time.Now()
	c.mu.Unlock()
}

// shard returns (creating) a shard's state.
func (c *checker) shard(k shardKey) *shardState {
	s := c.sh[k]
	if s == nil {
		s = &shardState{key: k, lastCkpt: -1, endEpoch: -1, first: map[int]bool{}, created: c.maxOrder[k.inc]}
		c.sh[k] = s
	}
	return s
}

// shardShape notes a shard of the stream as listed: its parents, whether
// it is closed.
func (c *checker) shardShape(inc int, id string, parents []string, closed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.shard(shardKey{inc, id})
	if s.parents == nil {
		s.parents = parents
	}
	s.closed = s.closed || closed
}

// produced registers a record Kinesis acknowledged.
func (c *checker) produced(inc, key, n int, shardID, seq string, arrival time.Time, e types.PutRecordsRequestEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.shard(shardKey{inc, shardID})
	r := &rec{inc: inc, key: key, n: n, shard: s, idx: len(s.recs), seq: seq, arrival: arrival}
	if c.filters != nil {
		r.filtered = !c.filters.Match(filter.Record{Data: e.Data, PartitionKey: aws.ToString(e.PartitionKey), SequenceNumber: seq, ApproximateArrivalTimestamp: arrival})
		if r.filtered {
			c.stats.Filtered++
		}
	}
	s.recs = append(s.recs, r)
	c.bySeq[seq] = r
	kk := keyKey{inc, key}
	c.keys[kk] = append(c.keys[kk], r)
	c.stats.Produced++
}

// runKey names a run for epochs: a Lambda invocation, or a local loop
// (whose runs follow one another).
func runKey(inv *invocation, owner string) string {
	if inv != nil {
		return inv.run
	}
	return lease.LoopOwner(owner)
}

// took notes a take of a row by owner (under the store's lock).
func (c *checker) took(run, owner string, row lease.Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := shardKey{c.incOf(row.Incarnation), row.ShardID}
	s := c.shard(k)
	restarting := s.restarting()
	pending := s.cfg != nil && s.cfg.order > s.applied && !restarting
	if s.missed > s.applied && lease.LoopOwner(owner) == owner {
		// A coordinator takes a shard the generation's listing missed
		// only once its parents are read to their end, and when it was
		// not to be re-opened (nothing of it read and nobody holding it,
		// or its parents not re-opened): it reads as a child created
		// after the generation began.
		s.created, s.missed = max(s.created, s.missed), 0
	}
	// A run reads under the generation the row was last reset by; for a row
	// no generation reached yet, under the one the shard was created under
	// (or, for a loop its coordinator started while a generation was being
	// applied, that generation).
	var order int64
	reopening := false
	switch {
	case s.cfg != nil && (c.early[lease.LoopOwner(owner)] || pending && lease.LoopOwner(owner) == owner) && s.applied == 0:
		order = s.cfg.order // a loop started early (B1), under the generation being applied
	case pending:
		// A newer generation is on its way to the row: the run reads under
		// what governed the row when that generation was recorded.
		// (Its parents' rows may be reached first: they do not count.)
		order = max(s.ownOrder(), s.prior)
	case s.missed > s.applied:
		// A generation whose listing missed the shard is on its way to the
		// row (when it re-opened a parent): the run reads under what
		// governed the row when that generation was recorded. A newer one
		// that lists it and keeps it as it is owes nothing sooner: its
		// coordinators re-open it while the ancestor the missed one
		// re-opened is still to be read (reopenedParent; world 1,000,840).
		order = max(s.ownOrder(), s.missedPrior)
		if s.kept > s.missed && c.reopening(k, s) {
			order, reopening = s.beforeReopening(), true
		}
	case restarting:
		// Any run may take the row before the start lands (a coordinator
		// of the older generation): it reads under what governed the row.
		order = max(s.ownOrder(), s.prior)
	case c.reopening(k, s):
		// A newer generation keeps the row, but one it superseded before
		// reaching the row re-opened an ancestor: the coordinator re-opens
		// the row too (reopenedParent), and until that start lands the run
		// reads under what governed the row when the superseded one was
		// recorded.
		order, reopening = s.beforeReopening(), true
	default:
		order = c.readOrder(k, s)
	}
	parents := true
	for _, p := range s.parents {
		ps := c.sh[shardKey{k.inc, p}]
		// Read to its end in its epoch, or in the one before when a newer
		// generation than the one this run reads under re-opened it since
		// (the run delivers under the old generation until it is revoked).
		parents = parents && ps != nil && ps.endEpoch >= 0 &&
			(ps.endEpoch == ps.epoch || (ps.applied > order && ps.endEpoch == ps.epoch-1))
	}
	s.taken = true
	c.curRun[run+"|"+k.String()] = owner
	c.runs[runShard{run, k}] = runTake{at: time.Now(), epoch: s.epoch, order: order, pending: pending, parents: parents, reopening: reopening}
	if pending && lease.LoopOwner(owner) == owner {
		c.early[owner] = true // a coordinator's take for a new loop
	}
	if !parents && lease.LoopOwner(owner) == owner && s.bug == "" {
		// A coordinator took a child whose parents are not read to their
		// end: it decided on rows read before a new start re-opened them.
		s.bug = "B4"
		c.tr.add(k.String(), owner, "BUG B4: a coordinator took the child while its parents %v are not read to their end", s.parents)
	}
	c.stats.Takes++
}

// readOrder is the generation a run of shard s reads under when no newer
// generation is on its way to its row: the one the row was last reset by,
// or the one the shard was created under, or a newer one that kept the row
// as it was; for a child, at least the newest that reached its parents (it
// may have appeared after that generation's listing, or before the
// incarnation's first generation was recorded: a reshard of a stream
// created again).
func (c *checker) readOrder(k shardKey, s *shardState) int64 {
	order := s.ownOrder()
	for _, p := range s.parents {
		if ps := c.sh[shardKey{k.inc, p}]; ps != nil {
			order = max(order, ps.applied)
		}
	}
	return order
}

// priorOrder is what a run of shard s's row reads under now, for a newer
// generation recorded on its way to the row (prior): readOrder, except
// while the re-opening of an older generation whose listing missed the row
// has not landed (missed): then what the row read under when that one was
// recorded, as a run taken meanwhile does (world 2141). The parent's row
// that older generation re-opened does not count: the row never read
// under it.
func (c *checker) priorOrder(k shardKey, s *shardState) int64 {
	if s.missed > s.applied {
		return max(s.ownOrder(), s.missedPrior)
	}
	return c.readOrder(k, s)
}

// ownOrder is the generation shard s's row reads under by its own
// history: the one that last reset it, else the one it was created under,
// or a newer one that kept it as it was.
func (s *shardState) ownOrder() int64 {
	return max(s.appliedOrCreated(), s.kept)
}

// appliedOrCreated is the generation that last reset shard s's row, else
// the one it was created under.
func (s *shardState) appliedOrCreated() int64 {
	if s.applied == 0 {
		return s.created
	}
	return s.applied
}

// beforeReopening is what shard s's row reads under until the coordinator
// re-opens it (reopening): what governed it when the superseded generation
// was recorded (or the one whose listing missed it).
func (s *shardState) beforeReopening() int64 {
	if s.missed > s.applied {
		return max(s.appliedOrCreated(), s.missedPrior)
	}
	return max(s.appliedOrCreated(), s.prior)
}

// reopening reports whether a generation that keeps shard s's row as it
// is, newer than any start that reached the row, superseded one that
// reached an ancestor of s and not s, and that ancestor is still to be
// read to its end: its coordinator re-opens the row at the ancestor's
// start (reopenedParent). Once every such ancestor is read to its end no
// re-opening comes: a row that had not gone on meanwhile (no checkpoint,
// no holder) is kept, and reads under the generation that keeps it.
func (c *checker) reopening(k shardKey, s *shardState) bool {
	if s.kept <= s.applied || (len(s.void) == 0 && s.missed <= s.applied) {
		return false // before the clone: deliveries ask this of every row
	}
	voids := maps.Clone(s.void)
	if s.missed > s.applied {
		// A generation whose listing missed the row re-opens it as one
		// that did not reach it would.
		if voids == nil {
			voids = map[int64]bool{}
		}
		voids[s.missed] = true
	}
	seen := map[string]bool{}
	var reached func(ids []string) bool
	reached = func(ids []string) bool {
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			a := c.sh[shardKey{k.inc, id}]
			if a == nil {
				continue
			}
			for v := range voids {
				if a.applied >= v && v > s.applied && a.endEpoch != a.epoch {
					return true
				}
			}
			if reached(a.parents) {
				return true
			}
		}
		return false
	}
	return reached(s.parents)
}

// deliveryOrder is the generation a delivery of take's run on shard s
// reads under now, and whether it reads so until the row is re-opened
// (runTake.reopening). A run taken under the generation that keeps the row
// delivers, once a start of one that generation superseded reached an
// ancestor after the run was taken (a pass that outlived its supersession
// landing before the keeping one's, world 437), as a run taken now would:
// under what governed the row before, until the coordinator re-opens it.
func (c *checker) deliveryOrder(s *shardState, take runTake) (int64, bool) {
	if take.reopening || !c.reopening(s.key, s) {
		return take.order, take.reopening
	}
	o := s.beforeReopening()
	if o >= take.order {
		return take.order, false
	}
	return o, true
}

// carriesEnd reports whether seqs hold the last record of a closed shard
// of the stream there now.
func (c *checker) carriesEnd(shardID string, seqs []string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sh[shardKey{c.cur, shardID}]
	if s == nil || !s.closed || len(s.recs) == 0 {
		return false
	}
	return slices.Contains(seqs, s.recs[len(s.recs)-1].seq)
}

// rowAt is what a generation's coordinator found of a shard's row: whether
// it had one of the generation's incarnation, and whether it was read to
// its end.
type rowAt struct{ existed, finished bool }

// generation notes a generation record written, with the rows of the
// shards it lists as they were then.
func (c *checker) generation(g lease.Generation, rows map[string]rowAt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, seen := c.rules[g.Order]; seen {
		return // the same generation marked applied
	}
	c.gens = append(c.gens, g)
	c.stats.Generations++
	inc := c.incOf(g.Incarnation)
	tip, tipOK := timestampOf(g.Tip)
	if now := time.Now(); tipOK && tip.After(now) {
		// Pinned on a clock that runs ahead of Kinesis's: a start at the
		// tip skips what arrives until it, which no rule below can owe.
		c.fail(shardKey{}, "generation %d is recorded at %s with its tip at %s, ahead of it: what arrives in between is skipped", g.Order, fmtTime(now), fmtTime(tip))
	}
	rules := map[string]*rule{}
	for _, id := range g.Shards {
		s := c.shard(shardKey{inc, id})
		r, changes := c.ruleFor(g, id, rows[id], tip, tipOK, s)
		if s.restarting() {
			// A newer generation lists the shard: it decides, not the
			// restart of one that did not.
			s.cfg, s.cfgEpoch, s.restart = s.row, s.epoch, 0
		}
		if !changes {
			s.kept = max(s.kept, g.Order)
			if s.cfg != nil && s.cfg.order > s.applied && s.cfg.order < g.Order {
				// The generation before this one had not reached the row,
				// and this one keeps the row as it is: the newest wins.
				if s.void == nil {
					s.void = map[int64]bool{}
				}
				s.void[s.cfg.order] = true
				s.cfg, s.cfgEpoch = s.row, s.epoch
			}
			continue
		}
		rules[id] = &r
		rr := r
		if s.cfg == nil || s.cfg.order <= s.applied {
			// Until this generation reaches the row, its runs read under
			// what governs it now.
			s.prior = c.priorOrder(shardKey{inc, id}, s)
		}
		s.cfg, s.cfgEpoch = &rr, s.epoch
	}
	listed := make(map[string]bool, len(g.Shards))
	for _, id := range g.Shards {
		listed[id] = true
	}
	for k, s := range c.sh {
		if k.inc != inc || listed[k.id] || s.applied >= g.Order {
			continue
		}
		if !s.taken {
			// A shard the listing missed (a reshard UPDATING when it was
			// made) that no run has taken: the coordinators read it as a
			// child created after the generation began, or, when an older
			// generation's late start is on its row, keep the row as it is
			// (reopenedParent re-opens only a row read or held).
			s.created = max(s.created, g.Order)
			if s.applied > 0 {
				s.kept = max(s.kept, g.Order)
			}
			continue
		}
		if s.missed <= s.applied {
			s.missedPrior = c.readOrder(k, s)
		}
		s.missed = g.Order
	}
	c.rules[g.Order] = rules
	c.ruleInc[g.Order] = inc
	if at, ok := timestampOf(g.Start); ok && tipOK && at.After(tip) && g.ID != lease.DefaultGeneration {
		c.late[g.Order] = &rule{order: g.Order, kind: owesFromArrival, at: at, desc: "from " + fmtTime(at) + " (created after its listing)"}
	}
	c.maxOrder[inc] = max(c.maxOrder[inc], g.Order)
	for k, s := range c.sh {
		if k.inc == inc && !listed[k.id] {
			c.owesRestart(s)
		}
	}
}

// oweUnlessNewer makes r, a start that landed on s's row, what the
// configuration owes s, unless a newer generation, recorded meanwhile,
// covers the shard (a coordinator that read the record before it wrote
// the older start): the configuration then owes the newer one's start,
// and its write, when it lands, opens its epoch.
func (s *shardState) oweUnlessNewer(r *rule) {
	if s.cfg == nil || s.cfg.order <= r.order {
		s.cfg, s.cfgEpoch = r, s.epoch
	}
}

// restarting reports whether the configuration owes shard s a restart
// (see restart) that has not reached its row yet.
func (s *shardState) restarting() bool {
	return s.cfg != nil && s.cfg.order > s.applied && s.cfg.order == s.restart
}

// owesRestart notes that the incarnation's newest generation owes shard s
// as a child created after it began (from its first record, or from its
// own start when that is late), when it did not list the shard and the
// row carries an older generation's start later than that (its tip, or
// its late start): records it owes may lie before the older start. Its
// coordinators start such a row again (reopenMissedChildren's childStart),
// whatever was read from it and whichever run holds it. A row re-opened at
// a parent's start instead gets its rule when that start lands (setStart).
func (c *checker) owesRestart(s *shardState) {
	o := c.maxOrder[s.key.inc]
	if s.applied == 0 || s.applied >= o || s.restart >= o || s.row == nil || s.row.kind != owesFromArrival {
		return
	}
	i := slices.IndexFunc(c.gens, func(g lease.Generation) bool { return g.Order == o })
	if i < 0 || slices.Contains(c.gens[i].Shards, s.key.id) {
		return
	}
	r := rule{order: o, kind: owesAll, desc: "created after its listing, from its first record"}
	from, ok := timestampOf(c.gens[i].Tip)
	if l := c.late[o]; l != nil {
		r, from, ok = *l, l.at, true
	}
	if !ok || !s.row.at.After(from) {
		return // the older start owes all it owes: a missed shard holds only later records
	}
	if s.cfg == nil || s.cfg.order <= s.applied {
		s.prior = c.priorOrder(s.key, s)
	}
	s.restart, s.cfg, s.cfgEpoch = o, &r, s.epoch
}

// ruleAt is the rule shard s was under in generation order o: that of the
// latest generation up to o that changed it; nil (every record) when none
// did.
func (c *checker) ruleAt(s *shardState, o int64) *rule {
	for ; o > 0; o-- {
		if c.ruleInc[o] != s.key.inc {
			continue
		}
		if r, ok := c.rules[o][s.key.id]; ok && !s.void[o] {
			return r
		}
		if r, ok := c.late[o]; ok && s.late == o {
			return r
		}
	}
	return s.pin
}

// ruleFor is what generation g owes on shard id; changes is false when g
// keeps the shard as it was (a row that exists, under the default
// generation or a sequence start naming another shard).
func (c *checker) ruleFor(g lease.Generation, id string, row rowAt, tip time.Time, tipOK bool, s *shardState) (rule, bool) {
	fromTip := func(why string) (rule, bool) {
		if row.existed {
			// The row decides (its checkpoint, or where its reader pinned
			// its opening; see pinned).
			return rule{}, false
		}
		if !tipOK {
			c.fail(s.key, "generation %d (%s) has no timestamp tip: %q", g.Order, g.ID, g.Tip)
			return rule{order: g.Order, kind: owesAll, desc: why}, true
		}
		return rule{order: g.Order, kind: owesFromArrival, at: tip, desc: why + " from tip " + fmtTime(tip), ifAbsent: true}, true
	}
	if g.ID == lease.DefaultGeneration {
		return fromTip("default generation")
	}
	p, err := reader.ParsePosition(g.Start)
	if err != nil {
		c.fail(s.key, "generation %d start %q does not parse: %v", g.Order, g.Start, err)
		return rule{order: g.Order, kind: owesAll}, true
	}
	switch p.Kind {
	case reader.Horizon:
		return rule{order: g.Order, kind: owesAll, desc: "horizon"}, true
	case reader.Timestamp:
		return rule{order: g.Order, kind: owesFromArrival, at: p.At, desc: "from " + fmtTime(p.At)}, true
	case reader.Sequence:
		if p.ShardID == id {
			if row.existed && row.finished {
				return rule{}, false // a shard read to its end is not read again
			}
			return rule{order: g.Order, kind: owesFromSeq, idx: c.recordIdx(p.Seq, s), desc: "from its record " + short(p.Seq)}, true
		}
		return fromTip("sequence start of another shard")
	}
	c.fail(s.key, "generation %d records start %q: a latest start is recorded pinned", g.Order, g.Start)
	return rule{order: g.Order, kind: owesAll}, true
}

func timestampOf(pos string) (time.Time, bool) {
	p, err := reader.ParsePosition(pos)
	if err != nil || p.Kind != reader.Timestamp {
		return time.Time{}, false
	}
	return p.At, true
}

// setStart notes a start recorded on a row (changed: it was written),
// with the row as it is now.
func (c *checker) setStart(shardID string, st lease.Start, changed bool, row lease.Lease) {
	if !changed {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := shardKey{c.incOf(st.Incarnation), shardID}
	s := c.shard(k)
	if st.Keep {
		// A keep raises the row's order and changes nothing it owes: the
		// generation's record said it keeps the row (generation), or its
		// rule follows an older start that landed first (ifAbsent below).
		// But a row kept with no checkpoint and no holder is read from its
		// start again, after its parents, which the generation may have
		// re-opened (reopenedParent leaves such a row): what it delivered
		// before counts no more as first deliveries, as on a row re-opened
		// (world 31).
		if row.Checkpoint == "" && !row.Held() && len(s.parents) > 0 {
			c.reset(s)
			s.cfgEpoch = s.epoch
		}
		return
	}
	s.applied = max(s.applied, st.Order)
	if !st.Finished && !st.ClearCheckpoint && !st.Fresh && row.Finished() {
		// A start that keeps the checkpoint (latest, a sequence start) on a
		// shard read to its end: it is not read again, and what it
		// delivered stands. The shard may have reached its end after the
		// generation was recorded (its rule then owed the start): the
		// sequence start of the shard keeps the row, as it does one
		// finished when it is recorded (ruleFor), so what governed the row
		// before is what is owed, on the row and by its children's first
		// deliveries. (A timestamp rule owes nothing after a shard's end,
		// unless the row was read under a later one: below.)
		r, ok := c.rules[st.Order][shardID]
		if ok && c.ruleInc[st.Order] == k.inc && r.kind == owesFromSeq {
			delete(c.rules[st.Order], shardID)
		}
		if s.cfg != nil && s.cfg.order == st.Order && !(ok && skippedFrom(s.row, r)) {
			s.cfg, s.cfgEpoch = s.row, s.epoch
		}
		// Else the shard was read to its end under a start later than this
		// one's (an older generation's start in the future): the records
		// between them, which it skipped, are still owed, in any epoch (the
		// coordinator re-opens such a row: world 300).
		return
	}
	c.reset(s)
	if r, ok := c.rules[st.Order][shardID]; ok {
		rr := *r
		s.row = &rr
		if s.void[st.Order] {
			// Superseded before it reached the row, its start landed after
			// all: the row reads under it, unless a newer generation that
			// changes the row was recorded since and has yet to reach it
			// (world 831): that one still decides.
			delete(s.void, st.Order)
			if s.cfg == nil || s.cfg.order < st.Order || s.cfg.order <= s.applied {
				s.cfg = &rr
			}
		}
		if s.cfg != nil && s.cfg.order == r.order {
			s.cfgEpoch = s.epoch
		}
	} else if r, ok := c.late[st.Order]; ok && st.IfAbsent && c.ruleInc[st.Order] == k.inc {
		rr := *r
		s.row, s.late = &rr, st.Order
		s.oweUnlessNewer(&rr) // a coordinator may have written the older one's late start after a newer record
		// A newer one that did not list it starts it again.
		c.owesRestart(s)
	} else if rules, ok := c.rules[st.Order]; ok && st.ClearCheckpoint && c.ruleInc[st.Order] == k.inc {
		// A generation that keeps the row re-opened it at the start of a
		// parent that a generation it superseded re-opened (the
		// coordinator's reopenedParent): the row now reads under that
		// start, everything from it owed again.
		rr := rule{order: st.Order, kind: owesAll, desc: "re-opened, its parent re-opened, at " + st.Position}
		if p, err := reader.ParsePosition(st.Position); err == nil {
			switch p.Kind {
			case reader.Timestamp:
				rr.kind, rr.at = owesFromArrival, p.At
			case reader.Sequence:
				rr.kind, rr.idx = owesFromSeq, c.recordIdx(p.Seq, s)
			}
		}
		s.startedAt(rules, shardID, st.Order, rr)
	} else if p, err := reader.ParsePosition(st.Position); err == nil && p.Kind == reader.Sequence && p.ShardID == shardID &&
		c.rules[st.Order] != nil && c.ruleInc[st.Order] == k.inc {
		// A sequence start naming the shard, whose generation kept the row
		// when it was recorded (read to its end), decided by a pass that
		// read the row re-opened since by a generation it superseded (its
		// start landing late): the row reads from the named record, the
		// superseded one's start replaced (world 1,001,350).
		s.startedAt(c.rules[st.Order], shardID, st.Order, rule{order: st.Order, kind: owesFromSeq, idx: c.recordIdx(p.Seq, s), desc: "from its record " + short(p.Seq)})
	}
	if nr := s.cfg; nr != nil && nr.ifAbsent && nr.order > st.Order && nr.order > s.applied && s.row != nil {
		// A newer generation that opens the shard only where it has no row
		// was recorded before this older start landed (a pass still
		// applying the older one wrote it late): the newer one's write
		// finds the row, and keeps it as this start made it (world 1625).
		s.kept = max(s.kept, nr.order)
		s.cfg, s.cfgEpoch = s.row, s.epoch
	}
	if st.Finished {
		c.shardEnd(s, "generation "+st.Generation)
	}
}

// skippedFrom reports whether a shard read under row's rule skipped
// records that r, a timestamp start, owes: row opens at a later time.
func skippedFrom(row, r *rule) bool {
	return r.kind == owesFromArrival && row != nil && row.kind == owesFromArrival && row.at.After(r.at)
}

// startedAt makes rr, the rule of a start of generation order that landed
// on shard id's row with no rule recorded for it, the generation's rule
// for the row and what the row reads under now (unless a newer generation,
// recorded meanwhile, covers it: a coordinator may have written the start
// after a newer record).
func (s *shardState) startedAt(rules map[string]*rule, id string, order int64, rr rule) {
	stored := rr
	rules[id] = &stored
	delete(s.void, order)
	s.row = &rr
	s.oweUnlessNewer(&rr)
}

// recordIdx is the index in shard s of the record seq names, -1 when it
// is not one of s's.
func (c *checker) recordIdx(seq string, s *shardState) int {
	if x := c.bySeq[seq]; x != nil && x.shard == s {
		return x.idx
	}
	return -1
}

// reset starts a new epoch on a row.
func (c *checker) reset(s *shardState) {
	s.epoch++
	s.lastCkpt, s.verified, s.pendingBy = -1, 0, nil
}

// pinned notes a reader's pin of where it opened a shard at its tip. On a
// row no start reached, of a shard without parents (a stale configuration
// reading a stream created again changes nothing; a loop started early,
// bug B1), the first pin is where the row opens until a start reaches it:
// its checkpoints are judged from it, and, when no generation covers the
// shard, what it owes.
func (c *checker) pinned(row lease.Lease, start string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.shard(shardKey{c.incOf(row.Incarnation), row.ShardID})
	if at, ok := timestampOf(start); ok {
		if now := time.Now(); at.After(now) {
			c.fail(s.key, "pinned its opening at %s, ahead of the moment it was written (%s): what arrives in between is skipped", fmtTime(at), fmtTime(now))
		}
	}
	if s.row != nil || s.pin != nil || len(s.parents) > 0 {
		return // a start reached the row, or it was pinned already, or a child
	}
	at, ok := timestampOf(start)
	if !ok {
		c.fail(s.key, "pinned %q, not a timestamp", start)
		return
	}
	r := rule{kind: owesFromArrival, at: at, desc: "no start on its row: from its first pin " + fmtTime(at)}
	s.pin = &r
}

// deletedRow notes a row deleted.
func (c *checker) deletedRow(row lease.Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reset(c.shard(shardKey{c.incOf(row.Incarnation), row.ShardID}))
}

// settledUnder reports whether x was settled (or given up) in epoch e or
// later.
func settledUnder(x *rec, e int) bool {
	for _, st := range x.settles {
		if st.epoch >= e {
			return true
		}
	}
	return false
}

// checkpoint checks a checkpoint written on a row by owner in run (under
// the store's lock).
func (c *checker) checkpoint(run, owner string, row lease.Lease, seq string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ev++
	c.stats.Checkpoints++
	k := shardKey{c.incOf(row.Incarnation), row.ShardID}
	s := c.shard(k)
	rl := rowRule(s)
	if seq == lease.ShardEnd {
		if !s.closed {
			c.fail(k, "%s wrote SHARD_END on a shard that is not closed", c.tr.nameLocked(owner))
		}
		for _, x := range s.recs[s.verified:] {
			if rl.owes(x) && !settledUnder(x, s.epoch) {
				c.fail(k, "%s wrote SHARD_END while record %s (key %d #%d, owed: %s) is not settled in epoch %d", c.tr.nameLocked(owner), short(x.seq), x.key, x.n, rl.describe(), s.epoch)
				break
			}
		}
		s.verified = len(s.recs)
		c.shardEnd(s, c.tr.nameLocked(owner))
		return
	}
	x := c.bySeq[seq]
	switch {
	case x == nil:
		c.fail(k, "%s checkpointed %s, which is no record written", c.tr.nameLocked(owner), seq)
		return
	case x.shard != s && x.shard.key.id == s.key.id && x.shard.key.inc > s.key.inc:
		// A run of the deleted stream read the stream created again (B5).
		c.failBug(k, "B5", "%s checkpointed %s, a record of shard %s (the stream created again) on the row of the deleted one", c.tr.nameLocked(owner), short(seq), x.shard.key)
		return
	case x.shard != s:
		c.fail(k, "%s checkpointed %s, a record of shard %s", c.tr.nameLocked(owner), short(seq), x.shard.key)
		return
	}
	if s.lastCkpt == len(s.recs) { // SHARD_END in this epoch
		c.fail(k, "%s moved the checkpoint back from SHARD_END to %s within one generation", c.tr.nameLocked(owner), short(seq))
	} else if x.idx < s.lastCkpt {
		c.fail(k, "%s moved the checkpoint back from %s to %s within one generation", c.tr.nameLocked(owner), short(s.recs[s.lastCkpt].seq), short(seq))
	}
	s.lastCkpt = x.idx
	c.pending(s, run, owner, x.idx)
	for ; s.verified <= x.idx; s.verified++ {
		y := s.recs[s.verified]
		if rl.owes(y) && !settledUnder(y, s.epoch) {
			c.fail(k, "%s checkpointed %s past record %s (key %d #%d, owed: %s), not settled in epoch %d", c.tr.nameLocked(owner), short(seq), short(y.seq), y.key, y.n, rl.describe(), s.epoch)
			s.verified = x.idx + 1
			break
		}
	}
}

// pending notes a checkpoint of record idx that owner's loop wrote or
// tried to write.
func (c *checker) pending(s *shardState, run, owner string, idx int) {
	loop := lease.LoopOwner(owner)
	if p, ok := s.pendingBy[loop]; !ok || p.idx < idx {
		if s.pendingBy == nil {
			s.pendingBy = map[string]position{}
		}
		s.pendingBy[loop] = position{idx: idx, run: run, at: time.Now()}
	}
}

// checkpointFailed notes a checkpoint of seq that owner tried to write and
// that failed before it was made.
func (c *checker) checkpointFailed(run, owner, shardID, seq string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	x := c.bySeq[seq]
	if x == nil || x.shard.key.id != shardID {
		return // SHARD_END, or not a record: nothing pending to track
	}
	c.pending(x.shard, run, owner, x.idx)
}

// shardEnd notes SHARD_END on s; the caller holds mu.
func (c *checker) shardEnd(s *shardState, by string) {
	s.endEpoch = s.epoch
	s.lastCkpt = len(s.recs)
	c.tr.add(s.key.String(), "", "SHARD_END by %s (epoch %d)", by, s.epoch)
}

func (r *rule) describe() string {
	if r == nil {
		return "every record (no generation covers the shard)"
	}
	return fmt.Sprintf("generation %d, %s", r.order, r.desc)
}

// delivery notes a call to the target for the records seqs of a shard, by
// owner (the loop) in run, from start to now; settled are the first n
// records the target settled.
func (c *checker) delivery(dep, owner, run, shardID string, seqs []string, start time.Time, n int) {
	if len(seqs) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	first := c.bySeq[seqs[0]]
	if first == nil {
		c.fail(shardKey{c.cur, shardID}, "%s delivered %s, which is no record written", c.tr.nameLocked(owner), seqs[0])
		return
	}
	s := first.shard
	c.stats.Deliveries++
	s.delivs = append(s.delivs, interval{owner: owner, start: start, end: now})
	take, known := c.runs[runShard{run, s.key}]
	if known {
		take.order, take.reopening = c.deliveryOrder(s, take)
	}
	c.keyDelivery(dep, owner, seqs, start, now, take.order, take.reopening)
	epoch := take.epoch
	if !known {
		if _, old := c.runs[runShard{run, shardKey{s.key.inc - 1, s.key.id}}]; old && s.bug == "" {
			// A run that took the row of the deleted stream reads the stream
			// created again under the same shard id (B5).
			s.bug = "B5"
			c.tr.add(s.key.String(), owner, "BUG B5: a run of the deleted stream's shard reads the stream created again")
		}
		c.fail(s.key, "%s delivered without having taken the row", c.tr.nameLocked(owner))
	}
	if known && take.pending && c.early[owner] && s.bug == "" {
		// Not itself a broken promise (what it delivers may all be owed, or
		// read again once the start lands), but every violation on the
		// shard from now on is attributed to it.
		s.bug = "B1"
		c.tr.add(s.key.String(), owner, "BUG B1: delivers under generation %d before its start reached the row: its coordinator started the loop while the generation was being applied", s.cfg.order)
	}
	if known && epoch == s.epoch && !s.first[epoch] {
		// The child's first delivery of the epoch: its run must have taken
		// the row once every parent was read to its end.
		s.first[epoch] = true
		if !take.parents {
			c.fail(s.key, "%s delivered the child's first batch of epoch %d, having taken it before its parents %v were read to their end", c.tr.nameLocked(owner), epoch, s.parents)
		}
	}
	if p, ok := s.pendingBy[lease.LoopOwner(owner)]; ok && known && first.idx <= p.idx && (p.run == run || take.at.After(p.at)) && s.bug == "" {
		// The loop reads again what it settled and checkpointed (or tried
		// to): it reopened behind its own position. The reader does so after
		// a checkpoint it did not hear written (B3).
		s.bug = "B3"
		c.tr.add(s.key.String(), owner, "BUG B3: reopened behind its own checkpoint %s: delivers %s again", short(s.recs[p.idx].seq), short(first.seq))
	}
	if c.filters != nil {
		for _, seq := range seqs {
			if x := c.bySeq[seq]; x != nil && x.filtered {
				c.fail(s.key, "%s delivered record %s (key %d #%d), which matches none of the filters", c.tr.nameLocked(owner), short(seq), x.key, x.n)
				break
			}
		}
	}
	for i, seq := range seqs[:n] {
		x := c.bySeq[seq]
		if x == nil || x.shard != s {
			c.fail(s.key, "%s delivered record %d as %s, which is not a record of this shard", c.tr.nameLocked(owner), i, seq)
			continue
		}
		c.ev++
		if len(x.settles) == 0 {
			c.stats.Settled++
			if known && epoch == s.epoch {
				c.firstDelivery(x, owner, take.order)
			}
		} else {
			c.stats.Duplicates++
		}
		x.settles = append(x.settles, settle{ev: c.ev, at: now, epoch: epoch})
	}
}

// firstDelivery checks the first delivery ever of x, by a run of its
// shard's current epoch reading under generation order: every earlier
// record of its key that the same generation owes must have been settled
// (or given up) already.
func (c *checker) firstDelivery(x *rec, owner string, order int64) {
	kk := keyKey{x.inc, x.key}
	if c.bad[kk] {
		return
	}
	xs := c.keys[kk]
	// low moves past the records settled or not owed under order.
	lk := lowKey{kk, order}
	lo := c.low[lk]
	for lo < len(xs) && (len(xs[lo].settles) > 0 || !c.ruleAt(xs[lo].shard, order).owes(xs[lo])) {
		lo++
	}
	c.low[lk] = lo
	if lo >= x.n {
		return
	}
	for _, y := range xs[lo:x.n] {
		if len(y.settles) > 0 {
			continue
		}
		rl := c.ruleAt(y.shard, order)
		if _, gone := c.gone[y.inc]; !gone && rl.owes(y) {
			c.bad[kk] = true
			c.failBug(x.shard.key, either(x.shard.bug, y.shard.bug), "%s delivered record %s (key %d #%d) for the first time before record %s (#%d, shard %s, owed: %s) was ever settled",
				c.tr.nameLocked(owner), short(x.seq), x.key, x.n, short(y.seq), y.n, y.shard.key, rl.describe())
			return
		}
	}
}

// givenUp notes a batch given up and accepted by the destination.
//
// The records given up are those of the record's payload (the invocation
// event of the batch): with parallel lanes a batch holds its lane's records
// only, so the range from StartSequenceNumber to EndSequenceNumber holds
// other lanes' records too, which are not given up.
func (c *checker) givenUp(owner, run string, fr reader.FailureRecord, retryLimit bool, ageLimit bool) {
	payload, err := fr.Payload()
	c.mu.Lock()
	defer c.mu.Unlock()
	info := fr.KinesisBatchInfo
	a, b := c.bySeq[info.StartSequenceNumber], c.bySeq[info.EndSequenceNumber]
	if a == nil || b == nil || a.shard != b.shard || a.shard.key.id != info.ShardID {
		c.fail(shardKey{c.cur, info.ShardID}, "%s gave up records %s to %s, which are not records of the shard", c.tr.nameLocked(owner), info.StartSequenceNumber, info.EndSequenceNumber)
		return
	}
	s := a.shard
	seqs := fieldValues(payload, `"sequenceNumber":"`)
	switch {
	case err != nil:
		c.fail(s.key, "%s gave up a batch whose payload does not build: %v", c.tr.nameLocked(owner), err)
		return
	case len(seqs) == 0 || seqs[0] != info.StartSequenceNumber || seqs[len(seqs)-1] != info.EndSequenceNumber || len(seqs) != int(info.BatchSize):
		c.fail(s.key, "%s gave up records %s to %s (%d), but its payload holds %d records", c.tr.nameLocked(owner), short(info.StartSequenceNumber), short(info.EndSequenceNumber), info.BatchSize, len(seqs))
		return
	}
	switch cond := fr.RequestContext.Condition; {
	case cond == reader.ConditionRetryAttemptsExhausted && !retryLimit:
		c.fail(s.key, "%s gave records up for %s with no retry limit set", c.tr.nameLocked(owner), cond)
	case cond == reader.ConditionRecordAgeExceeded && !ageLimit:
		c.fail(s.key, "%s gave records up for %s with no age limit set", c.tr.nameLocked(owner), cond)
	}
	epoch := c.runs[runShard{run, s.key}].epoch
	for _, seq := range seqs {
		x := c.bySeq[seq]
		if x == nil || x.shard != s {
			c.fail(s.key, "%s gave up %s, not a record of the shard", c.tr.nameLocked(owner), seq)
			continue
		}
		if x.filtered {
			c.fail(s.key, "%s gave up record %s (key %d #%d), which matches none of the filters", c.tr.nameLocked(owner), short(seq), x.key, x.n)
		}
		c.ev++
		c.stats.GivenUp++
		if len(x.settles) == 0 {
			c.stats.Settled++
		}
		x.settles = append(x.settles, settle{ev: c.ev, at: time.Now(), epoch: epoch, givenUp: true})
	}
}

// owedUnsettled lists the records owed and not settled in their epoch, of
// incarnations not deleted (at most limit of them; all when limit < 0).
func (c *checker) owedUnsettled(limit int) []*rec {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owedUnsettledLocked(limit, func(int) bool { return true })
}

func (c *checker) owedUnsettledLocked(limit int, inc func(int) bool) []*rec {
	var out []*rec
	for _, s := range c.sh {
		if _, gone := c.gone[s.key.inc]; gone || !inc(s.key.inc) {
			continue
		}
		for _, x := range s.recs {
			if cfgRule(s).owes(x) && !settledUnder(x, s.cfgEpoch) {
				out = append(out, x)
				if limit >= 0 && len(out) >= limit {
					return out
				}
			}
		}
	}
	return out
}

// owedCount is how many records owed of incarnation inc are not settled.
func (c *checker) owedCount(inc int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.owedUnsettledLocked(-1, func(i int) bool { return i == inc }))
}

// drained reports whether every record owed of incarnation inc is settled.
func (c *checker) drained(inc int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.owedUnsettledLocked(1, func(i int) bool { return i == inc })) == 0
}

// finish runs the end-of-world checks.
func (c *checker) finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	lost := c.owedUnsettledLocked(-1, func(int) bool { return true })
	if len(lost) > 0 {
		sort.Slice(lost, func(i, j int) bool {
			if lost[i].shard.key != lost[j].shard.key {
				return lost[i].shard.key.String() < lost[j].shard.key.String()
			}
			return lost[i].idx < lost[j].idx
		})
		byShard := map[shardKey][]*rec{}
		var order []shardKey
		for _, x := range lost {
			if byShard[x.shard.key] == nil {
				order = append(order, x.shard.key)
			}
			byShard[x.shard.key] = append(byShard[x.shard.key], x)
		}
		for _, k := range order {
			xs := byShard[k]
			s := c.sh[k]
			x := xs[0]
			c.fail(k, "%d records owed were never settled (%s), the first %s (key %d #%d, arrived %s, index %d of %d; %d settles in earlier epochs; epoch %d)",
				len(xs), cfgRule(s).describe(), short(x.seq), x.key, x.n, fmtTime(x.arrival), x.idx, len(s.recs), len(x.settles), s.cfgEpoch)
		}
	}

	// Per key, first deliveries in the epoch that owes them follow write
	// order.
	for kk, xs := range c.keys {
		if _, gone := c.gone[kk.inc]; gone || c.bad[kk] {
			continue
		}
		var prev *rec
		var prevEv uint64
		for _, x := range xs {
			s := x.shard
			if !cfgRule(s).owes(x) {
				continue
			}
			ev := firstIn(x, s.cfgEpoch)
			if ev == 0 {
				continue
			}
			if prev != nil && ev < prevEv {
				c.failBug(s.key, either(s.bug, prev.shard.bug), "key %d: record #%d (%s) first delivered before record #%d (%s, shard %s)", kk.key, x.n, short(x.seq), prev.n, short(prev.seq), prev.shard.key)
				break
			}
			prev, prevEv = x, ev
		}
	}

	c.checkFinals()
	c.keyChecks()

	// No two loop owners deliver a shard at overlapping times.
	for k, s := range c.sh {
		ds := slices.Clone(s.delivs)
		sort.SliceStable(ds, func(i, j int) bool { return ds[i].start.Before(ds[j].start) })
		ends := map[string]time.Time{}
		for _, d := range ds {
			for o, end := range ends {
				if o != d.owner && end.After(d.start) {
					c.fail(k, "%s delivered from %s while %s's delivery ran until %s", c.tr.nameLocked(d.owner), fmtTime(d.start), c.tr.nameLocked(o), fmtTime(end))
				}
			}
			if d.end.After(ends[d.owner]) {
				ends[d.owner] = d.end
			}
		}
	}
}

// firstIn is the event of x's first settle in epoch e or later (0: none).
// A record given up under the policy takes its place in its key's order
// when it is given up, as the check at delivery time does: its disposition
// is final then, and a delivery of it after a takeover (the row's
// checkpoint behind it, as at-least-once allows) is a duplicate.
func firstIn(x *rec, e int) uint64 {
	for _, st := range x.settles {
		if st.epoch >= e {
			return st.ev
		}
	}
	return 0
}

// short abbreviates a sequence number for the trace: the stream's
// counter in it, as the in-memory Kinesis writes them ("49", 24 digits of
// counter, then stream and shard).
func short(seq string) string {
	if len(seq) == 56 && strings.HasPrefix(seq, "49") {
		n := strings.TrimLeft(seq[2:26], "0")
		if n == "" {
			n = "0"
		}
		return "#" + n
	}
	return seq
}

func fmtTime(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// nameLocked is name under the tracer's lock.
func (t *tracer) nameLocked(who string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.name(who)
}

// rowRule is the rule a shard's row is under: the last start recorded on
// it, else its first pin, else every record (a child).
func rowRule(s *shardState) *rule {
	if s.row != nil {
		return s.row
	}
	return s.pin
}

// cfgRule is what the configuration owes of a shard: the last generation
// that covered it, else (none did) its first pin, else every record.
func cfgRule(s *shardState) *rule {
	if s.cfg != nil {
		return s.cfg
	}
	return s.pin
}

func either(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
