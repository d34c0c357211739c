package sim

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

// hostFaults are what happens to whole hosts, beside the per-call faults:
// a partition (the host loses the lease table, or the target, for longer
// than a lease) and a pause (the process is frozen, descheduled or in a
// long GC pause, then wakes up and carries on).
type hostFaults struct {
	mu     sync.Mutex
	names  []string                // every host, in order of creation
	cut    map[cutOffKey]time.Time // unreachable until
	frozen map[string]time.Time    // host: frozen until
	st     strikes
	race   *recreateRace // armed by a re-creation, waiting for its moment
	// thawed is closed, and replaced, when a freeze ends early (thaw).
	thawed chan struct{}
	// thawOnStart is a host frozen by a "describe" race that wakes as the
	// next start write lands (the new stream's generation applied).
	thawOnStart string
	// startPause: by deployment, a pause of the hosts that write a given
	// start (a Supersede event).
	startPause map[string]*startPause
}

// startPause freezes the hosts that write start at (any start when at is
// ""): from the first one, for d (until until, or until the moment set
// when it was armed), and closes met then.
type startPause struct {
	at    string
	d     time.Duration
	until time.Time
	met   chan struct{}
	begun bool // a host met it
}

// armStartPause arms a pause of the hosts of deployment dep that write
// start at on a row, as the write leaves: the first one freezes for d, and
// those that write it meanwhile until then. The passes applying the
// generation of that start pause part way, and the rest of their starts
// land when they wake. The channel is closed when the first one freezes.
func (w *World) armStartPause(dep, at string, d time.Duration) <-chan struct{} {
	return w.armPause(dep, &startPause{at: at, d: d})
}

// armStartPauseUntil arms a pause of the hosts of deployment dep that
// write any start from now: each one freezes as its write leaves, until
// the moment until.
func (w *World) armStartPauseUntil(dep string, until time.Time) {
	w.armPause(dep, &startPause{until: until})
}

// armPause arms p for deployment dep, replacing its pause armed before.
func (w *World) armPause(dep string, p *startPause) <-chan struct{} {
	p.met = make(chan struct{})
	w.hf.mu.Lock()
	defer w.hf.mu.Unlock()
	if w.hf.startPause == nil {
		w.hf.startPause = map[string]*startPause{}
	}
	w.hf.startPause[dep] = p
	return p.met
}

// pausedUntil is when deployment dep's start pause ends (zero before a
// host met it).
func (w *World) pausedUntil(dep string) time.Time {
	w.hf.mu.Lock()
	defer w.hf.mu.Unlock()
	if p := w.hf.startPause[dep]; p != nil {
		return p.until
	}
	return time.Time{}
}

// disarmStartPause drops deployment dep's start pause.
func (w *World) disarmStartPause(dep string) {
	w.hf.mu.Lock()
	delete(w.hf.startPause, dep)
	w.hf.mu.Unlock()
}

// startPaused freezes ctx's host, about to write start st for deployment
// dep, when a pause waits for that (armStartPause). The caller then calls
// wake.
func (w *World) startPaused(ctx context.Context, dep string, st lease.Start) {
	host := hostOf(ctx)
	if host == "" {
		return
	}
	w.hf.mu.Lock()
	p := w.hf.startPause[dep]
	if p == nil || (p.at != "" && p.at != st.Position) || time.Now().Before(w.hf.frozen[host]) {
		w.hf.mu.Unlock()
		return
	}
	if !p.begun {
		if p.until.IsZero() {
			p.until = time.Now().Add(p.d)
		}
		p.begun = true
		close(p.met)
	}
	d := time.Until(p.until)
	w.hf.mu.Unlock()
	if d > 0 {
		w.freeze(host, d)
		w.tr.add("", "", "host %s frozen for %s as it writes start %s", host, d, st.Position)
	}
}

// frozenUntil is when the last frozen host wakes (zero when none was).
func (h *hostFaults) frozenUntil() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	var last time.Time
	for _, until := range h.frozen {
		if until.After(last) {
			last = until
		}
	}
	return last
}

// noteHost registers a new host.
func (h *hostFaults) noteHost(name string) {
	h.mu.Lock()
	h.names = append(h.names, name)
	h.mu.Unlock()
}

// pickHost picks one of a deployment's reading hosts made so far (a
// runner process, a shardreader instance; "" when none).
func (h *hostFaults) pickHost(dep string, pick float64) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var of []string
	for _, n := range h.names {
		if strings.HasPrefix(n, dep+"#") || strings.HasPrefix(n, dep+"-reader#") {
			of = append(of, n)
		}
	}
	if len(of) == 0 {
		return ""
	}
	return of[int(pick*float64(len(of)))%len(of)]
}

func hostOf(ctx context.Context) string {
	host, _ := ctx.Value(hostKey{}).(string)
	return host
}

// cutOffKey is what ("store" or "target") a host is cut off from.
type cutOffKey struct{ what, host string }

// partition cuts host off from what ("store" or "target") for d.
func (w *World) partition(host, what string, d time.Duration) {
	w.hf.mu.Lock()
	if w.hf.cut == nil {
		w.hf.cut = map[cutOffKey]time.Time{}
	}
	w.hf.cut[cutOffKey{what, host}] = time.Now().Add(d)
	w.hf.mu.Unlock()
}

// cutOff reports whether ctx's host cannot reach what now.
func (w *World) cutOff(ctx context.Context, what string) bool {
	host := hostOf(ctx)
	if host == "" {
		return false
	}
	w.hf.mu.Lock()
	defer w.hf.mu.Unlock()
	return time.Now().Before(w.hf.cut[cutOffKey{what, host}])
}

// freeze freezes host for d.
func (w *World) freeze(host string, d time.Duration) {
	w.hf.mu.Lock()
	if w.hf.frozen == nil {
		w.hf.frozen = map[string]time.Time{}
	}
	w.hf.frozen[host] = time.Now().Add(d)
	w.hf.mu.Unlock()
}

// wake blocks a call of ctx's host while the host is frozen, whatever
// ctx does (a frozen process does not see its context end): what it was
// about to do, it does when it wakes up.
func (w *World) wake(ctx context.Context) {
	host := hostOf(ctx)
	if host == "" {
		return
	}
	for {
		w.hf.mu.Lock()
		until, thawed := w.hf.frozen[host], w.hf.thawed
		w.hf.mu.Unlock()
		d := time.Until(until)
		if d <= 0 {
			return
		}
		select {
		case <-time.After(d):
		case <-thawed:
		}
	}
}

// thawOnStart wakes the host a "describe" race froze to wake at the next
// start write, if one waits: called as a start write lands.
func (w *World) thawOnStart() {
	w.hf.mu.Lock()
	host := w.hf.thawOnStart
	if host == "" {
		w.hf.mu.Unlock()
		return
	}
	w.hf.thawOnStart = ""
	w.hf.frozen[host] = time.Now()
	if w.hf.thawed != nil {
		close(w.hf.thawed)
	}
	w.hf.thawed = make(chan struct{})
	w.hf.mu.Unlock()
	w.tr.add("", "", "race at the re-creation: host %s wakes as a start write lands", host)
}

// strikes are the host losses armed by Strike events, each waiting for its
// moment, and what a struck host does meanwhile.
type strikes struct {
	pending []Event                // armed, in order of arming
	slow    map[string]time.Time   // host: its invocations may time out until (brownout)
	started map[depShard]time.Time // when a shard's last invocation started
	running map[depShard]int       // a shard's invocations running
}

// armStrike arms e: it strikes at the first moment of its kind.
func (w *World) armStrike(e Event) {
	w.hf.mu.Lock()
	w.hf.st.pending = append(w.hf.st.pending, e)
	w.hf.mu.Unlock()
	w.tr.add("", "", "strike armed in %s: a host lost at a %s moment, for %s", w.cfg.Deployments[e.Deployment].Name, e.Start, e.Pause)
}

// takeStrikeLocked removes and returns the first strike armed of kind for
// deployment dep.
func (w *World) takeStrikeLocked(kind, dep string) (Event, bool) {
	for i, e := range w.hf.st.pending {
		if e.Start == kind && w.cfg.Deployments[e.Deployment].Name == dep {
			w.hf.st.pending = append(w.hf.st.pending[:i:i], w.hf.st.pending[i+1:]...)
			return e, true
		}
	}
	return Event{}, false
}

// depShard is a shard of a deployment.
type depShard struct{ dep, shardID string }

// strikeInvocation is called as an invocation of a shard starts at the
// function, with the run time drawn for it; it returns the run time, made
// slow by a strike, and a func to call when the function's run ends. The
// host of ctx is struck when a strike armed for this moment waits.
func (w *World) strikeInvocation(ctx context.Context, dep, shardID string, lat time.Duration) (time.Duration, func()) {
	host := hostOf(ctx)
	key := depShard{dep, shardID}
	now := time.Now()
	rs := w.draws(ctx, "strike", shardID)
	slow := func() time.Duration {
		fn := w.cfg.Reader.FunctionTimeout
		return max(lat, rs.dur(fn/2, fn))
	}
	w.hf.mu.Lock()
	st := &w.hf.st
	if st.started == nil {
		st.started, st.running, st.slow = map[depShard]time.Time{}, map[depShard]int{}, map[string]time.Time{}
	}
	quiet := st.running[key] == 0 && now.Sub(st.started[key]) >= 2*w.cfg.Reader.Renew
	st.started[key] = now
	st.running[key]++
	done := func() {
		w.hf.mu.Lock()
		st.running[key]--
		w.hf.mu.Unlock()
	}
	if host == "" {
		w.hf.mu.Unlock()
		return lat, done
	}
	hang := w.cfg.Reader.FunctionTimeout + time.Millisecond // the function times out
	if now.Before(st.slow[host]) && rs.hit(0.5) {
		lat = hang
	}
	var e Event
	var ok bool
	if quiet {
		e, ok = w.takeStrikeLocked("quiet", dep)
	}
	if !ok {
		e, ok = w.takeStrikeLocked("brownout", dep)
	}
	switch {
	case ok && e.Start == "brownout":
		lat = hang
		st.slow[host] = now.Add(e.Pause)
	case ok:
		lat = slow()
	}
	w.hf.mu.Unlock()
	if !ok {
		return lat, done
	}
	name := w.shardName(shardID)
	switch {
	case e.Start == "quiet" && e.Pick < 0.4:
		w.tr.add(name, "", "strike: the invocation after a quiet spell runs %s; its loop killed", lat)
		w.bg.Go(func() { w.deps[e.Deployment].kill(shardID) })
	case e.Start == "quiet" && e.Pick >= 0.8:
		w.tr.add(name, "", "strike: the invocation after a quiet spell runs %s; host %s frozen for %s", lat, host, e.Pause)
		w.freeze(host, e.Pause)
	default:
		w.tr.add(name, "", "strike (%s): the invocation runs %s; host %s cut off from the table for %s", e.Start, lat, host, e.Pause)
		w.partition(host, "store", e.Pause)
	}
	return lat, done
}

// strikeRenewal is called when a renewal's write has landed, with how long
// its answer takes to come back and the call's deadline (zero: none): when
// a "renewal" strike is armed for dep, the answer comes back late, past
// the lease's margin but within the call's deadline, and the host is cut
// off from the table from now, its invocations timing out meanwhile (a
// brown-out that began with a slow answer).
func (w *World) strikeRenewal(ctx context.Context, dep, shardID string, after time.Duration, deadline time.Time) time.Duration {
	host := hostOf(ctx)
	late := w.cfg.Reader.Lease/10 + 100*time.Millisecond
	if host == "" || deadline.IsZero() || time.Until(deadline)-100*time.Millisecond <= late {
		return after
	}
	w.hf.mu.Lock()
	e, ok := w.takeStrikeLocked("renewal", dep)
	w.hf.mu.Unlock()
	if !ok {
		return after
	}
	rs := w.draws(ctx, "strike", shardID)
	after = max(after, rs.dur(late, time.Until(deadline)-100*time.Millisecond))
	w.partition(host, "store", e.Pause)
	w.hf.mu.Lock()
	if w.hf.st.slow == nil {
		w.hf.st.slow = map[string]time.Time{}
	}
	w.hf.st.slow[host] = time.Now().Add(e.Pause) // a brown-out, as below
	w.hf.mu.Unlock()
	w.tr.add(w.shardName(shardID), "", "strike: a renewal answered after %s; host %s cut off from the table for %s", after, host, e.Pause)
	return after
}

// recreateRace is the race a Recreate event arms just before it deletes
// the stream (Event.Start names its moment): the first host of the event's
// deployment to meet that moment freezes for the event's Pause, with what
// it was doing for the old stream still under way.
type recreateRace struct {
	e     Event
	taken chan struct{}
}

// armRace arms e's race; the channel closes when a host meets it.
func (w *World) armRace(e Event) <-chan struct{} {
	r := &recreateRace{e: e, taken: make(chan struct{})}
	w.hf.mu.Lock()
	w.hf.race = r
	w.hf.mu.Unlock()
	return r.taken
}

// disarmRace drops the race armed, met or not.
func (w *World) disarmRace() {
	w.hf.mu.Lock()
	w.hf.race = nil
	w.hf.mu.Unlock()
}

// meetRace freezes ctx's host, a host of deployment dep at moment, when
// the race armed waits for that moment in dep, and reports whether it did.
// The caller then calls wake: what the host was about to do, it does when
// it wakes up, after the stream was deleted and created again.
func (w *World) meetRace(ctx context.Context, moment, dep string) bool {
	host := hostOf(ctx)
	if host == "" {
		return false
	}
	w.hf.mu.Lock()
	r := w.hf.race
	if r == nil || r.e.Start != moment || w.cfg.Deployments[r.e.Deployment].Name != dep {
		w.hf.mu.Unlock()
		return false
	}
	w.hf.race = nil
	close(r.taken)
	if moment == "describe" && r.e.Pick < 0.5 {
		// Half of them wake at once as the new stream's generation has
		// its first start written, its rows not yet taken.
		w.hf.thawOnStart = host
	}
	w.hf.mu.Unlock()
	w.freeze(host, r.e.Pause)
	w.tr.add("", "", "race at the re-creation: host %s frozen for %s at its %s", host, r.e.Pause, moment)
	return true
}

// depOfHost is the deployment of a host's name ("a#3", "a-reader#4",
// "a-coordinator#5").
func depOfHost(host string) string {
	dep, _, _ := strings.Cut(host, "#")
	return strings.TrimSuffix(strings.TrimSuffix(dep, "-reader"), "-coordinator")
}
