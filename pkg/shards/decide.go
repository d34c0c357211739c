package shards

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

// Input is what Decide looks at: one listing of the stream, the lease rows
// of its shards, how the subscription started, and the time.
type Input struct {
	// Shards is the stream's listing (List), open and closed shards.
	Shards []Shard
	// Leases are the stream's lease rows keyed by shard id; a shard without
	// a row is absent. Rows of shards not in Shards are ignored.
	Leases map[string]lease.Lease
	// StartAtTip is true when the subscription started at the tip (LATEST):
	// a closed parent nobody checkpointed then counts as read, since its old
	// records are skipped anyway.
	StartAtTip bool
	// Now is the time leases are judged at.
	Now time.Time
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
)

func (k ReasonKind) String() string {
	switch k {
	case Held:
		return "held"
	case Finished:
		return "finished"
	case WaitingOnParent:
		return "waiting on parent"
	}
	return fmt.Sprintf("ReasonKind(%d)", int(k))
}

// Reason says why one shard is not leasable now.
type Reason struct {
	Kind ReasonKind
	// Owner and Until are the holder and the lease's expiry, for Held.
	Owner string
	Until time.Time
	// Parent is the first parent (ParentID before AdjacentParentID) that is
	// not yet read, for WaitingOnParent.
	Parent string
}

// String describes the reason for people: "held by X until T" (T in UTC,
// RFC 3339), "finished", "waiting on parent P".
func (r Reason) String() string {
	switch r.Kind {
	case Held:
		return fmt.Sprintf("held by %s until %s", r.Owner, r.Until.UTC().Format(time.RFC3339Nano))
	case WaitingOnParent:
		return "waiting on parent " + r.Parent
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
//   - its lease row is absent, has no owner, or has expired (else Held);
//   - it is not finished: a shard whose checkpoint is SHARD_END is never
//     taken again (else Finished);
//   - every parent, both for a merge, is read: finished in the store, or
//     gone from the listing (trimmed by retention), or — when the
//     subscription started at the tip — closed, with no checkpoint, one of
//     the shards the subscription opened with (its row carries the start
//     recorded at startup) and never taken by a reader: no owner and a zero
//     Counter (else WaitingOnParent). A parent without a row was created
//     after startup, so its records count: it never qualifies.
//
// Consequences worth knowing:
//   - A parent listed without a row (tip or not), or with a row
//     whose checkpoint is a sequence number, keeps its children waiting: its
//     records must be read first. The parent itself is leasable, so a
//     reader will read it to SHARD_END.
//   - A closed shard whose row is held is Held; a closed shard never read
//     is leasable like any other: its reader reaches SHARD_END and
//     checkpoints it, which lets its children open.
//   - At the tip, a closed parent that a reader has taken (held now, or
//     released or expired without a checkpoint) does not count as read:
//     the shard may have been open when the subscription started, and
//     that reader may have read records newer than the start without
//     settling them; they come before the child's. The child waits until a
//     reader of the parent writes SHARD_END. The parent stays leasable, so
//     this costs one short read of the parent, never a deadlock.
//   - A finished shard is Finished even if its row still names a live
//     owner, and a held shard is Held whatever its parents' state.
//
// Decide is pure and runs in time linear in the number of shards (plus the
// sort of the leasable ones).
func Decide(in Input) Decision {
	byID := make(map[string]*Shard, len(in.Shards))
	for i := range in.Shards {
		byID[in.Shards[i].ID] = &in.Shards[i]
	}
	d := Decision{NotLeasable: make(map[string]Reason)}

	// read reports whether parent p counts as read to its end.
	read := func(p string) bool {
		row, hasRow := in.Leases[p]
		if hasRow && row.Finished() {
			return true
		}
		ps, listed := byID[p]
		if !listed {
			return true // trimmed by retention
		}
		// At the tip, a closed parent that the subscription opened with (its
		// row carries the start recorded at startup) and that no reader ever
		// took holds only records the subscription skips. Once taken
		// (Counter > 0), a reader may have read records newer than the start
		// without checkpointing them yet, so it must reach SHARD_END like any
		// other parent. A shard with no row at all was created after startup
		// (a split of a split): its records all count, so it never qualifies.
		neverTaken := hasRow && row.Start != "" && row.Counter == 0 && row.Owner == ""
		if in.StartAtTip && ps.Closed() && row.Checkpoint == "" && neverTaken {
			return true
		}
		return false
	}

	seen := make(map[string]bool, len(in.Shards))
	for _, s := range in.Shards {
		if seen[s.ID] {
			continue // a listing that repeats a shard: judge it once
		}
		seen[s.ID] = true
		row, hasRow := in.Leases[s.ID]
		switch {
		case hasRow && row.Finished():
			d.NotLeasable[s.ID] = Reason{Kind: Finished}
			continue
		case hasRow && row.HeldAt(in.Now):
			d.NotLeasable[s.ID] = Reason{Kind: Held, Owner: row.Owner, Until: row.Expiry}
			continue
		}
		waiting := ""
		for _, p := range [2]string{s.ParentID, s.AdjacentParentID} {
			if p != "" && !read(p) {
				waiting = p
				break
			}
		}
		if waiting != "" {
			d.NotLeasable[s.ID] = Reason{Kind: WaitingOnParent, Parent: waiting}
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
