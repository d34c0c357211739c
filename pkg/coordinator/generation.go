package coordinator

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/shards"
)

// genStep is what a pass does about its subscription's generation record.
type genStep int

const (
	// genFollow: nothing to record; readers follow the rows.
	genFollow genStep = iota
	// genBegin: record a new generation and apply its start.
	genBegin
	// genFinish: the recorded generation is this configuration's and is not
	// yet on every shard it applies to (a pass failed part way).
	genFinish
	// genStale: the recorded generation is newer than this configuration
	// (a coordinator of before a deploy, or the other of two deployments on
	// one table): change nothing.
	genStale
)

func (g genStep) String() string {
	return [...]string{"follow", "begin", "finish", "stale"}[g]
}

// generationID is the id of sub's generation: the configured start's, or
// lease.DefaultGeneration without one.
func generationID(sub Subscription) string {
	if sub.Start == "" {
		return lease.DefaultGeneration
	}
	return sub.Generation
}

// stepFor decides the generation step of a pass from the stream's record
// (found false when there is none) and the stream's current incarnation.
//
//   - No record, or one of an earlier incarnation of the stream: begin,
//     unless that record lists this configuration as superseded: the order
//     of configurations outlives the stream, so a coordinator of an older
//     deploy that is still running when the stream is created again does
//     not begin the new incarnation with its start (and supersede the
//     configuration deployed since).
//   - The record is this configuration's: finish it if not yet applied.
//   - Without a configured start, never begin over a record: follow it.
//   - A configuration deployed before the record's (both deploy times
//     known) is older, though the table has not seen it (its coordinator
//     passed late): stale. One deployed after it is newer, though the
//     record supersedes its id (a deploy changed the start and a later one
//     changed it back): begin.
//   - Otherwise a configuration the record has superseded is older: stale.
//   - Any other configuration is one the table has not seen, so newer than
//     the record: begin. Generations are thereby ordered by deploy time
//     where known, else by when each was first recorded.
//
// A coordinator that does not begin or finish still finishes a recorded
// generation that is not applied (Generation.Configured): stale or not,
// it would otherwise take nothing until the record's own configuration
// passed again, which after a deploy back may be never.
func stepFor(rec lease.Generation, found bool, sub Subscription, incarnation int64) genStep {
	id := generationID(sub)
	sameIncarnation := found && (rec.Incarnation == 0 || incarnation == 0 || rec.Incarnation == incarnation)
	if found && rec.ID != id && !sub.DeployedAt.IsZero() && !rec.DeployedAt.IsZero() && !sub.DeployedAt.Equal(rec.DeployedAt) &&
		(sub.Start != "" || !sameIncarnation) {
		if sub.DeployedAt.Before(rec.DeployedAt) {
			return genStale
		}
		return genBegin
	}
	switch {
	case !sameIncarnation:
		if found && rec.Supersedes(id) {
			return genStale
		}
		return genBegin
	case rec.ID == id:
		if rec.Applied {
			return genFollow
		}
		return genFinish
	case sub.Start == "":
		return genFollow
	case rec.Supersedes(id):
		return genStale
	}
	return genBegin
}

// sequenceOfEarlierStream reports whether sub's start is a sequence
// position that the stream's record shows applied to an earlier
// incarnation of the stream: a sequence number names a record of one
// stream, gone with it when the stream was deleted, so it is never applied
// to a stream created again under the same name.
func sequenceOfEarlierStream(rec lease.Generation, found bool, sub Subscription, incarnation int64) bool {
	if !found || rec.ID != generationID(sub) || rec.Incarnation == 0 || incarnation == 0 || rec.Incarnation == incarnation {
		return false
	}
	p, err := reader.ParsePosition(sub.Start)
	return err == nil && p.Kind == reader.Sequence
}

// pinTip is the text form of a tip pinned at serverNow, Kinesis's time
// (shards.TipPinnedAt).
func pinTip(serverNow time.Time) string {
	return "timestamp:" + strconv.FormatInt(shards.TipPinnedAt(serverNow).UnixMilli(), 10)
}

// newGeneration is the record a pass that begins a generation writes: the
// next order after prev (found false when there is none), prev's id among
// the superseded, the start with the tip pinned, the listed shards.
func newGeneration(prev lease.Generation, found bool, sub Subscription, listing []shards.Shard, incarnation int64, serverNow, now time.Time, name string) lease.Generation {
	g := lease.Generation{
		ID: generationID(sub), Start: sub.Start, Configured: sub.Start, Tip: pinTip(serverNow), Order: 1,
		Incarnation: incarnation, DeployedAt: sub.DeployedAt, RecordedAt: now, RecordedBy: name,
	}
	if sub.Start == "" || sub.Start == string(reader.Latest) {
		g.Start = g.Tip
	}
	if found {
		g.Order = prev.Order + 1
		g.Superseded = slices.Clone(prev.Superseded)
		if prev.ID != g.ID && !slices.Contains(g.Superseded, prev.ID) {
			g.Superseded = append(g.Superseded, prev.ID)
		}
		g.Superseded = slices.DeleteFunc(g.Superseded, func(id string) bool { return id == g.ID })
		if n := len(g.Superseded); n > lease.MaxSuperseded {
			g.Superseded = g.Superseded[n-lease.MaxSuperseded:]
		}
	}
	for _, s := range listing {
		g.Shards = append(g.Shards, s.ID)
	}
	return g
}

// startFor is what the generation g of sub records on shard s, by the kind
// of its configured start:
//
//   - none (the default generation): only on a shard without a row, open at
//     the pinned tip;
//   - latest: every shard at the pinned tip, overriding its checkpoint. A
//     closed shard too: the tip is pinned a second before Kinesis's time
//     and the shards are listed after it, so a shard closed in between
//     holds records newer than the tip; it is read from the tip to its end
//     (at once when there are none), and one already read to its end is
//     not read again. Unless the row's start is a timestamp later than the
//     tip (an older generation's start in the future, or a reader's pin):
//     read under it, the shard skipped the records between the tip and it,
//     so its checkpoint is cleared, SHARD_END included. The row may be read
//     to its end under that start between this pass reading it and the
//     write landing, since the pass lists the shards long before: world 300
//     of the simulator. A shard without a row when the pass read it is
//     cleared too: such a start may reach its row meanwhile (world 1809),
//     and a write over a row the pass did not read is not conditioned on
//     it (IfFrom); over a child read from its first record, clearing costs
//     the records after the tip, read again;
//   - horizon or a timestamp: every shard at the start, its checkpoint
//     (SHARD_END included) cleared, so closed shards still in retention are
//     read again, parents before children;
//   - sequence: the named shard at that record; every other shard keeps its
//     checkpoint, and one without a row opens at the pinned tip (closed or
//     not).
//
// A row of an earlier incarnation of the stream (row, when hasRow) is
// replaced as new.
func startFor(g lease.Generation, sub Subscription, s shards.Shard, row lease.Lease, hasRow bool) (lease.Start, error) {
	st := lease.Start{Position: g.Start, Generation: g.ID, Order: g.Order, Incarnation: g.Incarnation}
	st.Fresh = hasRow && g.Incarnation != 0 && row.Incarnation != 0 && row.Incarnation != g.Incarnation
	if sub.Start == "" {
		st.Position, st.IfAbsent = g.Tip, true
		return st, nil
	}
	p, err := reader.ParsePosition(sub.Start)
	if err != nil {
		return st, err
	}
	switch p.Kind {
	case reader.Latest:
		st.ClearCheckpoint = !hasRow || (!st.Fresh && opensLater(row.Start, g))
	case reader.Horizon, reader.Timestamp:
		st.ClearCheckpoint = true
	case reader.Sequence:
		if p.ShardID != s.ID {
			st.Position, st.IfAbsent = g.Tip, true
		}
	}
	return st, nil
}

// checkSequenceShard refuses a sequence start whose shard the stream does
// not list: the position names one record of one shard.
func checkSequenceShard(sub Subscription, listing []shards.Shard) error {
	if sub.Start == "" {
		return nil
	}
	p, err := reader.ParsePosition(sub.Start)
	if err != nil || p.Kind != reader.Sequence {
		return err
	}
	for _, s := range listing {
		if s.ID == p.ShardID {
			return nil
		}
	}
	return &ConfigError{Field: "Start", Reason: fmt.Sprintf("%s names shard %s, which the stream does not list", sub.Start, p.ShardID)}
}

// adoptsLegacy reports whether rows written before generation records
// existed already carry this configuration's generation: the record is then
// written as applied, without recording the start again over the
// checkpoints read since.
func adoptsLegacy(rows map[string]lease.Lease, sub Subscription) bool {
	if sub.Start == "" {
		return false
	}
	for _, r := range rows {
		if r.Generation == sub.Generation && r.GenerationOrder == 0 {
			return true
		}
	}
	return false
}
