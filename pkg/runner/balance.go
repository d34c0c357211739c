package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
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
// shards in play (leasable, or held by a live runner) are divided evenly
// between the live runners: ranked by id, each gets n/r and the first n%r
// one more, so every runner computes the same shares from the same view.
// A runner above its share hands the excess over gracefully: the loops
// yield (their delivery in flight settles, they checkpoint and release),
// and a runner below its share takes the released rows at once. A runner
// below its share looks for released rows every Interval while another
// reports more leases than its share.
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
// the leasable ones and those held by a live runner. A shard held by an
// owner that is no live runner (a runner gone, whose lease will lapse, or
// a loop of a deployment on the same table) is left out until it is free.
func inPlay(d shards.Decision, live []string) int {
	n := len(d.Leasable)
	for _, why := range d.NotLeasable {
		if why.Kind == shards.Held {
			if _, ok := slices.BinarySearch(live, lease.OwnerRunner(why.Owner)); ok {
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

// claim chooses the leasable shards runner self takes in a pass: up to its
// share less what it holds, and any that has waited declined for grace or
// longer (a share computed on a view the others do not have yet must not
// leave a shard unread). since records when each declined shard was first
// declined; claim updates it.
func claim(self string, live []string, d shards.Decision, since map[string]time.Time, now time.Time, grace time.Duration) []shards.Shard {
	room := fairShare(self, live, inPlay(d, live)) - heldBy(d, self)
	var take []shards.Shard
	leasable := make(map[string]bool, len(d.Leasable))
	for _, s := range d.Leasable {
		leasable[s.ID] = true
		first, waited := since[s.ID]
		switch {
		case room > 0:
			room--
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

// balancer is a runner's part in balancing: its heartbeats, its view of
// the live runners per stream, and the Claim hook of its coordinator.
type balancer struct {
	r        *Runner
	o        Balance
	store    lease.Store
	clock    func() time.Time
	duration time.Duration // a runner whose heartbeat stood still this long is gone
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
	inPlay   int            // shards in play at the last pass; -1 before the first
	leasable int            // leasable shards at the last pass
	declined map[string]time.Time
	// pursue: until then, a runner below its share nudges its coordinator at
	// every look, to take released rows at once.
	pursue time.Time
}

func newBalancer(r *Runner, o Balance, streams []string) *balancer {
	b := &balancer{r: r, o: o, store: r.opts.Store, clock: r.clock, duration: r.leaseFor,
		observer: lease.NewObserver(r.leaseFor), streams: streams, views: map[string]*view{}}
	for _, s := range streams {
		b.views[s] = &view{live: []string{o.ID}, inPlay: -1, declined: map[string]time.Time{}, leases: map[string]int{}}
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
	v.inPlay, v.leasable = inPlay(d, v.live), len(d.Leasable)
	return claim(b.o.ID, v.live, d, v.declined, b.clock(), b.duration/2)
}

// run beats and looks until ctx ends.
func (b *balancer) run(ctx context.Context) {
	look := time.NewTicker(b.o.Interval)
	defer look.Stop()
	beat := time.NewTicker(b.o.BeatInterval)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			b.beatAll(ctx)
		case <-look.C:
			b.lookAll(ctx)
		}
	}
}

func (b *balancer) beatAll(ctx context.Context) {
	for _, s := range b.streams {
		b.beat(ctx, s)
	}
}

func (b *balancer) lookAll(ctx context.Context) {
	for _, s := range b.streams {
		b.look(ctx, s)
	}
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

// look reads the stream's runners, removes those gone, and acts on this
// runner's share: it hands over what it holds above it, and when it holds
// less while a handoff is due or shards were left leasable, it nudges the
// coordinator to look for released rows now.
func (b *balancer) look(ctx context.Context, stream string) {
	callCtx, cancel := context.WithTimeout(ctx, b.callTimeout())
	defer cancel()
	hs, err := b.store.Runners(callCtx, stream)
	if err != nil {
		b.r.log.WarnContext(ctx, "reading the stream's runners failed; retrying", "stream", stream, "err", err)
		return
	}
	now := b.clock()
	live := []string{b.o.ID}
	leases := map[string]int{}
	listed := false
	for _, hb := range hs {
		if hb.Runner == b.o.ID {
			listed = hb.Counter > 0
			continue
		}
		v := b.observer.ObserveRunner(stream, hb, now)
		if v.Lapsed {
			err := b.store.Leave(callCtx, stream, hb.Runner, v.Counter)
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
		if hb.Counter > 0 {
			live = append(live, hb.Runner)
			leases[hb.Runner] = hb.Leases
		}
	}
	slices.Sort(live)

	b.mu.Lock()
	v := b.views[stream]
	changed := !slices.Equal(v.live, live)
	v.live, v.leases, v.listed = live, leases, listed
	n, leasable, beaten, pursue := v.inPlay, v.leasable, v.counter > 0, v.pursue
	b.mu.Unlock()
	if changed {
		b.r.log.InfoContext(ctx, "runners sharing the stream", "stream", stream, "runners", live)
	}
	if !listed && beaten {
		b.beat(ctx, stream) // removed while slow: list it again now
	}
	if n < 0 {
		return // no pass yet: the share is not known
	}
	share := fairShare(b.o.ID, live, n)
	active := b.r.active(stream)
	if give := toGive(active, share); len(give) > 0 {
		b.r.log.InfoContext(ctx, "handing shards over to the runners below their share", "stream", stream,
			"share", share, "held", len(active), "shards", give, "runners", len(live))
		b.r.yieldShards(stream, give)
	}
	if len(active) >= share {
		return
	}
	// Below its share: rows are being released (a runner joined, or another
	// holds more than its share), or free (a runner left), or were left
	// leasable at the last pass. Pass at every look for a while: a giver's
	// heartbeat may report its release before this look sees the row free.
	if leasable > 0 || changed || handoffDue(b.o.ID, live, leases, n) {
		pursue = now.Add(2*b.o.BeatInterval + b.o.Interval)
		b.mu.Lock()
		v.pursue = pursue
		b.mu.Unlock()
	}
	if now.Before(pursue) {
		b.r.coord.Nudge()
	}
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
