package sim

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

// table is the world's one lease table: the real lease.MemoryStore, with
// every call serialised under one lock together with the checker's
// bookkeeping, so that the checker sees the writes in the order the table
// made them.
type table struct {
	w     *World
	mu    sync.Mutex
	inner *lease.MemoryStore
	// startAt is when a start was last written (SetStart).
	startAt time.Time

	// What the sabotages (Config.Sabotage) need.
	stolen    string              // the shard Steal makes look free
	stealEnd  time.Time           // until then
	lastCkpts map[string][]string // per shard, its last checkpoints
	ckptBack  bool                // CheckpointBack done
}

// store is one host's view of the table: the network between them, with
// latency on every call, writes that fail before they are made or after
// (the answer lost), and renewals that succeed slowly. Latency after a
// write honours ctx: a caller that gives up sees an error although the
// write was made.
type store struct {
	t   *table
	dep string
}

var _ lease.Store = (*store)(nil)

// errStore and errNotWritten are the causes of injected store failures
// (the answer lost; the write not made): neither ErrHeld nor ErrNotOwner,
// so callers treat them as transient.
var (
	errStore      = errors.New("sim: lease store unavailable (injected)")
	errNotWritten = errors.New("sim: lease store unavailable before the write (injected)")
)

type storeFault int

const (
	faultNone storeFault = iota
	faultBefore
	faultAfter
)

// rareWrite are the store calls a world makes few of, by op: a
// generation's writes (its record, the starts it applies row by row) among
// them.
var rareWrite = map[string]bool{"pin": true, "release": true, "release at SHARD_END": true, "SHARD_END checkpoint": true, "renew with SHARD_END": true, "window checkpoint": true,
	"set start": true, "put generation": true}

// call runs one store call: latency, the fault drawn, f under the table's
// lock, latency back. f runs under the ctx it is given: the caller's, or,
// for a write that lands after its caller gave up, one that does not end.
func (s *store) call(ctx context.Context, op, stream, shardID string, write bool, f func(context.Context) error) error {
	w := s.t.w
	fs := &w.cfg.Faults
	rs := w.draws(ctx, "store", shardID)
	// The write lands after the call's latency, or (one call in four) part
	// way, the rest of the latency being the answer's way back.
	before, after := rs.latency(fs.StoreLatency, fs.StoreTail), time.Duration(0)
	if rs.intN(4) == 0 {
		after = before / 2
		before -= after
	}
	fault := faultNone
	// The rare writes (pins, releases, SHARD_END, window checkpoints) fail,
	// and are held on their way, four times as often: a world makes few of
	// them, and the code that handles their failure is the least exercised.
	weight := 1.0
	if rareWrite[op] {
		weight = 4
	}
	if write {
		switch x := rs.float(); {
		case x < weight*fs.StoreBefore:
			fault = faultBefore
		case x < weight*(fs.StoreBefore+fs.StoreAfter):
			fault = faultAfter
		}
		if op == "release at SHARD_END" && fault == faultNone && rs.hit(fs.EndRelease) {
			fault = faultBefore
		}
	}
	// Renewals are slow at times, and so are the starts a generation
	// writes row by row: a slow one holds its application open while other
	// coordinators read the rows.
	if (strings.HasPrefix(op, "renew") && rs.hit(fs.SlowRenew)) || (op == "set start" && rs.hit(fs.SlowStart)) {
		slow := rs.dur(time.Second, max(time.Second, fs.SlowRenewMax))
		if rs.intN(2) == 0 {
			before += slow
		} else {
			after += slow
		}
	}
	if op == "put generation" && fs.SlowRecord > 0 {
		before += rs.dur(max(time.Second, fs.SlowRecordMin), fs.SlowRecord)
	}
	// A write held on its way (the rare ones four times as often) lands
	// at its time even when its caller gives up meanwhile: the request
	// has left, and the table serves it whoever waits for the answer.
	lateWeight := weight
	if op == "window checkpoint" {
		lateWeight = 1 // a window world's every checkpoint
	}
	late := write && rs.hit(min(1, lateWeight*fs.Late))
	if late {
		before += rs.dur(fs.LateMin, fs.LateMax)
	}
	// A start written just before a re-creation's deletion (a "start"
	// race): its host freezes as the write leaves, and it lands when the
	// host wakes, after the stream was created again.
	if op == "set start" {
		w.meetRace(ctx, "start", s.dep)
	}
	w.wake(ctx)
	lands := time.Now().Add(before)
	if err := w.sleep(ctx, before); err != nil {
		if late {
			// The caller gave up; the write goes on, under a context that
			// does not end, and lands at its time (or when its host
			// wakes). Its answer reaches nobody.
			lctx := lateCtx{world: w.ctx, of: ctx}
			w.bg.Go(func() {
				if w.sleep(lctx, time.Until(lands)) != nil {
					return // the world ended first
				}
				w.wake(lctx)
				if err := s.land(lctx, rs, op, shardID, write, fault, &after, f); err == nil || err == errStore {
					w.tr.add(w.shardName(shardID), "", "%s: %s landed after its caller gave up", s.dep, op)
				}
			})
		}
		return err
	}
	w.wake(ctx) // frozen on the way: the write lands when the host wakes
	err := s.land(ctx, rs, op, shardID, write, fault, &after, f)
	if err == errNotWritten || err == errDead {
		return err
	}
	if err == nil && fault == faultNone && strings.HasPrefix(op, "renew") {
		dl, _ := ctx.Deadline()
		after = w.strikeRenewal(ctx, s.dep, shardID, after, dl)
	}
	if err == errStore {
		return errStore
	}
	if e := w.sleep(ctx, after); e != nil && err == nil {
		return e // written, but the caller gave up waiting
	}
	return err
}

// lateCtx is the context of a write that lands after its caller gave up:
// it ends with the world, not with the caller, and carries the caller's
// values (its host, its invocation). What the write returns reaches
// nobody (see keep).
type lateCtx struct {
	world, of context.Context
}

// lateKey marks a lateCtx among the values.
type lateKey struct{}

// Deadline implements context.Context: the world's (none).
func (c lateCtx) Deadline() (time.Time, bool) { return c.world.Deadline() }

// Done implements context.Context: the world's.
func (c lateCtx) Done() <-chan struct{} { return c.world.Done() }

// Err implements context.Context: the world's.
func (c lateCtx) Err() error { return c.world.Err() }

// Value implements context.Context: the caller's values.
func (c lateCtx) Value(k any) any {
	if k == (lateKey{}) {
		return true
	}
	return c.of.Value(k)
}

// keep stores v in *dst for the caller, unless the write landed after its
// caller gave up (the caller has returned; nobody reads dst).
func keep[T any](ctx context.Context, dst *T, v T) {
	if ctx.Value(lateKey{}) == nil {
		*dst = v
	}
}

// land makes the write (or read) f at its time: not at all from a host cut
// off from the table, on a fault before it, or for a dead invocation;
// errStore when its answer is lost. A read of the rows may lengthen after.
func (s *store) land(ctx context.Context, rs *stream, op, shardID string, write bool, fault storeFault, after *time.Duration, f func(context.Context) error) error {
	w := s.t.w
	fs := &w.cfg.Faults
	if w.cutOff(ctx, "store") {
		w.tr.add(w.shardName(shardID), "", "%s: %s from a host cut off from the table (partition)", s.dep, op)
		return errNotWritten
	}
	if fault == faultBefore {
		w.tr.add(w.shardName(shardID), "", "%s: %s failed before the write (injected)", s.dep, op)
		return errNotWritten
	}
	s.t.mu.Lock()
	if ks := killedOf(ctx); write && ks != nil && ks.Dead() {
		s.t.mu.Unlock()
		w.tr.add(w.shardName(shardID), "", "%s: %s by a dead invocation not made", s.dep, op)
		return errDead
	}
	err := f(ctx)
	if op == "set start" && err == nil {
		s.t.startAt = time.Now()
		w.thawOnStart()
	}
	// A read of the rows while a generation is applied row by row (a start
	// written within the longest a slow one takes) answers slowly at times:
	// the pass then judges rows the application has moved past since.
	if op == "get many" && !s.t.startAt.IsZero() && time.Since(s.t.startAt) <= fs.SlowRenewMax && rs.hit(fs.SlowRead) {
		*after += rs.dur(time.Second, max(time.Second, fs.SlowRenewMax))
	}
	s.t.mu.Unlock()
	if err == nil && fault == faultAfter {
		w.tr.add(w.shardName(shardID), "", "%s: %s written, answer lost (injected)", s.dep, op)
		return errStore
	}
	return err
}

// Take implements lease.Store.
func (s *store) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	var out lease.Lease
	err := s.call(ctx, "take", stream, shardID, true, func(ctx context.Context) error {
		if s.t.w.cfg.Sabotage == Steal && shardID == s.t.stolen && time.Now().Before(s.t.stealEnd) && lease.LoopOwner(owner) == owner {
			if row, err := s.t.inner.Get(ctx, stream, shardID); err == nil {
				opts = append(opts, lease.IfCounter(row.Counter))
			}
		}
		l, err := s.t.inner.Take(ctx, stream, shardID, owner, opts...)
		if err == nil {
			w := s.t.w
			w.tr.owner(s.dep, owner)
			w.chk.took(runKey(invocationOf(ctx), owner), owner, l)
			w.tr.add(w.shardName(shardID), owner, "took the row (counter %d, checkpoint %s, start %q)", l.Counter, short(l.Checkpoint), l.Start)
		}
		keep(ctx, &out, l)
		return err
	})
	return out, err
}

// Checkpoint implements lease.Store.
func (s *store) Checkpoint(ctx context.Context, stream, shardID, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	return s.checkpoint(ctx, stream, shardID, owner, seq, func(ctx context.Context, seq string) (lease.Lease, error) {
		return s.t.inner.Checkpoint(ctx, stream, shardID, owner, seq, opts...)
	})
}

// checkpoint is one checkpoint write, by write, watched by the checker.
func (s *store) checkpoint(ctx context.Context, stream, shardID, owner, seq string, write func(ctx context.Context, seq string) (lease.Lease, error)) (lease.Lease, error) {
	var out lease.Lease
	op := "checkpoint"
	if seq == lease.ShardEnd {
		op = "SHARD_END checkpoint"
	}
	err := s.call(ctx, op, stream, shardID, true, func(ctx context.Context) error {
		seq := s.sabotageCheckpoint(shardID, owner, seq)
		l, err := write(ctx, seq)
		if err == nil {
			w := s.t.w
			w.tr.add(w.shardName(shardID), owner, "checkpoint %s", short(seq))
			w.chk.checkpoint(runKey(invocationOf(ctx), owner), owner, l, seq)
		}
		keep(ctx, &out, l)
		return err
	})
	if err == errNotWritten {
		s.t.w.chk.checkpointFailed(runKey(invocationOf(ctx), owner), owner, shardID, seq)
	}
	return out, err
}

// Pin implements lease.Store.
func (s *store) Pin(ctx context.Context, stream, shardID, owner, start string) (lease.Lease, error) {
	var out lease.Lease
	err := s.call(ctx, "pin", stream, shardID, true, func(ctx context.Context) error {
		l, err := s.t.inner.Pin(ctx, stream, shardID, owner, start)
		if err == nil {
			s.t.w.tr.add(s.t.w.shardName(shardID), owner, "pinned its opening at %s", start)
			s.t.w.chk.pinned(l, start)
		}
		keep(ctx, &out, l)
		return err
	})
	return out, err
}

// Release implements lease.Store.
func (s *store) Release(ctx context.Context, stream, shardID, owner string, ho lease.Handover) error {
	op := "release"
	if row, err := s.t.inner.Get(ctx, stream, shardID); err == nil && row.Finished() {
		op = "release at SHARD_END"
	}
	return s.call(ctx, op, stream, shardID, true, func(ctx context.Context) error {
		err := s.t.inner.Release(ctx, stream, shardID, owner, ho)
		if err == nil {
			s.t.w.tr.add(s.t.w.shardName(shardID), owner, "released the row")
		}
		return err
	})
}

// Get implements lease.Store.
func (s *store) Get(ctx context.Context, stream, shardID string) (lease.Lease, error) {
	var out lease.Lease
	err := s.call(ctx, "get", stream, shardID, false, func(ctx context.Context) (err error) {
		out, err = s.t.inner.Get(ctx, stream, shardID)
		return err
	})
	return out, err
}

// GetMany implements lease.Store.
func (s *store) GetMany(ctx context.Context, stream string, shardIDs []string) (map[string]lease.Lease, error) {
	var out map[string]lease.Lease
	err := s.call(ctx, "get many", stream, "", false, func(ctx context.Context) (err error) {
		out, err = s.t.inner.GetMany(ctx, stream, shardIDs)
		if err == nil {
			s.sabotageRows(out)
		}
		return err
	})
	return out, err
}

// sabotageRows breaks what GetMany read as Config.Sabotage says.
func (s *store) sabotageRows(rows map[string]lease.Lease) {
	w := s.t.w
	switch w.cfg.Sabotage {
	case Steal:
		if s.t.stolen == "" && time.Since(w.began) > 2*time.Minute {
			for _, id := range slices.Sorted(maps.Keys(rows)) {
				if rows[id].Held() && !rows[id].Finished() {
					s.t.stolen, s.t.stealEnd = id, time.Now().Add(30*time.Second)
					w.tr.add(w.shardName(id), "", "SABOTAGE: its row looks free to coordinators for 30 s")
					break
				}
			}
		}
		if r, ok := rows[s.t.stolen]; ok && time.Now().Before(s.t.stealEnd) {
			r.Owner = ""
			rows[s.t.stolen] = r
		}
	case EarlyChild:
		for id, r := range rows {
			if w.closed(id) && !r.Finished() {
				r.Checkpoint = lease.ShardEnd
				rows[id] = r
			}
		}
	}
}

// List implements lease.Store.
func (s *store) List(ctx context.Context, stream string) ([]lease.Lease, error) {
	var out []lease.Lease
	err := s.call(ctx, "list", stream, "", false, func(ctx context.Context) (err error) {
		out, err = s.t.inner.List(ctx, stream)
		return err
	})
	return out, err
}

// SetStart implements lease.Store.
func (s *store) SetStart(ctx context.Context, stream, shardID string, st lease.Start) (bool, error) {
	var changed bool
	s.t.w.startPaused(ctx, s.dep, st)
	err := s.call(ctx, "set start", stream, shardID, true, func(ctx context.Context) (err error) {
		var ok bool
		ok, err = s.t.inner.SetStart(ctx, stream, shardID, st)
		keep(ctx, &changed, ok)
		if err != nil || !ok {
			return err
		}
		w := s.t.w
		if st.Keep {
			w.tr.add(w.shardName(shardID), "", "%s: row kept by generation %d (from %d)", s.dep, st.Order, st.From)
		} else {
			w.tr.add(w.shardName(shardID), "", "%s: start %s recorded (generation %d, clear %v, finished %v, if absent %v, if unread %v, fresh %v)",
				s.dep, st.Position, st.Order, st.ClearCheckpoint, st.Finished, st.IfAbsent, st.IfUnread, st.Fresh)
		}
		row, _ := s.t.inner.Get(ctx, stream, shardID)
		w.chk.setStart(shardID, st, ok, row)
		return nil
	})
	return changed, err
}

// Delete implements lease.Store.
func (s *store) Delete(ctx context.Context, stream, shardID string, counter, incarnation int64) error {
	return s.call(ctx, "delete", stream, shardID, true, func(ctx context.Context) error {
		row, getErr := s.t.inner.Get(ctx, stream, shardID)
		err := s.t.inner.Delete(ctx, stream, shardID, counter, incarnation)
		if err == nil && getErr == nil {
			w := s.t.w
			w.tr.add(w.shardName(shardID), "", "%s: row deleted", s.dep)
			w.chk.deletedRow(row)
		}
		return err
	})
}

// Reset implements lease.Store.
func (s *store) Reset(ctx context.Context, stream, shardID, start string, force bool) (lease.Lease, error) {
	var out lease.Lease
	err := s.call(ctx, "reset", stream, shardID, true, func(ctx context.Context) (err error) {
		var l lease.Lease
		l, err = s.t.inner.Reset(ctx, stream, shardID, start, force)
		keep(ctx, &out, l)
		if err == nil {
			s.t.w.chk.deletedRow(l) // a new epoch; no reset is drawn by worlds yet
		}
		return err
	})
	return out, err
}

// GetGeneration implements lease.Store.
func (s *store) GetGeneration(ctx context.Context, stream string) (lease.Generation, error) {
	var out lease.Generation
	err := s.call(ctx, "get generation", stream, "#generation", false, func(ctx context.Context) (err error) {
		out, err = s.t.inner.GetGeneration(ctx, stream)
		return err
	})
	return out, err
}

// PutGeneration implements lease.Store.
func (s *store) PutGeneration(ctx context.Context, stream string, g lease.Generation, prevOrder int64) error {
	return s.call(ctx, "put generation", stream, "#generation", true, func(ctx context.Context) error {
		if err := s.t.inner.PutGeneration(ctx, stream, g, prevOrder); err != nil {
			return err
		}
		if g.Order == prevOrder {
			return nil // the same generation, marked applied
		}
		found := map[string]rowAt{}
		rows, _ := s.t.inner.GetMany(context.WithoutCancel(ctx), stream, g.Shards)
		for id, r := range rows {
			if g.Incarnation == 0 || r.Incarnation == 0 || r.Incarnation == g.Incarnation {
				found[id] = rowAt{existed: true, finished: r.Finished()}
			}
		}
		w := s.t.w
		w.mu.Lock()
		w.recordedAt = time.Now()
		w.mu.Unlock()
		w.tr.add("", "", "%s: generation %d recorded: %s start %s tip %s over %d shards (superseded %v)", s.dep, g.Order, g.ID, g.Start, g.Tip, len(g.Shards), g.Superseded)
		w.chk.generation(g, found)
		return nil
	})
}

// sabotageCheckpoint is the checkpoint the table writes for seq: seq, or,
// under the CheckpointBack sabotage once, an earlier one.
func (s *store) sabotageCheckpoint(shardID, owner, seq string) string {
	if s.t.w.cfg.Sabotage != CheckpointBack || seq == lease.ShardEnd {
		return seq
	}
	last := s.t.lastCkpts[shardID]
	if !s.t.ckptBack && len(last) == 2 && time.Since(s.t.w.began) > 2*time.Minute {
		s.t.ckptBack = true
		s.t.w.tr.add(s.t.w.shardName(shardID), owner, "SABOTAGE: checkpoint %s written as %s", short(seq), short(last[0]))
		seq = last[0]
	}
	s.t.lastCkpts[shardID] = append(last, seq)[max(0, len(last)-1):]
	return seq
}

// Renew implements lease.Store: a renewal, which may carry a checkpoint
// (watched by the checker as a checkpoint).
func (s *store) Renew(ctx context.Context, stream, shardID, owner string, rn lease.Renewal) (lease.Lease, error) {
	var out lease.Lease
	seq := rn.Checkpoint
	op := "renew"
	if seq == lease.ShardEnd {
		op = "renew with SHARD_END"
	}
	err := s.call(ctx, op, stream, shardID, true, func(ctx context.Context) error {
		if rn.Checkpoint != "" {
			rn.Checkpoint = s.sabotageCheckpoint(shardID, owner, seq)
		}
		l, err := s.t.inner.Renew(ctx, stream, shardID, owner, rn)
		switch {
		case err == nil && rn.Checkpoint != "":
			w := s.t.w
			w.tr.add(w.shardName(shardID), owner, "renewal with checkpoint %s", short(rn.Checkpoint))
			w.chk.checkpoint(runKey(invocationOf(ctx), owner), owner, l, rn.Checkpoint)
		case errors.Is(err, lease.ErrNotOwner):
			s.t.w.tr.add(s.t.w.shardName(shardID), owner, "renewal refused")
		}
		keep(ctx, &out, l)
		return err
	})
	if err == errNotWritten && seq != "" {
		s.t.w.chk.checkpointFailed(runKey(invocationOf(ctx), owner), owner, shardID, seq)
	}
	return out, err
}

// Beat implements lease.Store.
func (s *store) Beat(ctx context.Context, stream string, hb lease.Heartbeat) (lease.Heartbeat, error) {
	var out lease.Heartbeat
	err := s.call(ctx, "beat", stream, "#runner", true, func(ctx context.Context) (err error) {
		var b lease.Heartbeat
		b, err = s.t.inner.Beat(ctx, stream, hb)
		keep(ctx, &out, b)
		return err
	})
	return out, err
}

// Runners implements lease.Store.
func (s *store) Runners(ctx context.Context, stream string) ([]lease.Heartbeat, error) {
	var out []lease.Heartbeat
	err := s.call(ctx, "runners", stream, "#runner", false, func(ctx context.Context) (err error) {
		out, err = s.t.inner.Runners(ctx, stream)
		return err
	})
	return out, err
}

// Leave implements lease.Store.
func (s *store) Leave(ctx context.Context, stream, runner string, counter int64) error {
	return s.call(ctx, "leave", stream, "#runner", true, func(ctx context.Context) error {
		return s.t.inner.Leave(ctx, stream, runner, counter)
	})
}

// CheckpointWindow implements lease.Store: a checkpoint, for the checker,
// that carries a tumbling window.
func (s *store) CheckpointWindow(ctx context.Context, stream, shardID, owner string, win lease.Window) error {
	err := s.call(ctx, "window checkpoint", stream, shardID, true, func(ctx context.Context) error {
		win.Seq = s.sabotageCheckpoint(shardID, owner, win.Seq)
		if err := s.t.inner.CheckpointWindow(ctx, stream, shardID, owner, win); err != nil {
			return err
		}
		w := s.t.w
		w.chk.stored(win.State)
		w.tr.add(w.shardName(shardID), owner, "checkpoint %s with its window", short(win.Seq))
		if l, err := s.t.inner.Get(ctx, stream, shardID); err == nil {
			w.chk.checkpoint(runKey(invocationOf(ctx), owner), owner, l, win.Seq)
		}
		return nil
	})
	if err == errNotWritten {
		s.t.w.chk.checkpointFailed(runKey(invocationOf(ctx), owner), owner, shardID, win.Seq)
	}
	return err
}

// GetWindow implements lease.Store.
func (s *store) GetWindow(ctx context.Context, stream, shardID string) (lease.Window, error) {
	var out lease.Window
	err := s.call(ctx, "get window", stream, shardID, false, func(ctx context.Context) (err error) {
		if s.t.w.cfg.Sabotage == WindowLost && time.Since(s.t.w.began) > 2*time.Minute {
			return lease.ErrNotFound
		}
		out, err = s.t.inner.GetWindow(ctx, stream, shardID)
		return err
	})
	return out, err
}
