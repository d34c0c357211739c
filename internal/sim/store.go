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
// lock, latency back.
func (s *store) call(ctx context.Context, op, stream, shardID string, write bool, f func() error) error {
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
	if write {
		// The rare writes (pins, releases, SHARD_END, window checkpoints)
		// fail four times as often: a world makes few of them, and the
		// code that handles their failure is the least exercised.
		weight := 1.0
		if rareWrite[op] {
			weight = 4
		}
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
	// A start written just before a re-creation's deletion (a "start"
	// race): its host freezes as the write leaves, and it lands when the
	// host wakes, after the stream was created again.
	if op == "set start" {
		w.meetRace(ctx, "start", s.dep)
	}
	w.wake(ctx)
	if err := w.sleep(ctx, before); err != nil {
		return err
	}
	w.wake(ctx) // frozen on the way: the write lands when the host wakes
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
	err := f()
	if op == "set start" && err == nil {
		s.t.startAt = time.Now()
		w.thawOnStart()
	}
	// A read of the rows while a generation is applied row by row (a start
	// written within the longest a slow one takes) answers slowly at times:
	// the pass then judges rows the application has moved past since.
	if op == "get many" && !s.t.startAt.IsZero() && time.Since(s.t.startAt) <= fs.SlowRenewMax && rs.hit(fs.SlowRead) {
		after += rs.dur(time.Second, max(time.Second, fs.SlowRenewMax))
	}
	s.t.mu.Unlock()
	if err == nil && fault == faultNone && strings.HasPrefix(op, "renew") {
		dl, _ := ctx.Deadline()
		after = w.strikeRenewal(ctx, s.dep, shardID, after, dl)
	}
	if err == nil && fault == faultAfter {
		w.tr.add(w.shardName(shardID), "", "%s: %s written, answer lost (injected)", s.dep, op)
		return errStore
	}
	if e := w.sleep(ctx, after); e != nil && err == nil {
		return e // written, but the caller gave up waiting
	}
	return err
}

// Take implements lease.Store.
func (s *store) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	var out lease.Lease
	err := s.call(ctx, "take", stream, shardID, true, func() error {
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
		out = l
		return err
	})
	return out, err
}

// Checkpoint implements lease.Store.
func (s *store) Checkpoint(ctx context.Context, stream, shardID, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	return s.checkpoint(ctx, stream, shardID, owner, seq, func(seq string) (lease.Lease, error) {
		return s.t.inner.Checkpoint(ctx, stream, shardID, owner, seq, opts...)
	})
}

// checkpoint is one checkpoint write, by write, watched by the checker.
func (s *store) checkpoint(ctx context.Context, stream, shardID, owner, seq string, write func(seq string) (lease.Lease, error)) (lease.Lease, error) {
	var out lease.Lease
	op := "checkpoint"
	if seq == lease.ShardEnd {
		op = "SHARD_END checkpoint"
	}
	err := s.call(ctx, op, stream, shardID, true, func() error {
		seq := s.sabotageCheckpoint(shardID, owner, seq)
		l, err := write(seq)
		if err == nil {
			w := s.t.w
			w.tr.add(w.shardName(shardID), owner, "checkpoint %s", short(seq))
			w.chk.checkpoint(runKey(invocationOf(ctx), owner), owner, l, seq)
		}
		out = l
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
	err := s.call(ctx, "pin", stream, shardID, true, func() error {
		l, err := s.t.inner.Pin(ctx, stream, shardID, owner, start)
		if err == nil {
			s.t.w.tr.add(s.t.w.shardName(shardID), owner, "pinned its opening at %s", start)
			s.t.w.chk.pinned(l, start)
		}
		out = l
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
	return s.call(ctx, op, stream, shardID, true, func() error {
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
	err := s.call(ctx, "get", stream, shardID, false, func() (err error) {
		out, err = s.t.inner.Get(ctx, stream, shardID)
		return err
	})
	return out, err
}

// GetMany implements lease.Store.
func (s *store) GetMany(ctx context.Context, stream string, shardIDs []string) (map[string]lease.Lease, error) {
	var out map[string]lease.Lease
	err := s.call(ctx, "get many", stream, "", false, func() (err error) {
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
	err := s.call(ctx, "list", stream, "", false, func() (err error) {
		out, err = s.t.inner.List(ctx, stream)
		return err
	})
	return out, err
}

// SetStart implements lease.Store.
func (s *store) SetStart(ctx context.Context, stream, shardID string, st lease.Start) (bool, error) {
	var changed bool
	err := s.call(ctx, "set start", stream, shardID, true, func() (err error) {
		changed, err = s.t.inner.SetStart(ctx, stream, shardID, st)
		if err == nil && changed {
			w := s.t.w
			w.tr.add(w.shardName(shardID), "", "%s: start %s recorded (generation %d, clear %v, finished %v, if absent %v, if unread %v, fresh %v)",
				s.dep, st.Position, st.Order, st.ClearCheckpoint, st.Finished, st.IfAbsent, st.IfUnread, st.Fresh)
			row, _ := s.t.inner.Get(ctx, stream, shardID)
			w.chk.setStart(shardID, st, changed, row)
		}
		return err
	})
	return changed, err
}

// Delete implements lease.Store.
func (s *store) Delete(ctx context.Context, stream, shardID string, counter int64) error {
	return s.call(ctx, "delete", stream, shardID, true, func() error {
		row, getErr := s.t.inner.Get(ctx, stream, shardID)
		err := s.t.inner.Delete(ctx, stream, shardID, counter)
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
	err := s.call(ctx, "reset", stream, shardID, true, func() (err error) {
		out, err = s.t.inner.Reset(ctx, stream, shardID, start, force)
		if err == nil {
			s.t.w.chk.deletedRow(out) // a new epoch; no reset is drawn by worlds yet
		}
		return err
	})
	return out, err
}

// GetGeneration implements lease.Store.
func (s *store) GetGeneration(ctx context.Context, stream string) (lease.Generation, error) {
	var out lease.Generation
	err := s.call(ctx, "get generation", stream, "#generation", false, func() (err error) {
		out, err = s.t.inner.GetGeneration(ctx, stream)
		return err
	})
	return out, err
}

// PutGeneration implements lease.Store.
func (s *store) PutGeneration(ctx context.Context, stream string, g lease.Generation, prevOrder int64) error {
	return s.call(ctx, "put generation", stream, "#generation", true, func() error {
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
	err := s.call(ctx, op, stream, shardID, true, func() error {
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
		out = l
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
	err := s.call(ctx, "beat", stream, "#runner", true, func() (err error) {
		out, err = s.t.inner.Beat(ctx, stream, hb)
		return err
	})
	return out, err
}

// Runners implements lease.Store.
func (s *store) Runners(ctx context.Context, stream string) ([]lease.Heartbeat, error) {
	var out []lease.Heartbeat
	err := s.call(ctx, "runners", stream, "#runner", false, func() (err error) {
		out, err = s.t.inner.Runners(ctx, stream)
		return err
	})
	return out, err
}

// Leave implements lease.Store.
func (s *store) Leave(ctx context.Context, stream, runner string, counter int64) error {
	return s.call(ctx, "leave", stream, "#runner", true, func() error {
		return s.t.inner.Leave(ctx, stream, runner, counter)
	})
}

// CheckpointWindow implements lease.Store: a checkpoint, for the checker,
// that carries a tumbling window.
func (s *store) CheckpointWindow(ctx context.Context, stream, shardID, owner string, win lease.Window) error {
	err := s.call(ctx, "window checkpoint", stream, shardID, true, func() error {
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
	err := s.call(ctx, "get window", stream, shardID, false, func() (err error) {
		if s.t.w.cfg.Sabotage == WindowLost && time.Since(s.t.w.began) > 2*time.Minute {
			return lease.ErrNotFound
		}
		out, err = s.t.inner.GetWindow(ctx, stream, shardID)
		return err
	})
	return out, err
}
