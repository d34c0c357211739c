package reader

// The failure policy of one lane's batch (docs/failure-policy.md) as pure
// state: a plan says what to deliver or give up next and hears what came of
// it. It makes no call, reads no clock and sends nothing; the lane does all
// of that (lane.go) and the table tests in plan_test.go pin the policy.
//
// The plan is a stack of spans to deliver, the next on top, and the span in
// hand with its failed attempts. A failed delivery leaves the span's
// unsettled rest in hand, delivered again after a backoff; with
// BisectBatchOnFunctionError a failed span of more than one unit is replaced by its two
// halves (the first half in hand, the second pushed), without counting an
// attempt. Each failed delivery that does not split counts an attempt for
// what is left; past MaximumRetryAttempts retries the span is given up. Units
// older than MaximumRecordAge are given up before any delivery.

// stepKind is what a plan asks the lane to do.
type stepKind int

const (
	stepDone          stepKind = iota // every unit settled or was given up
	stepDeliver                       // deliver the span
	stepGiveUpAge                     // give the span up: older than MaximumRecordAge
	stepGiveUpRetries                 // give the span up: its retries are spent
)

// step is one thing to do: its kind, the span it applies to, and the failed
// attempts (and last error) of that span so far, for the on-failure record.
type step struct {
	kind     stepKind
	span     span
	attempts int
	lastErr  error
}

// plan is the failure policy's state over one batch of n units.
type plan struct {
	bisect bool
	limit  int // MaximumRetryAttempts as retryLimit gives it: < 0 unlimited

	// carried is the failed-attempt count (and last error) a delivery of a
	// span starts with: one carried from an earlier attempt or run.
	carried func(span) (int, error)

	work     []span // to deliver after cur, the next on top
	cur      span
	attempts int   // failed deliveries of cur that count towards limit
	lastErr  error // the last of them
	fails    int   // failed deliveries since the last progress: the backoff's exponent
}

// newPlan is a plan that delivers spans in order (spans[0] first).
func newPlan(bisect bool, limit int, carried func(span) (int, error), spans ...span) *plan {
	p := &plan{bisect: bisect, limit: limit, carried: carried}
	for i := len(spans) - 1; i >= 0; i-- {
		p.work = append(p.work, spans[i])
	}
	return p
}

// next is what to do now. expired counts the leading units of a span that
// are older than MaximumRecordAge.
func (p *plan) next(expired func(span) int) step {
	for p.cur.lo >= p.cur.hi {
		if len(p.work) == 0 {
			return step{kind: stepDone}
		}
		p.cur, p.work = p.work[len(p.work)-1], p.work[:len(p.work)-1]
		p.attempts, p.lastErr = p.carried(p.cur)
	}
	at := step{span: p.cur, attempts: p.attempts, lastErr: p.lastErr}
	switch k := expired(p.cur); {
	case k > 0:
		at.kind, at.span.hi = stepGiveUpAge, p.cur.lo+k
	case p.spent():
		at.kind = stepGiveUpRetries
	default:
		at.kind = stepDeliver
	}
	return at
}

// spent reports whether the span in hand has used up its retries.
func (p *plan) spent() bool { return p.limit >= 0 && p.attempts > p.limit }

// troubled reports whether the batch has failed since its last progress or
// still carries a failure: a run that must halt stops a troubled batch
// rather than wait for it.
func (p *plan) troubled() bool { return p.fails > 0 || len(p.work) > 0 || p.attempts > 0 }

// delivered: the first k units of the span in hand settled by a delivery.
func (p *plan) delivered(k int) {
	if k > 0 {
		p.cur.lo += k
		p.fails = 0
	}
}

// gaveUp: the first k units of the span in hand were given up.
func (p *plan) gaveUp(k int) { p.cur.lo += k }

// failure is what a plan makes of a failed delivery.
type failure struct {
	split    bool // the span was halved: its first half is delivered next
	attempts int  // otherwise the span's failed attempts, this one counted
	spent    bool // ... which used up its retries: it is given up next
	fails    int  // failed deliveries since the last progress (the backoff's exponent)
}

// failed: a delivery of the span in hand failed (after delivered told what
// of it settled) with err, and units are left.
func (p *plan) failed(err error) failure {
	p.fails++
	p.lastErr = err
	if p.bisect && p.cur.hi-p.cur.lo > 1 {
		mid := p.cur.lo + (p.cur.hi-p.cur.lo+1)/2
		p.work = append(p.work, span{mid, p.cur.hi})
		p.cur.hi = mid
		p.attempts, _ = p.carried(p.cur)
		return failure{split: true, fails: p.fails}
	}
	p.attempts++
	return failure{attempts: p.attempts, spent: p.spent(), fails: p.fails}
}
