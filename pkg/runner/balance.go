package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/shards"
)

// Balance makes a runner share each stream's shards with the other runners
// on the same lease table. docs/operations.md (runners) describes it.
//
// Each runner beats a heartbeat row per stream (lease.Heartbeat) every
// BeatInterval and looks at the stream's runners every Interval. A runner
// whose heartbeat counter this runner has seen stand still for a lease
// duration (on this runner's clock) is gone; the others are live. The
// shards in play (leasable, held by a live runner, or held by a runner this
// one saw go) are divided evenly between the live runners: ranked by id,
// each gets n/r and the first n%r one more, so every runner computes the
// same shares from the same view; each takes its part of the leasable
// shards in that order. A runner above its share hands the excess over
// gracefully: the loops yield (their delivery in flight settles, they
// checkpoint and release), and a runner below its share takes the released
// rows at once. A runner below its share looks for released rows every
// Interval while another reports more leases than its share.
//
// A runner that crashed releases nothing: its leases lapse. Every look also
// reads the rows of the shards other runners hold (one BatchGetItem), so
// that the lease observer of this runner's coordinator sees each renewal
// within an Interval of its write, and knows when the rows of a runner that
// stopped will lapse on this runner's clock. Once a runner is gone, the
// others pursue its shards: each passes when a row of it lapses (and at
// every look while one stays lapsed and untaken), and takes its share of
// them, about a lease duration after the crash whatever the traffic.
type Balance struct {
	// ID names the runner in its heartbeat rows and, after "@", in its
	// loops' owner ids (so shardloop status shows which runner reads each
	// shard): letters, digits, '-', '_' and '.', at most 64 characters.
	// Default "<host>-<pid>-<4 random bytes in hex>".
	ID string
	// Host and PID are recorded in the heartbeat rows for operators;
	// defaults os.Hostname and os.Getpid.
	Host string
	PID  int
	// Interval between two looks at the stream's runners (one GetItem and
	// one BatchGetItem on DynamoDB). Default DefaultBalanceInterval.
	Interval time.Duration
	// BeatInterval between two heartbeats (two UpdateItems). It must be
	// shorter than the lease duration, the time after which a runner that
	// stopped beating is gone. Default the readers' RenewInterval.
	BeatInterval time.Duration
}

// Defaults of Balance.
const (
	DefaultBalanceInterval = 500 * time.Millisecond
)

func (b *Balance) setDefaults(renew time.Duration) {
	if b.Host == "" {
		b.Host, _ = os.Hostname()
	}
	if b.PID == 0 {
		b.PID = os.Getpid()
	}
	if b.ID == "" {
		b.ID = NewRunnerID(b.Host, b.PID)
	}
	if b.Interval == 0 {
		b.Interval = DefaultBalanceInterval
	}
	if b.BeatInterval == 0 {
		b.BeatInterval = renew
	}
}

func (b *Balance) validate(leaseFor time.Duration) error {
	if err := lease.CheckRunnerID(b.ID); err != nil {
		return fmt.Errorf("runner: Balance.ID: %w", err)
	}
	switch {
	case b.Interval < 0:
		return fmt.Errorf("runner: Balance.Interval %s: want a positive duration", b.Interval)
	case b.BeatInterval <= 0 || b.BeatInterval >= leaseFor:
		return fmt.Errorf("runner: Balance.BeatInterval %s: want a positive duration shorter than the lease (%s)", b.BeatInterval, leaseFor)
	}
	return nil
}

// NewRunnerID returns a fresh runner id: host (cut to what a runner id
// allows), pid and 32 random bits, e.g. "web-3-4242-9f86d081".
func NewRunnerID(host string, pid int) string {
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '-'
	}, host)
	if len(clean) > 40 {
		clean = clean[:40]
	}
	if clean == "" {
		clean = "runner"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", clean, pid, hex.EncodeToString(b[:]))
}

// fairShare is runner self's share of n shards among the live runners
// (sorted ids, self among them): n/len(live), and one more for the first
// n%len(live) of them.
func fairShare(self string, live []string, n int) int {
	if len(live) == 0 || n <= 0 {
		return max(n, 0)
	}
	rank, found := slices.BinarySearch(live, self)
	if !found {
		return 0
	}
	share := n / len(live)
	if rank < n%len(live) {
		share++
	}
	return share
}

// inPlay counts the shards a decision divides between the live runners:
// the leasable ones, those held by a live runner, and those held by a runner
// known gone (gone), whose leases will lapse and which the survivors take
// then. A shard held by any other owner (a loop of a deployment on the same
// table, or a runner this one has not seen) is left out until it is free.
func inPlay(d shards.Decision, live []string, gone map[string]time.Time) int {
	n := len(d.Leasable)
	for _, why := range d.NotLeasable {
		if why.Kind == shards.Held {
			r := lease.OwnerRunner(why.Owner)
			_, isLive := slices.BinarySearch(live, r)
			_, isGone := gone[r]
			if isLive || (isGone && r != "") {
				n++
			}
		}
	}
	return n
}

// heldBy counts the shards a decision sees held by runner.
func heldBy(d shards.Decision, runner string) int {
	n := 0
	for _, why := range d.NotLeasable {
		if why.Kind == shards.Held && lease.OwnerRunner(why.Owner) == runner {
			n++
		}
	}
	return n
}

// claim chooses the leasable shards runner self takes in a pass: its part of
// them, and any that has waited declined for grace or longer (a share
// computed on a view the others do not have yet must not leave a shard
// unread). Its part: every live runner's room is its share less what it
// holds, and the leasable shards, in the decision's order, are dealt out
// by rank: the first runner's room of them to it, the next ones to the
// next, so runners passing at once (after a crash, a leave) take different
// shards rather than race for the same. since records when each declined
// shard was first declined; claim updates it.
func claim(self string, live []string, gone map[string]time.Time, d shards.Decision, since map[string]time.Time, now time.Time, grace time.Duration) []shards.Shard {
	n := inPlay(d, live, gone)
	offset, room := 0, fairShare(self, live, n)-heldBy(d, self) // with no view of the others: all of them
	for _, id := range live {
		r := max(fairShare(id, live, n)-heldBy(d, id), 0)
		if id == self {
			room = r
			break
		}
		offset += r
	}
	var take []shards.Shard
	leasable := make(map[string]bool, len(d.Leasable))
	for i, s := range d.Leasable {
		leasable[s.ID] = true
		first, waited := since[s.ID]
		switch {
		case i >= offset && i < offset+room:
		case waited && now.Sub(first) >= grace:
		default:
			if !waited {
				since[s.ID] = now
			}
			continue
		}
		take = append(take, s)
		delete(since, s.ID)
	}

	for id := range since {
		if !leasable[id] {
			delete(since, id) // taken by another, or no longer listed
		}
	}
	return take
}

// toGive chooses which of held (shard ids) to hand over to reach share: the
// last ones by shard id.
func toGive(held []string, share int) []string {
	if len(held) <= share {
		return nil
	}
	s := slices.Clone(held)
	slices.Sort(s)
	return s[max(share, 0):]
}

// handoffDue reports whether a live runner other than self reports more
// leases than its share: it is about to release some.
func handoffDue(self string, live []string, leases map[string]int, n int) bool {
	for _, id := range live {
		if id != self && leases[id] > fairShare(id, live, n) {
			return true
		}
	}
	return false
}

// balanceStore is what a balancer uses of the lease table: the heartbeats,
// and the rows of the shards it watches.
type balanceStore interface {
	lease.HeartbeatStore
	GetMany(ctx context.Context, stream string, shardIDs []string) (map[string]lease.Lease, error)
}

// balancer is a runner's part in balancing: its heartbeats, its view of
// the live runners per stream, its watch of the rows other runners hold,
// and the Claim hook of its coordinator.
type balancer struct {
	r        *Runner
	o        Balance
	store    balanceStore
	clock    func() time.Time
	duration time.Duration // a runner whose heartbeat stood still this long is gone
	// observer judges heartbeats and, shared with the coordinator, lease
	// rows: what a look reads of the others' rows counts for the passes.
	observer *lease.Observer
	streams  []string

	mu    sync.Mutex
	views map[string]*view // by stream
}

// view is what the balancer knows of one stream.
type view struct {
	counter  int64          // of this runner's last beat; 0 before the first
	listed   bool           // whether the last look listed this runner
	live     []string       // live runners at the last look, self included, sorted
	leases   map[string]int // what the live runners reported at their last beat
	passed   bool           // a pass has decided
	leasable int            // leasable shards at the last pass
	held     map[string]int // shards held at the last pass, by runner ("" for other owners)
	declined map[string]time.Time
	// pursue: until then, a runner below its share nudges its coordinator at
	// every look, to take released rows at once.
	pursue time.Time
	// gone are the runners this one saw live and then no more (their
	// heartbeat lapsed, or another runner removed it, or they left), with
	// when it learned it; kept while the last pass saw them hold a row.
	gone map[string]time.Time
	// watch are the shards whose rows each look reads: those the last pass
	// saw held by another runner, or leasable.
	watch []string
	// beats are the other runners' heartbeat counters as last seen;
	// out the runners counted out while their heartbeat stands still at
	// the counter given (see look).
	beats map[string]beatSeen
	out   map[string]int64
}

func newBalancer(r *Runner, o Balance, streams []string, observer *lease.Observer) *balancer {
	b := &balancer{r: r, o: o, store: r.opts.Store, clock: r.clock, duration: r.leaseFor,
		observer: observer, streams: streams, views: map[string]*view{}}
	for _, s := range streams {
		b.views[s] = &view{live: []string{o.ID}, declined: map[string]time.Time{}, leases: map[string]int{},
			gone: map[string]time.Time{}, beats: map[string]beatSeen{}, out: map[string]int64{}}
	}
	return b
}

// claim is the coordinator's Claim hook.
func (b *balancer) claim(stream string, d shards.Decision) []shards.Shard {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.views[stream]
	if !ok {
		return d.Leasable
	}
	now := b.clock()
	v.passed, v.leasable = true, len(d.Leasable)
	v.held = map[string]int{}
	for _, why := range d.NotLeasable {
		if why.Kind == shards.Held {
			v.held[lease.OwnerRunner(why.Owner)]++
		}
	}
	v.watch = watchOf(b.o.ID, d)
	for r, at := range v.gone {
		if heldBy(d, r) == 0 && now.Sub(at) >= b.duration {
			delete(v.gone, r) // holds nothing any more
		}
	}
	return claim(b.o.ID, v.live, v.gone, d, v.declined, now, b.duration/2)
}

// watchOf lists the shards of a decision whose rows a look reads: those
// held by another runner, and the leasable ones (another runner may take
// them before this one's next pass).
func watchOf(self string, d shards.Decision) []string {
	var ids []string
	for _, s := range d.Leasable {
		ids = append(ids, s.ID)
	}
	for id, why := range d.NotLeasable {
		if r := lease.OwnerRunner(why.Owner); why.Kind == shards.Held && r != "" && r != self {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// run beats and looks until ctx ends, and nudges the coordinator when a
// row of a runner gone is due to lapse.
func (b *balancer) run(ctx context.Context) {
	look := time.NewTicker(b.o.Interval)
	defer look.Stop()
	beat := time.NewTicker(b.o.BeatInterval)
	defer beat.Stop()
	pursue := time.NewTimer(time.Hour)
	pursue.Stop()
	defer pursue.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			b.beatAll(ctx)
		case <-look.C:
			if at := b.lookAll(ctx); at.IsZero() {
				pursue.Stop()
			} else {
				pursue.Reset(max(at.Sub(b.clock()), 0) + lapseGrace)
			}
		case <-pursue.C:
			b.r.coord.Nudge()
		}
	}
}

// lapseGrace is how long after a row's lapse (by the observer) the pursuit
// passes: the pass reads the row again after that moment.
const lapseGrace = 5 * time.Millisecond

func (b *balancer) beatAll(ctx context.Context) {
	for _, s := range b.streams {
		b.beat(ctx, s)
	}
}

// lookAll looks at every stream; it returns when the first row of a runner
// gone lapses unless taken first (zero when none is lapsing).
func (b *balancer) lookAll(ctx context.Context) time.Time {
	var next time.Time
	for _, s := range b.streams {
		if at := b.look(ctx, s); !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next
}

// callTimeout bounds one store call of the balancer.
func (b *balancer) callTimeout() time.Duration { return max(b.o.BeatInterval, time.Second) }

func (b *balancer) beat(ctx context.Context, stream string) {
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout())
	defer cancel()
	hb, err := b.store.Beat(ctx, stream, lease.Heartbeat{Runner: b.o.ID, Host: b.o.Host, PID: b.o.PID,
		Leases: b.r.holding(stream), BeatAt: b.clock()})
	if err != nil {
		if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
			b.r.log.WarnContext(ctx, "heartbeat failed; retrying at the next beat", "stream", stream, "runner", b.o.ID, "err", err)
		}
		return
	}
	b.mu.Lock()
	b.views[stream].counter = hb.Counter
	b.mu.Unlock()
}

// look reads the stream's runners, removes those gone, reads the rows of the
// shards others hold (observe), and acts on this runner's share: it hands
// over what it holds above it, and when it holds less while a handoff is due
// or shards were left leasable, it nudges the coordinator to look for
// released rows now. It nudges it too while a row of a runner gone is free
// or lapsed, and returns when the first other such row lapses (zero when
// none is lapsing), for run to nudge it then.
//
// A runner is gone once its heartbeat stood still for a lease duration, or
// sooner: once it missed a beat and one of the leases it holds lapsed on
// this runner's clock (it is counted out while its heartbeat stands still),
// so that its shards are taken as their leases lapse, not only once its
// heartbeat does.
func (b *balancer) look(ctx context.Context, stream string) time.Time {
	callCtx, cancel := context.WithTimeout(ctx, b.callTimeout())
	defer cancel()
	hs, err := b.store.Runners(callCtx, stream)
	if err != nil {
		b.r.log.WarnContext(ctx, "reading the stream's runners failed; retrying", "stream", stream, "err", err)
		return time.Time{}
	}
	now := b.clock()
	b.mu.Lock()
	v := b.views[stream]
	out := maps.Clone(v.out)
	beats := v.beats
	b.mu.Unlock()

	live := []string{b.o.ID}
	leases := map[string]int{}
	listed := false
	stalled := map[string]int64{} // runners that missed a beat, by counter
	seenBeats := map[string]beatSeen{}
	for _, hb := range hs {
		if hb.Runner == b.o.ID {
			listed = hb.Counter > 0
			continue
		}
		if hb.Counter > 0 {
			bs, ok := beats[hb.Runner]
			if !ok || bs.counter != hb.Counter || now.Before(bs.since) {
				bs = beatSeen{counter: hb.Counter, since: now}
			}
			seenBeats[hb.Runner] = bs
			if now.Sub(bs.since) > b.o.BeatInterval+b.o.Interval {
				stalled[hb.Runner] = hb.Counter
			}
		}
		hv := b.observer.ObserveRunner(stream, hb, now)
		if hv.Lapsed {
			err := b.store.Leave(callCtx, stream, hb.Runner, hv.Counter)
			switch {
			case err == nil:
				b.observer.ForgetRunner(stream, hb.Runner)
				b.r.log.InfoContext(ctx, "runner gone: its heartbeat stood still for a lease duration", "stream", stream, "runner", hb.Runner,
					"host", hb.Host, "pid", hb.PID)
			case errors.Is(err, lease.ErrHeld):
				live = append(live, hb.Runner) // it beat meanwhile
				leases[hb.Runner] = hb.Leases
			default:
				b.r.log.WarnContext(ctx, "removing a gone runner failed", "stream", stream, "runner", hb.Runner, "err", err)
			}
			continue
		}
		if c, ok := out[hb.Runner]; hb.Counter == 0 || (ok && c == hb.Counter) {
			continue // listed without a row, or counted out and still standing still
		}
		live = append(live, hb.Runner)
		leases[hb.Runner] = hb.Leases
	}
	slices.Sort(live)

	b.mu.Lock()
	v.beats = seenBeats
	for r, c := range v.out {
		if bs, ok := seenBeats[r]; !ok || bs.counter != c {
			delete(v.out, r) // removed, or it beat after all
		}
	}
	changed := b.setLive(v, live, now)
	v.leases, v.listed = leases, listed
	n, leasable, beaten, pursue := v.inPlay(), v.leasable, v.counter > 0, v.pursue
	watch, gone := slices.Clone(v.watch), maps.Clone(v.gone)
	b.mu.Unlock()
	if !listed && beaten {
		b.beat(ctx, stream) // removed while slow: list it again now
	}
	seen := b.observe(ctx, stream, watch, gone, stalled)
	if len(seen.out) > 0 {
		b.mu.Lock()
		for _, r := range seen.out {
			v.out[r] = stalled[r]
		}
		live = slices.DeleteFunc(slices.Clone(live), func(id string) bool { return slices.Contains(seen.out, id) })
		b.setLive(v, live, now)
		b.mu.Unlock()
		changed = true
		b.r.log.InfoContext(ctx, "runner gone: it missed a heartbeat and a lease it held lapsed", "stream", stream, "runners", seen.out)
	}
	if changed {
		b.r.log.InfoContext(ctx, "runners sharing the stream", "stream", stream, "runners", live)
	}
	if seen.due {
		b.r.coord.Nudge() // a row of a runner gone lapsed: take it (or leave it to the others' shares)
	}
	next := seen.next
	if n < 0 {
		// No pass has decided yet (the first found the stream's generation
		// not yet applied, say): the share is not known; pass again.
		b.r.coord.Nudge()
		return next
	}
	share := fairShare(b.o.ID, live, n)
	active := b.r.active(stream)
	if give := toGive(active, share); len(give) > 0 {
		b.r.log.InfoContext(ctx, "handing shards over to the runners below their share", "stream", stream,
			"share", share, "held", len(active), "shards", give, "runners", len(live))
		b.r.yieldShards(stream, give)
		b.mu.Lock()
		v.watch = slices.Compact(slices.Sorted(slices.Values(append(v.watch, give...)))) // should its share grow back, it sees them free
		b.mu.Unlock()
	}
	if len(active) >= share {
		return next
	}
	// Below its share: rows are being released (a runner joined, or another
	// holds more than its share), or free (a runner left, or this look read
	// one released), or were left leasable at the last pass. Pass at every
	// look for a while: a giver's heartbeat may report its release before
	// this look sees the row free.
	if leasable > 0 || changed || seen.free || handoffDue(b.o.ID, live, leases, n) {
		pursue = now.Add(2*b.o.BeatInterval + b.o.Interval)
		b.mu.Lock()
		v.pursue = pursue
		b.mu.Unlock()
	}
	if now.Before(pursue) {
		b.r.coord.Nudge()
	}
	return next
}

// inPlay is how many shards the last pass saw in play for the live runners
// now (see the package function); -1 before the first pass. It is computed
// at every look, since the live runners change between passes. b.mu is held.
func (v *view) inPlay() int {
	if !v.passed {
		return -1
	}
	n := v.leasable
	for r, k := range v.held {
		_, isLive := slices.BinarySearch(v.live, r)
		_, isGone := v.gone[r]
		if r != "" && (isLive || isGone) {
			n += k
		}
	}
	return n
}

// beatSeen is a runner's heartbeat counter and since when this runner has
// seen it, on its own clock.
type beatSeen struct {
	counter int64
	since   time.Time
}

// setLive records the live runners of v (sorted): those no longer among
// them are gone from now (they left, or crashed: their rows are free, or
// will lapse), those among them are not. It reports whether they changed.
// b.mu is held.
func (b *balancer) setLive(v *view, live []string, now time.Time) bool {
	changed := !slices.Equal(v.live, live)
	for _, id := range v.live {
		if _, ok := slices.BinarySearch(live, id); !ok {
			v.gone[id] = now
		}
	}
	for _, id := range live {
		delete(v.gone, id) // it beat meanwhile
	}
	v.live = live
	return changed
}

// observed is what a look read of the rows others hold.
type observed struct {
	// free: some row names no owner, or its lease lapsed (a runner below
	// its share passes to take it).
	free bool
	// due: a row of a runner gone has lapsed on this runner's clock: a pass
	// takes it now (or leaves it to the others' shares).
	due bool
	// next is when the first row of a runner gone lapses if nothing
	// changes; zero when they hold none.
	next time.Time
	// out are the runners that missed a beat (stalled) and hold a lease
	// that lapsed: gone from now.
	out []string
}

// observe reads the rows of ids (the shards other runners held at the last
// pass, and the leasable ones) into the observer the coordinator judges
// lapses with, so that it sees each renewal within a look of its write, and
// so knows when the rows of a runner that stopped lapse. gone are the
// runners known gone, stalled those that missed a beat.
func (b *balancer) observe(ctx context.Context, stream string, ids []string, gone map[string]time.Time, stalled map[string]int64) (o observed) {
	if len(ids) == 0 {
		return o
	}
	callCtx, cancel := context.WithTimeout(ctx, b.callTimeout())
	defer cancel()
	rows, err := b.store.GetMany(callCtx, stream, ids)
	if err != nil {
		if ctx.Err() == nil {
			b.r.log.WarnContext(ctx, "reading the rows other runners hold failed; retrying at the next look", "stream", stream, "err", err)
		}
		return o
	}
	now := b.clock() // read after the rows arrived
	type judged struct {
		runner string
		v      lease.Verdict
	}
	var held []judged
	for _, row := range rows {
		v := b.observer.Observe(row, now)
		if row.Finished() {
			continue
		}
		o.free = o.free || v.Available()
		if r := lease.OwnerRunner(row.Owner); row.Owner != "" && r != "" {
			held = append(held, judged{r, v})
			if _, isGone := gone[r]; !isGone && v.Available() && !slices.Contains(o.out, r) {
				if _, ok := stalled[r]; ok {
					o.out = append(o.out, r)
				}
			}
		}
	}
	slices.Sort(o.out)
	for _, j := range held {
		if _, isGone := gone[j.runner]; !isGone && !slices.Contains(o.out, j.runner) {
			continue
		}
		switch {
		case j.v.Available():
			o.due = true
		case o.next.IsZero() || j.v.LapsesAt.Before(o.next):
			o.next = j.v.LapsesAt
		}
	}
	return o
}

// leave removes this runner's heartbeat rows: the others count it out at
// their next look, without waiting a lease duration.
func (b *balancer) leave(ctx context.Context) {
	for _, s := range b.streams {
		b.mu.Lock()
		counter := b.views[s].counter
		b.mu.Unlock()
		if counter == 0 {
			continue
		}
		callCtx, cancel := context.WithTimeout(ctx, b.callTimeout())
		if err := b.store.Leave(callCtx, s, b.o.ID, counter); err != nil {
			b.r.log.WarnContext(ctx, "removing this runner's heartbeat row failed; the others count it out after a lease duration", "stream", s, "err", err)
		}
		cancel()
	}
}
