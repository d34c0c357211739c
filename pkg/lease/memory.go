package lease

import (
	"context"
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
}

var (
	_ Store             = (*MemoryStore)(nil)
	_ LagCheckpointer   = (*MemoryStore)(nil)
	_ RenewCheckpointer = (*MemoryStore)(nil)
)

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
	return &MemoryStore{opts: o, rows: map[string]Lease{}, gens: map[string]Generation{}, hbs: map[string]map[string]Heartbeat{}, windows: map[string]Window{}}, nil
}

func clone(l Lease) Lease {
	l.ParentShardIDs = slices.Clone(l.ParentShardIDs)
	return l
}

func cloneGeneration(g Generation) Generation {
	g.Superseded, g.Shards = slices.Clone(g.Superseded), slices.Clone(g.Shards)
	return g
}

// takeable reports whether a take by owner with o may have row l. A
// revoked child is not taken by its holder's loop: the new start may have
// opened a parent again, and only a coordinator checks the parents.
func (o takeOptions) takeable(l Lease, owner string) bool {
	if l.Owner == "" || (o.ifCounter && l.Counter == o.counter) {
		return true
	}
	if l.Revoked && len(l.ParentShardIDs) > 0 {
		return false
	}
	return l.Owner == owner || o.inFamily(l.Owner)
}

// Take implements Store.
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

// update applies f to the row while owner holds it.
func (m *MemoryStore) update(ctx context.Context, op, stream, shardID, owner string, f func(*Lease)) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := Key(stream, shardID)
	l, ok := m.rows[key]
	if !ok || l.Owner != owner || (l.Revoked && op != "release") {
		var cur *Lease
		if ok {
			c := clone(l)
			cur = &c
		}
		return Lease{}, &ConflictError{Op: op, Key: key, Owner: owner, Current: cur, Err: ErrNotOwner}
	}
	f(&l)
	m.rows[key] = l
	return clone(l), nil
}

// Renew implements Store.
func (m *MemoryStore) Renew(ctx context.Context, stream, shardID, owner string) (Lease, error) {
	if err := checkOwned(stream, shardID, owner); err != nil {
		return Lease{}, err
	}
	return m.update(ctx, "renew", stream, shardID, owner, func(l *Lease) {
		l.Expiry = m.opts.Clock().Add(m.opts.Duration)
		l.Counter++
	})
}

// Checkpoint implements Store.
func (m *MemoryStore) Checkpoint(ctx context.Context, stream, shardID, owner, seq string) (Lease, error) {
	if err := checkOwned(stream, shardID, owner); err != nil {
		return Lease{}, err
	}
	if err := checkSeq(seq); err != nil {
		return Lease{}, err
	}
	return m.update(ctx, "checkpoint", stream, shardID, owner, func(l *Lease) {
		l.Checkpoint = seq
		l.StartApplied = true
	})
}

// RenewCheckpoint implements RenewCheckpointer.
func (m *MemoryStore) RenewCheckpoint(ctx context.Context, stream, shardID, owner, seq string, millisBehind *int64) (Lease, error) {
	if err := checkOwned(stream, shardID, owner); err != nil {
		return Lease{}, err
	}
	if err := checkSeq(seq); err != nil {
		return Lease{}, err
	}
	if millisBehind != nil {
		if err := checkLag(*millisBehind); err != nil {
			return Lease{}, err
		}
	}
	return m.update(ctx, "renew", stream, shardID, owner, func(l *Lease) {
		now := m.opts.Clock()
		l.Expiry = now.Add(m.opts.Duration)
		l.Counter++
		l.Checkpoint, l.StartApplied = seq, true
		if millisBehind != nil {
			l.MillisBehind, l.LagAt = *millisBehind, time.UnixMilli(now.UnixMilli())
		}
	})
}

// CheckpointWithLag implements LagCheckpointer.
func (m *MemoryStore) CheckpointWithLag(ctx context.Context, stream, shardID, owner, seq string, millisBehind int64) (Lease, error) {
	if err := checkOwned(stream, shardID, owner); err != nil {
		return Lease{}, err
	}
	if err := checkSeq(seq); err != nil {
		return Lease{}, err
	}
	if err := checkLag(millisBehind); err != nil {
		return Lease{}, err
	}
	return m.update(ctx, "checkpoint", stream, shardID, owner, func(l *Lease) {
		l.Checkpoint = seq
		l.StartApplied = true
		l.MillisBehind, l.LagAt = millisBehind, time.UnixMilli(m.opts.Clock().UnixMilli())
	})
}

// Pin implements Store.
func (m *MemoryStore) Pin(ctx context.Context, stream, shardID, owner, start string) (Lease, error) {
	if err := checkOwned(stream, shardID, owner); err != nil {
		return Lease{}, err
	}
	if err := checkReset(stream, shardID, start); err != nil {
		return Lease{}, err
	}
	return m.update(ctx, "pin", stream, shardID, owner, func(l *Lease) {
		l.Start, l.StartApplied = start, false
	})
}

// Release implements Store.
func (m *MemoryStore) Release(ctx context.Context, stream, shardID, owner string) error {
	if err := checkOwned(stream, shardID, owner); err != nil {
		return err
	}
	_, err := m.update(ctx, "release", stream, shardID, owner, func(l *Lease) {
		l.Owner, l.Expiry, l.Revoked = "", time.Time{}, false
	})
	return err
}

// Get implements Store.
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

// GetMany implements Store.
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

// List implements Store.
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

// SetStart implements Store.
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
	stale := ok && st.Incarnation != 0 && l.Incarnation != 0 && l.Incarnation != st.Incarnation
	if ok && !stale && (st.IfAbsent || l.GenerationOrder >= st.Order) {
		return false, nil
	}
	if !ok {
		l = Lease{Stream: stream, ShardID: shardID}
	}
	l.Start, l.Generation, l.GenerationOrder, l.StartApplied = st.Position, st.Generation, st.Order, false
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
	return true, nil
}

// Delete implements Store.
func (m *MemoryStore) Delete(ctx context.Context, stream, shardID string, counter int64) error {
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
	if ok && l.Counter != counter {
		cur := clone(l)
		return &ConflictError{Op: "delete", Key: key, Current: &cur, Err: ErrHeld}
	}
	delete(m.rows, key)
	return nil
}

// GetGeneration implements Store.
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

// PutGeneration implements Store.
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

// Reset implements Store.
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
	l.Start, l.StartApplied = start, false
	l.Revoked = l.Owner != ""
	l.Counter++
	m.rows[key] = l
	return clone(l), nil
}

// Beat implements Store.
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

// Runners implements Store.
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

// Leave implements Store.
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
