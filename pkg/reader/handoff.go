package reader

import (
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

// out builds the state a run hands the next, from the state it was given
// and what it did. It is called once every goroutine of the run has ended.
func (r *run) out(reason Reason, cont bool) State {
	st := r.in
	st.Reason, st.Continue = reason, cont
	if cont && st.Iteration >= r.o.MaxIterations {
		st.ContinueAsNew, st.Iteration = true, 0
	}
	st.Checkpoint = r.written
	st.Records += r.delivered.Load()
	st.Batches += r.batches.Load()
	st.GivenUp += r.givenUp.Load()
	st.Iterator, st.IteratorIssuedAt = "", 0
	st.Factor, st.SettledTo, st.Lanes, st.SettledUnder = r.factor, "", []LaneState{}, ""
	if r.cur != nil {
		st.FirstSequence = r.cur.firstSeq
		st.ReadErrors = r.cur.errors
	}
	if !cont || r.written == lease.ShardEnd {
		st.Failure = Failure{}
		return st
	}
	iter, issued, whole := r.handOn()
	if r.windowed() && r.behind() {
		// The records settled past the checkpoint are folded only into this
		// run's window state; the next run resumes with the window written
		// at the checkpoint, so it must read them again from there.
		iter, whole = "", false
	}
	if iter != "" {
		st.Iterator, st.IteratorIssuedAt = iter, issued.UnixMilli()
	}
	r.failures(&st, whole)
	return st
}

// handOn returns the iterator to hand on, if any, and whether everything
// the run read up to it settled in order (so the run leaves no records
// settled past its checkpoint).
//
// The iterator is the cursor's when every record read settled; or, when
// what did not settle is whole reads from which no batch was delivered
// (read ahead when the run stopped), the iterator those reads began with.
// Otherwise the next run reopens after the checkpoint.
func (r *run) handOn() (iter string, issued time.Time, whole bool) {
	if r.cursorBusy {
		return "", time.Time{}, false // a read was cut short: where the cursor stands is unknown
	}
	if r.led.empty() {
		return r.cur.iter, r.cur.issued, true
	}
	for k, m := range r.reads {
		if m.first != r.led.head() {
			continue
		}
		for _, later := range r.reads[k:] {
			if later.touched {
				return "", time.Time{}, false
			}
		}
		return m.iter, m.issued, true
	}
	return "", time.Time{}, false
}

// failures sets the retry counts carried to the next run, and, with lanes
// apart (factor > 1, some records settled past the checkpoint), which
// records after the checkpoint are settled (State.SettledTo, State.Lanes).
func (r *run) failures(st *State, whole bool) {
	laneFail := make([]Failure, r.factor)
	for i, l := range r.lanes {
		laneFail[i] = l.fail
	}
	relevant := func(f Failure) bool {
		return !r.settledIn[f.FailingSeq] && (r.written == "" || seqLess(r.written, f.FailingSeq))
	}
	var others []Failure
	for seq, f := range r.carriedIn {
		if !relevant(f) || slicesContainsSeq(laneFail, seq) {
			continue
		}
		if i, ok := r.carriedLane[seq]; ok && laneFail[i].FailingSeq == "" {
			laneFail[i] = f
			continue
		}
		others = append(others, f)
	}
	st.Failure = Failure{}
	for _, f := range append(slicesClone(laneFail), others...) {
		if f.FailingSeq != "" && (st.FailingSeq == "" || seqLess(f.FailingSeq, st.FailingSeq)) {
			st.Failure = f
		}
	}
	if r.factor <= 1 {
		return
	}

	// Lanes apart: each lane's first unsettled record, up to the last record
	// routed to the lanes (not the last read: a read that completed as the
	// run was cut was never routed, and none of its records settled). Else
	// what the previous run left, while this run did not route as far.
	var pending []string
	switch {
	case !whole:
		st.SettledTo = r.routedTo
		pending = make([]string, r.factor)
		for i, b := range r.book {
			if len(b.q) > 0 {
				pending[i] = b.q[0].seq()
			}
		}
	case r.ahead.to != "" && r.ahead.factor == r.factor && (r.routedTo == "" || seqLess(r.routedTo, r.ahead.to)):
		st.SettledTo, pending = r.ahead.to, r.ahead.pending
	}
	if st.SettledTo == "" && !hasFailure(laneFail) {
		return
	}
	if st.SettledTo != "" && r.written == "" && startPending(r.cur.row) {
		st.SettledUnder = startOf(r.cur.row)
	}
	st.Lanes = make([]LaneState, r.factor)
	for i := range st.Lanes {
		st.Lanes[i].Failure = laneFail[i]
		if pending != nil {
			st.Lanes[i].Pending = pending[i]
		}
	}
}

func slicesContainsSeq(fs []Failure, seq string) bool {
	for _, f := range fs {
		if f.FailingSeq == seq {
			return true
		}
	}
	return false
}

func slicesClone(fs []Failure) []Failure { return append([]Failure(nil), fs...) }

func hasFailure(fs []Failure) bool {
	for _, f := range fs {
		if f.FailingSeq != "" {
			return true
		}
	}
	return false
}
