package reader

import (
	"encoding/json"
	"slices"
	"sync"

	"github.com/shardloop/shardloop/pkg/lease"
)

// The retry counts of failing deliveries live in two places: the loop's
// state, handed from run to run, and the lease row (lease.Lease.Failing),
// written with the renewals and the release, and at once after each failed
// delivery (writeFailing): one write per failure, none while deliveries
// succeed. The row is what a new loop starts from when the last one ended
// without handing its state on: a Step Functions execution that failed (a
// crashed or killed run, a Read that failed on a store fault at its take)
// or a runner that died. Without it, a batch whose every delivery fails
// would start again at 0 attempts with each new loop, and where loops end
// that often it would never be given up: the shard would stop for good.

// rowFailures is what the run has recorded on the row of its failing
// deliveries, by FailingSeq. Lanes change it from their goroutines.
type rowFailures struct {
	mu sync.Mutex
	by map[string]Failure
}

// encodeFailures is the row's Failing for fs: a JSON array ordered by
// sequence number, "" when fs is empty. It fits lease.MaxFailing: past it,
// the errors are left out, then the failures latest in the shard.
func encodeFailures(by map[string]Failure) string {
	if len(by) == 0 {
		return ""
	}
	fs := make([]Failure, 0, len(by))
	for _, f := range by {
		fs = append(fs, f)
	}
	slices.SortFunc(fs, func(a, b Failure) int {
		switch {
		case seqLess(a.FailingSeq, b.FailingSeq):
			return -1
		case seqLess(b.FailingSeq, a.FailingSeq):
			return 1
		}
		return 0
	})
	b, _ := json.Marshal(fs) // strings and ints: it always encodes
	if len(b) <= lease.MaxFailing {
		return string(b)
	}
	for i := range fs {
		fs[i].FailedError = ""
	}
	for ; len(fs) > 0; fs = fs[:len(fs)-1] {
		if b, _ = json.Marshal(fs); len(b) <= lease.MaxFailing {
			return string(b)
		}
	}
	return ""
}

// decodeFailures reads a row's Failing; what it cannot read, it drops (the
// counts start again, as they did before the row carried them).
func decodeFailures(s string) []Failure {
	if s == "" {
		return nil
	}
	var fs []Failure
	if err := json.Unmarshal([]byte(s), &fs); err != nil {
		return nil
	}
	return fs
}

// mergeRowFailures adds to carried (by FailingSeq) the failures the row
// records after checkpoint eff: where both know a delivery, the one with
// more attempts wins (a run that ran beside the loop's last one, or a loop
// that ended without handing its state on, may have counted more).
func mergeRowFailures(carried map[string]Failure, row string, eff string) {
	for _, f := range decodeFailures(row) {
		if f.FailingSeq == "" || (eff != "" && (eff == lease.ShardEnd || !seqLess(eff, f.FailingSeq))) {
			continue
		}
		if c, ok := carried[f.FailingSeq]; ok && c.FailedAttempts >= f.FailedAttempts {
			continue
		}
		carried[f.FailingSeq] = f
	}
}

// startRowFailures merges the row's failures into the carried ones and
// records on the row what the run carries (the state may know failures the
// row does not, and the other way round).
func (r *run) startRowFailures(row lease.Lease) {
	eff := effectiveCheckpoint(row)
	mergeRowFailures(r.carriedIn, row.Failing, eff)
	r.rowFails.by = map[string]Failure{}
	for seq, f := range r.carriedIn {
		if eff == "" || (eff != lease.ShardEnd && seqLess(eff, seq)) {
			r.rowFails.by[seq] = f
		}
	}
	r.holder.SetFailing(encodeFailures(r.rowFails.by))
}

// noteFailure records on the row (with the holder's next write) that a
// lane's failing delivery is now now, where it was was (either may be
// empty), and forgets the carried-in failures of the records settled.
func (r *run) noteFailure(was, now Failure, settled []unit) {
	rf := &r.rowFails
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if r.holder == nil || (len(rf.by) == 0 && now.FailingSeq == "") {
		return
	}
	if rf.by == nil {
		rf.by = map[string]Failure{}
	}
	changed := false
	if was.FailingSeq != "" && was.FailingSeq != now.FailingSeq {
		if _, ok := rf.by[was.FailingSeq]; ok {
			delete(rf.by, was.FailingSeq)
			changed = true
		}
	}
	if now.FailingSeq != "" && rf.by[now.FailingSeq] != now {
		rf.by[now.FailingSeq] = now
		changed = true
	}
	for _, u := range settled {
		if _, ok := rf.by[u.seq()]; ok {
			delete(rf.by, u.seq())
			changed = true
		}
	}
	if changed {
		r.holder.SetFailing(encodeFailures(rf.by))
	}
}

// writeFailing writes the run's failing deliveries to the row now, after a
// delivery failed. Left to the next renewal, up to RenewInterval later, the
// count would be lost with a run that died before it; and a loop whose runs
// died that way each time would never give the batch up. A write that fails
// is logged: the next renewal carries the count.
func (r *run) writeFailing() {
	if r.holder == nil {
		return
	}
	if err := r.holder.WriteFailing(r.ctx); err != nil && !r.lost() && r.ctx.Err() == nil {
		r.log.Warn("writing a failed delivery's count to the lease row failed; the next renewal carries it", "err", err)
	}
}
