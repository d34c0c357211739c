package shards

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

// Input is what Decide looks at: one listing of the stream, the lease rows
// of its shards, and what a taker's Observer concluded about them.
type Input struct {
	// Shards is the stream's listing (List), open and closed shards.
	Shards []Shard
	// Leases are the stream's lease rows keyed by shard id; a shard without
	// a row is absent. Rows of shards not in Shards are ignored.
	Leases map[string]lease.Lease
	// Verdicts are the taker's verdicts (lease.Observer) on the rows, by
	// shard id. A row that names an owner is Held unless its verdict says
	// the lease lapsed; a row without an owner is free, unless it records a
	// fence (invocations its last holder started may still run) that its
	// verdict does not say has passed: then it is Fenced.
	Verdicts map[string]lease.Verdict
	// Incarnation is the stream's creation time (Unix ms). A row that
	// records another incarnation belongs to a stream deleted and created
	// again under the same name: it is Stale, and counts as no row for its
	// children. 0 skips the check.
	Incarnation int64
}

// ReasonKind says why a shard is not leasable.
type ReasonKind int

const (
	// Held: a live owner holds the shard's lease.
	Held ReasonKind = iota + 1
	// Finished: the shard's checkpoint is SHARD_END; it is never read again.
	Finished
	// WaitingOnParent: a parent is not yet read to its end.
	WaitingOnParent
	// Stale: the row belongs to an earlier incarnation of the stream; it
	// must be removed (once nobody holds it) before the shard is taken.
	Stale
	// Fenced: the row was released, but invocations its last holder
	// started may still be running (its fence); it is taken once they
	// could have ended.
	Fenced
	// WaitingOnDescendant: a shard below it in the lineage (a child, a
	// grandchild), which carries its keys, is still held under a revoked
	// lease (a new start re-opened this shard) that has not lapsed, or was
	// released with a fence that has not passed: the old holder's
	// invocations may still run, so the shard's keys are not delivered
	// again until they could have ended.
	WaitingOnDescendant
)

func (k ReasonKind) String() string {
	switch k {
	case Held:
		return "held"
	case Finished:
		return "finished"
	case WaitingOnParent:
		return "waiting on parent"
	case Stale:
		return "row of an earlier incarnation of the stream"
	case Fenced:
		return "released; its last holder's invocations may still run"
	case WaitingOnDescendant:
		return "waiting on a descendant's revoked holder"
	}
	return fmt.Sprintf("ReasonKind(%d)", int(k))
}

// Reason says why one shard is not leasable now.
type Reason struct {
	Kind ReasonKind
	// Owner and Until are the holder and when its lease lapses if it is
	// not renewed (by the taker's clock; zero when unknown), for Held; for
	// Fenced, Until is when its fence passes. For WaitingOnDescendant they
	// are the descendant's (Owner empty when its row was released).
	Owner string
	Until time.Time
	// Parent is the first parent (ParentID before AdjacentParentID) that is
	// not yet read, for WaitingOnParent.
	Parent string
	// Descendant is the shard waited on, for WaitingOnDescendant: of the
	// shards below this one that keep it waiting, the first by id.
	Descendant string
}

// String describes the reason for people: "held by X until T" (T in UTC,
// RFC 3339), "finished", "waiting on parent P" (or "P's fence until T").
func (r Reason) String() string {
	switch r.Kind {
	case Held:
		if r.Until.IsZero() {
			return "held by " + r.Owner
		}
		return fmt.Sprintf("held by %s until %s", r.Owner, r.Until.UTC().Format(time.RFC3339Nano))
	case WaitingOnParent:
		if !r.Until.IsZero() {
			return fmt.Sprintf("waiting on parent %s's fence until %s", r.Parent, r.Until.UTC().Format(time.RFC3339Nano))
		}
		return "waiting on parent " + r.Parent
	case WaitingOnDescendant:
		s := "waiting on descendant " + r.Descendant
		if r.Owner != "" {
			s += "'s revoked holder " + r.Owner
		} else {
			s += "'s fence"
		}
		if !r.Until.IsZero() {
			s += " until " + r.Until.UTC().Format(time.RFC3339Nano)
		}
		return s
	case Fenced:
		if !r.Until.IsZero() {
			return fmt.Sprintf("released; its last holder's invocations may run until %s", r.Until.UTC().Format(time.RFC3339Nano))
		}
	}
	return r.Kind.String()
}

// Decision is Decide's answer. Every listed shard is in exactly one of
// Leasable and NotLeasable.
type Decision struct {
	// Leasable are the shards whose lease may be taken now, parents before
	// children (by depth in the lineage), then by shard id.
	Leasable []Shard
	// NotLeasable explains every other listed shard, keyed by shard id.
	NotLeasable map[string]Reason
}

// Decide says which shards may be leased now, by the rules of SPEC §3.
//
// A shard is leasable when
//   - its row, if any, is of this incarnation of the stream (else Stale);
//   - the row is absent, names no owner, or its lease lapsed by the taker's
//     verdict (else Held); a row released with a fence only once its
//     verdict says the fence passed (else Fenced);
//   - it is not finished: a shard whose checkpoint is SHARD_END is never
//     taken again (else Finished);
//   - every parent, both for a merge, is read: finished in the store, or
//     gone from the listing (trimmed by retention) (else WaitingOnParent);
//     a finished parent whose row still names its holder (the release
//     after SHARD_END not written yet, or failed) or has a fence
//     (invocations its last holder gave up on may still run, and they
//     carry the children's keys) only once its verdict says the lease
//     lapsed and the fence passed (else WaitingOnParent, Until then);
//   - no listed shard below it in the lineage (a child, a grandchild: they
//     carry its keys) is held under a revoked lease that has not lapsed by
//     the taker's verdict, nor released with a fence that has not passed
//     (else WaitingOnDescendant). Only a new start re-opens a shard whose
//     children were read (it records the start on them too and revokes
//     their holders, who stop at their next renewal); their invocations
//     may run on until the lease and its fence have passed, so the
//     re-opened shard, whose keys they share, waits for them as a revoked
//     shard's own taker does.
//
// Consequences worth knowing:
//   - A parent listed without a row, or with a row whose checkpoint is a
//     sequence number or a start not yet read, keeps its children waiting:
//     its records must be read first. The parent itself is leasable, so a
//     reader will read it to SHARD_END. Nothing about a parent is inferred
//     from its state: a shard that was already closed when a generation
//     started at the tip is recorded finished by the coordinator then.
//   - A closed shard never read is leasable like any other: its reader
//     reaches SHARD_END and checkpoints it, which lets its children open.
//   - A finished shard is Finished even if its row still names an owner,
//     and a held shard is Held whatever its parents' state.
//   - A descendant held under a lease that is not revoked does not keep
//     its ancestors waiting: it would renew for ever, and only an
//     operator's reset of the ancestor alone brings that about.
//
// Decide is pure and runs in time linear in the number of shards (plus the
// sort of the leasable ones).
func Decide(in Input) Decision {
	byID := make(map[string]*Shard, len(in.Shards))
	for i := range in.Shards {
		byID[in.Shards[i].ID] = &in.Shards[i]
	}
	d := Decision{NotLeasable: make(map[string]Reason)}
	row := func(id string) (lease.Lease, bool, bool) {
		r, ok := in.Leases[id]
		stale := ok && in.Incarnation != 0 && r.Incarnation != 0 && r.Incarnation != in.Incarnation
		return r, ok && !stale, stale
	}

	// read reports whether parent p counts as read to its end, and when
	// not, when its fence passes (zero: not read).
	read := func(p string) (bool, time.Time) {
		if r, ok, _ := row(p); ok && r.Finished() {
			// Its last holder may have given up on invocations that run
			// on: they carry the keys its children carry. Until it has
			// released the row (it may not have yet, or the release
			// failed), its lease covers them; after, the row's fence.
			if v := in.Verdicts[p]; (r.Held() || r.Fence > 0) && !v.Available() {
				return false, v.LapsesAt
			}
			return true, time.Time{}
		}
		_, listed := byID[p]
		return !listed, time.Time{} // trimmed by retention
	}

	below := blockedByDescendants(byID, in, row)

	seen := make(map[string]bool, len(in.Shards))
	for _, s := range in.Shards {
		if seen[s.ID] {
			continue // a listing that repeats a shard: judge it once
		}
		seen[s.ID] = true
		r, hasRow, stale := row(s.ID)
		switch {
		case stale:
			d.NotLeasable[s.ID] = Reason{Kind: Stale}
			continue
		case hasRow && r.Finished():
			d.NotLeasable[s.ID] = Reason{Kind: Finished}
			continue
		case hasRow && r.Held() && !in.Verdicts[s.ID].Lapsed:
			d.NotLeasable[s.ID] = Reason{Kind: Held, Owner: r.Owner, Until: in.Verdicts[s.ID].LapsesAt}
			continue
		case hasRow && !r.Held() && r.Fence > 0 && !in.Verdicts[s.ID].Available():
			d.NotLeasable[s.ID] = Reason{Kind: Fenced, Until: in.Verdicts[s.ID].LapsesAt}
			continue
		}
		waiting, until := "", time.Time{}
		for _, p := range [2]string{s.ParentID, s.AdjacentParentID} {
			if p == "" {
				continue
			}
			if ok, at := read(p); !ok {
				waiting, until = p, at
				break
			}
		}
		if waiting != "" {
			d.NotLeasable[s.ID] = Reason{Kind: WaitingOnParent, Parent: waiting, Until: until}
			continue
		}
		if why, ok := below[s.ID]; ok {
			d.NotLeasable[s.ID] = why
			continue
		}
		d.Leasable = append(d.Leasable, s)
	}

	depths := lineageDepths(byID)
	slices.SortFunc(d.Leasable, func(a, b Shard) int {
		return cmp.Or(cmp.Compare(depths[a.ID], depths[b.ID]), cmp.Compare(a.ID, b.ID))
	})
	return d
}

// blockedByDescendants returns, by shard id, the WaitingOnDescendant reason
// of every listed shard that has a listed descendant whose old holder may
// still deliver its keys: its row is held under a revoked lease that has
// not lapsed, or released with a fence that has not passed. Each such
// descendant marks its ancestors, in id order, stopping at a shard marked
// already (whose ancestors are marked too), so every shard is marked once
// and names the first such descendant by id. A cycle (which Kinesis never
// reports) ends at a shard marked already.
func blockedByDescendants(byID map[string]*Shard, in Input, row func(string) (lease.Lease, bool, bool)) map[string]Reason {
	var blockers []string
	for id := range byID {
		r, ok, _ := row(id)
		if !ok || r.Finished() {
			continue
		}
		v := in.Verdicts[id]
		if (r.Held() && r.Revoked && !v.Lapsed) || (!r.Held() && r.Fence > 0 && !v.Available()) {
			blockers = append(blockers, id)
		}
	}
	if len(blockers) == 0 {
		return nil
	}
	slices.Sort(blockers)
	out := map[string]Reason{}
	for _, b := range blockers {
		r := in.Leases[b]
		why := Reason{Kind: WaitingOnDescendant, Descendant: b, Owner: r.Owner, Until: in.Verdicts[b].LapsesAt}
		stack := byID[b].Parents()
		for len(stack) > 0 {
			p := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			s, listed := byID[p]
			if _, marked := out[p]; marked || !listed {
				continue
			}
			out[p] = why
			stack = append(stack, s.Parents()...)
		}
	}
	return out
}

// lineageDepths gives every listed shard its depth: 0 for a shard with no
// listed parent, else one more than its deepest listed parent. Each shard is
// visited once; a cycle (which Kinesis never reports) is cut where found.
func lineageDepths(byID map[string]*Shard) map[string]int {
	depth := make(map[string]int, len(byID))
	const visiting = -1
	var visit func(id string) int
	visit = func(id string) int {
		if d, ok := depth[id]; ok {
			if d == visiting {
				return 0
			}
			return d
		}
		s, ok := byID[id]
		if !ok {
			return -1 // not listed: its child is a root
		}
		depth[id] = visiting
		d := 0
		for _, p := range [2]string{s.ParentID, s.AdjacentParentID} {
			if p != "" {
				d = max(d, visit(p)+1)
			}
		}
		depth[id] = d
		return d
	}
	for id := range byID {
		visit(id)
	}
	return depth
}
