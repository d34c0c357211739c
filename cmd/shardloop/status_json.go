package main

import (
	"encoding/json"
	"io"
	"slices"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

// StatusSchemaVersion is the "schema" of status --output json. It goes up
// when a field changes meaning or goes away; new fields may appear without
// it changing. docs/operations.md documents the fields.
const StatusSchemaVersion = 1

// The states of a shard in status --output json ("state"): what the table's
// STATE column says in words.
const (
	stateFinished  = "finished"           // read to its end (SHARD_END)
	stateGone      = "gone"               // trimmed from the stream by retention; its row stays while a child needs it
	stateWaiting   = "waiting_for_parent" // a parent ("waiting_for") is not read to its end yet
	stateRevoked   = "revoked"            // a new start revoked the lease; its reader stops at its next renewal
	stateReading   = "reading"            // held by a live owner by its own clock
	stateExpired   = "expired"            // the owner's lease expired by its own clock; the coordinator takes it over
	stateNotOpened = "not_started"        // no lease row yet: the coordinator opens it at its next pass
	stateFree      = "free"               // a row without an owner: the coordinator takes it at its next pass
)

// statusDoc is the document status --output json writes.
type statusDoc struct {
	Schema int        `json:"schema"`
	Stream string     `json:"stream"`
	Table  string     `json:"table"`
	Time   time.Time  `json:"time"`
	Shards []shardDoc `json:"shards"`
	// Runners are the shardloop run processes sharing the stream; empty
	// when none beats for it.
	Runners []runnerDoc `json:"runners"`
}

type shardDoc struct {
	ShardID string   `json:"shard_id"`
	Parents []string `json:"parents"`
	// Listed is false for a shard gone from the listing (trimmed).
	Listed bool `json:"listed"`
	// Owner is "" when no one holds the lease; LeaseExpiry is null then.
	Owner        string     `json:"owner"`
	LeaseExpiry  *time.Time `json:"lease_expiry"`
	LeaseCounter int64      `json:"lease_counter"`
	// Checkpoint is the whole sequence number, "SHARD_END", or "" for none.
	Checkpoint string `json:"checkpoint"`
	// LagMillis is how far behind the reader is, null when unknown;
	// LagSource says where it comes from: "probe" (a read after the
	// checkpoint now) or "checkpoint" (recorded with the last checkpoint,
	// at LagRecordedAt).
	LagMillis     *int64     `json:"lag_ms"`
	LagSource     string     `json:"lag_source"`
	LagRecordedAt *time.Time `json:"lag_recorded_at"`
	// CaughtUp is what the probe found: nothing after the checkpoint;
	// null when the shard was not probed (or the probe failed).
	CaughtUp *bool `json:"caught_up"`
	// OpensAt is a start not yet applied that the next reader opens at
	// (a subscription's start or a reset), "" for none.
	OpensAt string `json:"opens_at"`
	// State is one of the state constants; WaitingFor names the parent
	// for waiting_for_parent.
	State      string `json:"state"`
	WaitingFor string `json:"waiting_for,omitempty"`
	// Detail is the STATE column of the table, in words.
	Detail string `json:"detail"`
}

type runnerDoc struct {
	Runner string `json:"runner"`
	Host   string `json:"host"`
	PID    int    `json:"pid"`
	// Leases is how many lease rows name it the owner now; LeasesAtBeat
	// what it reported at its last beat.
	Leases       int        `json:"leases"`
	LeasesAtBeat int        `json:"leases_at_beat"`
	LastBeat     *time.Time `json:"last_beat"`
	// Leaving is true for a runner listed without a beat (joining or
	// leaving).
	Leaving bool `json:"leaving"`
}

// writeStatusJSON writes what printStatus and printRunners show as one
// JSON document (statusDoc).
func writeStatusJSON(w io.Writer, stream, table string, views []shardView, hs []lease.Heartbeat, rows []lease.Lease, now time.Time) error {
	doc := statusDoc{Schema: StatusSchemaVersion, Stream: stream, Table: table, Time: now.UTC(), Shards: []shardDoc{}, Runners: []runnerDoc{}}
	for _, v := range views {
		r := v.Row
		d := shardDoc{ShardID: v.ID, Parents: slices.Clone(v.Parents), Listed: v.Listed, Owner: r.Owner, LeaseCounter: r.Counter, Checkpoint: r.Checkpoint}
		if d.Parents == nil {
			d.Parents = []string{}
		}
		if r.Owner != "" && !r.Expiry.IsZero() {
			d.LeaseExpiry = utc(r.Expiry)
		}
		if l, ok := lagOf(v, now); ok {
			ms := l.behind.Milliseconds()
			d.LagMillis, d.LagSource = &ms, l.source
			if !l.recordedAt.IsZero() {
				d.LagRecordedAt = utc(l.recordedAt)
			}
		}
		if p := v.Probe; p != nil && p.Err == nil {
			d.CaughtUp = &p.CaughtUp
		}
		if r.Start != "" && !r.StartApplied && !r.Finished() {
			d.OpensAt = r.Start
		}
		d.State, d.Detail = state(v, now)
		if d.State == stateWaiting {
			d.WaitingFor = v.Reason.Parent
		}
		doc.Shards = append(doc.Shards, d)
	}
	held := heldByRunner(rows)
	for _, hb := range hs {
		rd := runnerDoc{Runner: hb.Runner, Host: hb.Host, PID: hb.PID, Leases: held[hb.Runner], LeasesAtBeat: hb.Leases, Leaving: hb.Counter == 0}
		if !hb.BeatAt.IsZero() {
			rd.LastBeat = utc(hb.BeatAt)
		}
		doc.Runners = append(doc.Runners, rd)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

func utc(t time.Time) *time.Time {
	u := t.UTC()
	return &u
}

// heldByRunner counts the rows each runner is the owner of.
func heldByRunner(rows []lease.Lease) map[string]int {
	held := map[string]int{}
	for _, r := range rows {
		if r.Owner != "" {
			held[lease.OwnerRunner(r.Owner)]++
		}
	}
	return held
}

// lagValue is how far behind a shard's reader is, and where that comes from.
type lagValue struct {
	behind     time.Duration
	source     string    // "probe" or "checkpoint"
	recordedAt time.Time // for "checkpoint": when the lag was recorded
}

// lagOf is the shard's lag: from the probe when there was one (0 when
// nothing waits after the checkpoint, else how long ago the oldest waiting
// record arrived), else as recorded with the last checkpoint; false when
// unknown or finished.
func lagOf(v shardView, now time.Time) (lagValue, bool) {
	r := v.Row
	if r.Finished() {
		return lagValue{}, false
	}
	if p := v.Probe; p != nil && p.Err == nil {
		switch {
		case p.CaughtUp:
			return lagValue{source: "probe"}, true
		case !p.Oldest.IsZero():
			return lagValue{behind: max(now.Sub(p.Oldest), 0), source: "probe"}, true
		default:
			return lagValue{behind: p.Behind, source: "probe"}, true
		}
	}
	if r.LagAt.IsZero() {
		return lagValue{}, false
	}
	return lagValue{behind: time.Duration(r.MillisBehind) * time.Millisecond, source: "checkpoint", recordedAt: r.LagAt}, true
}
