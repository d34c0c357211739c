package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// MemoryStore keeps leases in the process. It is correct for one instance and
// empty after a restart. The zero value is not usable: call NewMemoryStore.
type MemoryStore struct {
	opts Options
	mu   sync.Mutex
	rows map[string]Lease
	gens map[string]Generation           // by stream
	hbs  map[string]map[string]Heartbeat // by stream, then runner
	// windows are the shards' tumbling windows, by lease key.
	windows map[string]Window
	// orders are the checkpoint orders (checkpointOrder) below which a
	// shard's checkpoint may not go, by lease key; a new start removes one.
	orders map[string]string
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty store.
func NewMemoryStore(optFns ...func(*Options)) (*MemoryStore, error) {
	var o Options
	for _, f := range optFns {
		f(&o)
	}
	o.setDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	return &MemoryStore{opts: o, rows: map[string]Lease{}, gens: map[string]Generation{}, hbs: map[string]map[string]Heartbeat{}, windows: map[string]Window{}, orders: map[string]string{}}, nil
}

func clone(l Lease) Lease {
	l.ParentShardIDs = slices.Clone(l.ParentShardIDs)
	return l
}

func cloneGeneration(g Generation) Generation {
	g.Superseded, g.Shards = slices.Clone(g.Superseded), slices.Clone(g.Shards)
	return g
}

// takeable reports whether a take by owner with o may have row l: a row
// free of owner and fence (not for a loop's run), a counter the taker
// watched (IfCounter), the taker's own row, or a row handed back to the
// taker's loop with no fence. A revoked child, or any free row, is not taken
// by a loop's run: a new start may have opened a parent again, or opened the
// row while its descendants are still held under an older start, and only a
// coordinator checks them. No row of a later incarnation than o names is
// taken at all.
func (o takeOptions) takeable(l Lease, owner string) bool {
	if o.incarnation != 0 && l.Incarnation > o.incarnation {
		return false // a row of a later incarnation (see WithIncarnation)
	}
	free := l.Owner == "" && l.Fence == 0 && o.family == ""
	if free || (o.ifCounter && l.Counter == o.counter) {
		return true
	}
	if l.Revoked && len(l.ParentShardIDs) > 0 {
		return false
	}
	return l.Owner == owner || (o.family != "" && l.Owner == o.family && l.Fence == 0)
}

// Take implements HolderStore.
func (m *MemoryStore) Take(ctx context.Context, stream, shardID, owner string, opts ...TakeOption) (Lease, error) {
	if err := checkOwned(stream, shardID, owner); err != nil {
		return Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return Lease{}, err
	}
	o := applyTake(opts)
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opts.Clock()
	key := Key(stream, shardID)
	l, ok := m.rows[key]
	if (ok && !o.takeable(l, owner)) || (o.ifUnchanged && l.Counter != o.unchanged) {
		cur := clone(l)
		return Lease{}, &ConflictError{Op: "take", Key: key, Owner: owner, Current: &cur, Err: ErrHeld}
	}
	if !ok {
		l = Lease{Stream: stream, ShardID: shardID}
	}
	l.Owner, l.Expiry, l.Revoked = owner, now.Add(m.opts.Duration), false
	l.Fence, l.WriteSeq = o.fence, 0
	l.Counter++
	if o.parents != nil {
		l.ParentShardIDs = o.parents
	}
	if o.incarnation != 0 {
		l.Incarnation = o.incarnation
	}
	m.rows[key] = l
	return clone(l), nil
}

// update applies f to the row while owner holds it and the checkpoint
// order allows seq ("" when the write carries no checkpoint). f may refuse
// the write by returning an error.
func (m *MemoryStore) update(ctx context.Context, op, stream, shardID, owner, seq string, f func(*Lease) error) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := Key(stream, shardID)
	l, ok := m.rows[key]
	refuse := func(sentinel error) (Lease, error) {
		var cur *Lease
		if ok {
			c := clone(l)
			cur = &c
		}
		return Lease{}, &ConflictError{Op: op, Key: key, Owner: owner, Current: cur, Err: sentinel}
	}
	if !ok || l.Owner != owner || (l.Revoked && op != "release") {
		return refuse(ErrNotOwner)
	}
	if ord, has := m.orders[key]; seq != "" && seq != ShardEnd && (l.Checkpoint == ShardEnd || (has && checkpointOrder(seq) < ord)) {
		return refuse(ErrBehind)
	}
	if err := f(&l); err != nil {
		return Lease{}, err
	}
	if seq != "" {
		m.orders[key] = checkpointOrder(seq)
	}
	m.rows[key] = l
	return clone(l), nil
}

// Renew implements HolderStore.
func (m *MemoryStore) Renew(ctx context.Context, stream, shardID, owner string, rn Renewal) (Lease, error) {
	if err := checkOwned(stream, shardID, owner); err != nil {
		return Lease{}, err
	}
	if err := checkRenewal(rn); err != nil {
		return Lease{}, err
	}
	var landed *Lease // the row, when an earlier attempt of rn landed
	l, err := m.update(ctx, "renew", stream, shardID, owner, rn.Checkpoint, func(l *Lease) error {
		if rn.Seq > 0 && l.WriteSeq >= rn.Seq {
			c := clone(*l)
			landed = &c
			return errLanded
		}
		now := m.opts.Clock()
		l.Expiry = now.Add(m.opts.Duration)
		l.Counter++
		l.Fence = rn.Fence
		if rn.Seq > 0 {
			l.WriteSeq = rn.Seq
		}
		if rn.Checkpoint != "" {
			l.Checkpoint, l.StartApplied = rn.Checkpoint, true
		}
		if rn.MillisBehind != nil {
			l.MillisBehind, l.LagAt = *rn.MillisBehind, time.UnixMilli(now.UnixMilli())
		}
		if rn.Failing != nil {
			l.Failing = *rn.Failing
		}
		return nil
	})
	if landed != nil {
		return *landed, nil
	}
	return l, err
}

// errLanded stops an update whose write an earlier attempt already made.
var errLanded = errors.New("written already")

// Checkpoint implements HolderStore.
func (m *MemoryStore) Checkpoint(ctx context.Context, stream, shardID, owner, seq string, opts ...CheckpointOption) (Lease, error) {
	if err := checkOwned(stream, shardID, owner); err != nil {
		return Lease{}, err
	}
	if err := checkSeq(seq); err != nil {
		return Lease{}, err
	}
	o := applyCheckpoint(opts)
	if o.millisBehind != nil {
		if err := checkLag(*o.millisBehind); err != nil {
			return Lease{}, err
		}
	}
	return m.update(ctx, "checkpoint", stream, shardID, owner, seq, func(l *Lease) error {
		l.Checkpoint = seq
		l.StartApplied = true
		if o.millisBehind != nil {
			l.MillisBehind, l.LagAt = *o.millisBehind, time.UnixMilli(m.opts.Clock().UnixMilli())
		}
		return nil
	})
}

// Pin implements HolderStore.
func (m *MemoryStore) Pin(ctx context.Context, stream, shardID, owner, start string) (Lease, error) {
	if err := checkOwned(stream, shardID, owner); err != nil {
		return Lease{}, err
	}
	if err := checkReset(stream, shardID, start); err != nil {
		return Lease{}, err
	}
	return m.update(ctx, "pin", stream, shardID, owner, "", func(l *Lease) error {
		l.Start, l.StartApplied = start, false
		return nil
	})
}

// Release implements HolderStore.
func (m *MemoryStore) Release(ctx context.Context, stream, shardID, owner string, ho Handover) error {
	if err := checkOwned(stream, shardID, owner); err != nil {
		return err
	}
	if err := checkHandover(ho); err != nil {
		return err
	}
	_, err := m.update(ctx, "release", stream, shardID, owner, "", func(l *Lease) error {
		if ho.To == "" {
			l.Owner, l.Expiry, l.Revoked = "", time.Time{}, false
		} else {
			l.Owner = ho.To
		}
		l.Fence = ho.Fence
		if ho.Failing != nil {
			l.Failing = *ho.Failing
		}
		l.Counter++
		return nil
	})
	return err
}

// Get implements HolderStore.
func (m *MemoryStore) Get(ctx context.Context, stream, shardID string) (Lease, error) {
	if err := checkKey(stream, shardID); err != nil {
		return Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.rows[Key(stream, shardID)]
	if !ok {
		return Lease{}, notFound(stream, shardID)
	}
	return clone(l), nil
}

// GetMany implements CoordinatorStore.
func (m *MemoryStore) GetMany(ctx context.Context, stream string, shardIDs []string) (map[string]Lease, error) {
	if err := checkMany(stream, shardIDs); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Lease, len(shardIDs))
	for _, id := range shardIDs {
		if l, ok := m.rows[Key(stream, id)]; ok {
			out[id] = clone(l)
		}
	}
	return out, nil
}

// List implements CoordinatorStore.
func (m *MemoryStore) List(ctx context.Context, stream string) ([]Lease, error) {
	if err := checkName("stream", stream); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Lease
	for _, l := range m.rows {
		if l.Stream == stream {
			out = append(out, clone(l))
		}
	}
	sortByShard(out)
	return out, nil
}

// SetStart implements CoordinatorStore.
func (m *MemoryStore) SetStart(ctx context.Context, stream, shardID string, st Start) (bool, error) {
	if err := checkStart(stream, shardID, st); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := Key(stream, shardID)
	l, ok := m.rows[key]
	known := ok && st.Incarnation != 0 && l.Incarnation != 0
	if known && l.Incarnation > st.Incarnation {
		return false, nil // a start for a stream deleted since: the row is the new stream's
	}
	stale := known && l.Incarnation < st.Incarnation
	if st.IfFrom && (!ok || stale || l.GenerationOrder != st.From) {
		return false, nil
	}
	if st.Keep {
		l.Generation, l.GenerationOrder = st.Generation, st.Order
		m.rows[key] = l
		return true, nil
	}
	if ok && !stale && (st.IfAbsent || l.GenerationOrder >= st.Order || st.IfUnread && l.Checkpoint != "") {
		return false, nil
	}
	if !ok {
		l = Lease{Stream: stream, ShardID: shardID}
	}
	l.Start, l.Generation, l.GenerationOrder, l.StartApplied = st.Position, st.Generation, st.Order, false
	l.Failing = "" // no failure counts before a new start
	l.Counter++
	if st.Incarnation != 0 {
		l.Incarnation = st.Incarnation
	}
	if st.Fresh {
		l.Checkpoint, l.ParentShardIDs, l.MillisBehind, l.LagAt = "", nil, 0, time.Time{}
	}
	switch {
	case st.Finished:
		l.Checkpoint, l.StartApplied = ShardEnd, true
	case st.ClearCheckpoint:
		l.Checkpoint = ""
	}
	l.Revoked = l.Owner != ""
	m.rows[key] = l
	delete(m.orders, key)  // checkpoints may go anywhere from the new start
	delete(m.windows, key) // and no window describes the records after it
	return true, nil
}

// Delete implements CoordinatorStore.
func (m *MemoryStore) Delete(ctx context.Context, stream, shardID string, counter, incarnation int64) error {
	if err := checkKey(stream, shardID); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := Key(stream, shardID)
	l, ok := m.rows[key]
	if ok && (l.Counter != counter || l.Incarnation != incarnation) {
		cur := clone(l)
		return &ConflictError{Op: "delete", Key: key, Current: &cur, Err: ErrHeld}
	}
	delete(m.rows, key)
	delete(m.orders, key)
	delete(m.windows, key)
	return nil
}

// GetGeneration implements CoordinatorStore.
func (m *MemoryStore) GetGeneration(ctx context.Context, stream string) (Generation, error) {
	if err := checkName("stream", stream); err != nil {
		return Generation{}, err
	}
	if err := ctx.Err(); err != nil {
		return Generation{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.gens[stream]
	if !ok {
		return Generation{}, fmt.Errorf("get generation of %s: %w", stream, ErrNotFound)
	}
	return cloneGeneration(g), nil
}

// PutGeneration implements CoordinatorStore.
func (m *MemoryStore) PutGeneration(ctx context.Context, stream string, g Generation, prevOrder int64) error {
	if err := checkGeneration(stream, g, prevOrder); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.gens[stream]; cur.Order != prevOrder {
		return &ConflictError{Op: "put generation", Key: generationKey(stream), Err: ErrChanged}
	}
	m.gens[stream] = cloneGeneration(g)
	return nil
}

// Reset implements AdminStore.
func (m *MemoryStore) Reset(ctx context.Context, stream, shardID, start string, force bool) (Lease, error) {
	if err := checkReset(stream, shardID, start); err != nil {
		return Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := Key(stream, shardID)
	l, ok := m.rows[key]
	if !ok {
		return Lease{}, fmt.Errorf("reset %s: %w", key, ErrNotFound)
	}
	if !force && l.Owner != "" {
		cur := clone(l)
		return Lease{}, &ConflictError{Op: "reset", Key: key, Current: &cur, Err: ErrHeld}
	}
	l.Start, l.StartApplied, l.Failing = start, false, ""
	l.Revoked = l.Owner != ""
	l.Counter++
	m.rows[key] = l
	delete(m.orders, key)
	delete(m.windows, key)
	return clone(l), nil
}

// Beat implements HeartbeatStore.
func (m *MemoryStore) Beat(ctx context.Context, stream string, hb Heartbeat) (Heartbeat, error) {
	if err := checkBeat(stream, hb); err != nil {
		return Heartbeat{}, err
	}
	if err := ctx.Err(); err != nil {
		return Heartbeat{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := m.hbs[stream]
	if rs == nil {
		rs = map[string]Heartbeat{}
		m.hbs[stream] = rs
	}
	hb.Counter = rs[hb.Runner].Counter + 1
	hb.BeatAt = time.UnixMilli(hb.BeatAt.UnixMilli())
	rs[hb.Runner] = hb
	return hb, nil
}

// Runners implements HeartbeatStore.
func (m *MemoryStore) Runners(ctx context.Context, stream string) ([]Heartbeat, error) {
	if err := checkName("stream", stream); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Heartbeat, 0, len(m.hbs[stream]))
	for _, hb := range m.hbs[stream] {
		out = append(out, hb)
	}
	sortByRunner(out)
	return out, nil
}

// Leave implements HeartbeatStore.
func (m *MemoryStore) Leave(ctx context.Context, stream, runner string, counter int64) error {
	if err := checkLeave(stream, runner, counter); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	hb, ok := m.hbs[stream][runner]
	if ok && hb.Counter != counter {
		return &ConflictError{Op: "leave", Key: runnerKey(stream, runner), Owner: runner, Err: ErrHeld}
	}
	delete(m.hbs[stream], runner)
	return nil
}
