package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/shardloop/shardloop/pkg/reader"
)

// Tumbling windows (ReaderConfig.TumblingWindow). The target is then a
// reader.WindowTarget that folds the records of each window into its state.
// The state is compact: {"v":"w<n>","n":"<records folded>"}, where w<n>
// names a fold the checker registered (the state it was folded from, the
// window's bounds and shard, the records added), so a state names its
// whole content without growing with it; the reader carries it as any
// state, in its memory and in the lease table beside the checkpoint.
//
// What is checked, and why it is what is promised:
//
//   - (bounds) every record a windowed invocation carries arrived within
//     the window's bounds (arrival times grow along a shard here, so "a
//     record stamped before its window goes with it" never applies), and
//     the bounds are [k·W, (k+1)·W);
//   - (state) an invocation receives the state the previous invocation of
//     the window in the same reader run returned and the run kept (the
//     reader keeps a state when the answer settled records, or, for a
//     final invocation, succeeded), or, when the run kept none for the
//     window, {} or a state written to the lease table for that shard and
//     window (a run resumes from what was checkpointed; a run that finds
//     no window matching its checkpoint starts a fresh one). Never another
//     window's or another shard's, never one the target did not return;
//     and a run does not go on to a later window before the final
//     invocation of the one it holds succeeded;
//   - (complete) the state a successful final invocation receives holds
//     every record of its shard that arrived within the window and is owed
//     (by the rule its run reads under; a filtered-out record is owed by
//     none) and was never given up, at least once; duplicates are allowed
//     (at least once: a takeover delivers again what followed the last
//     checkpoint, and the state resumes from that checkpoint's). Finals by
//     a run of an earlier epoch (a start recorded since revoked it) are not
//     held to it.
//
// What is not promised and not checked: that every window gets a final
// invocation before the world ends (an idle shard's last window closes
// once it is read at the tip after the window's end), and that a window's
// records are folded exactly once.

// fold is one state the target returned: the state it was folded from
// (nil: {}), and the records it added.
type fold struct {
	parent *fold
	shard  *shardState
	start  time.Time
	recs   []*rec
	n      int  // records folded in all, duplicates counted
	stored bool // written to the lease table with a checkpoint
}

// keptWindow is the state a reader run kept for its window.
type keptWindow struct {
	start  time.Time
	state  *fold // nil: {}
	closed bool  // the window's final invocation succeeded
}

// windowFinal is a successful final invocation, checked at the end.
type windowFinal struct {
	shard      *shardState
	start, end time.Time
	state      *fold
	order      int64
	owner      string
	at         time.Duration
}

// stateToken is the fold a state names ("" for {} or no state).
func stateToken(state []byte) string {
	if v := fieldValues(state, `"v":"`); len(v) > 0 {
		return v[0]
	}
	return ""
}

// DeliverWindow implements reader.WindowTarget.
func (t *target) DeliverWindow(ctx context.Context, b reader.WindowBatch) (int, json.RawMessage, error) {
	var (
		n     int
		state json.RawMessage
		err   error
	)
	if t.lam != nil {
		n, state, err = t.lam.DeliverWindow(ctx, b)
	} else {
		seqs := make([]string, len(b.Records))
		for i, r := range b.Records {
			seqs[i] = aws.ToString(r.SequenceNumber)
		}
		var o outcome
		n, state, o = t.window(ctx, b.ShardID, seqs, b.Window, b.State, b.Final)
		switch o {
		case outTimeout:
			n, state, err = 0, nil, fmt.Errorf("sim: target timed out after %s: %w", t.w.cfg.Reader.FunctionTimeout, errFunction)
		case outFailed:
			n, state, err = 0, nil, errFunction
		case outLost:
			n, state, err = 0, nil, errAnswerLost
		case outCancelled:
			n, state, err = 0, nil, ctx.Err()
		case outBroken:
			n, state, err = 0, nil, errBroken
		}
	}
	owner, run, _ := ownerOf(ctx)
	t.w.chk.windowAnswered(owner, run, b.ShardID, b.Window, b.Final, n, state, err)
	return n, state, err
}

// window is the function at work on a windowed invocation: seqs of a
// shard's window with its state, or (final) the window's final invocation.
// It returns the state it folded, or nil when it answers without one.
func (t *target) window(ctx context.Context, shardID string, seqs []string, win reader.Window, state []byte, final bool) (int, json.RawMessage, outcome) {
	w := t.w
	owner, run, _ := ownerOf(ctx)
	tok := stateToken(state)
	w.chk.windowInvoked(owner, run, shardID, seqs, win, state, tok, final)
	noState := w.draws(ctx, "window", shardID).hit(w.cfg.Faults.TargetNoState)
	var (
		n int
		o outcome
	)
	if final {
		o = t.runFinal(ctx, shardID, noState)
	} else {
		n, o = t.run(ctx, shardID, seqs, noState)
	}
	switch {
	case o == outNoState:
		return n, nil, outOK
	case o == outOK || o == outLost:
		return n, w.chk.fold(tok, shardID, seqs[:n], win), o
	}
	return 0, nil, o
}

// runFinal is the function at work on a final invocation: latency, and the
// faults of any invocation.
func (t *target) runFinal(ctx context.Context, shardID string, noState bool) outcome {
	w := t.w
	f := &w.cfg.Faults
	owner, _, _ := ownerOf(ctx)
	rs := w.draws(ctx, "target", shardID)
	lat := rs.latency(f.TargetLatency, f.TargetTail)
	x := rs.float()
	if err := w.sleep(ctx, min(lat, w.cfg.Reader.FunctionTimeout)); err != nil {
		return outCancelled
	}
	switch {
	case lat > w.cfg.Reader.FunctionTimeout:
		w.tr.add(w.shardName(shardID), owner, "final invocation of a window timed out")
		return outTimeout
	case x < f.TargetFail:
		w.tr.add(w.shardName(shardID), owner, "final invocation of a window failed (injected)")
		return outFailed
	case noState:
		w.tr.add(w.shardName(shardID), owner, "final invocation of a window answered without a state (injected)")
		return outNoState
	case x < f.TargetFail+f.TargetLost:
		w.tr.add(w.shardName(shardID), owner, "final invocation of a window ran, answer lost (injected)")
		return outLost
	}
	w.tr.add(w.shardName(shardID), owner, "final invocation of a window")
	return outOK
}

// invokeWindow is function.Invoke for an event of a tumbling window.
func (fn function) invokeWindow(ctx context.Context, payload []byte) ([]byte, string, error) {
	seqs := fieldValues(payload, `"sequenceNumber":"`)
	ids := fieldValues(payload, `"shardId":"`)
	starts, ends := fieldValues(payload, `"start":"`), fieldValues(payload, `"end":"`)
	i := bytes.Index(payload, []byte(`"state":`))
	if len(ids) == 0 || len(starts) == 0 || len(ends) == 0 || i < 0 {
		return nil, "", fmt.Errorf("sim: the function got a window event it cannot read: %.300s", payload)
	}
	a, err1 := time.Parse(time.RFC3339, starts[0])
	b, err2 := time.Parse(time.RFC3339, ends[0])
	if err1 != nil || err2 != nil {
		return nil, "", fmt.Errorf("sim: window bounds %q, %q do not parse", starts[0], ends[0])
	}
	state := payload[i+len(`"state":`):]
	if j := bytes.IndexByte(state, '}'); j >= 0 {
		state = state[:j+1]
	}
	final := bytes.Contains(payload, []byte(`"isFinalInvokeForWindow":true`))
	n, st, o := fn.t.window(ctx, ids[0], seqs, reader.Window{Start: a, End: b}, state, final)
	switch o {
	case outCancelled:
		return nil, "", fmt.Errorf("sim: invoke: %w", ctx.Err())
	case outLost:
		return nil, "", fmt.Errorf("sim: invoke: connection reset after the function ran (injected)")
	case outBroken:
		return nil, "", fmt.Errorf("sim: invoke: %w", errBroken)
	case outTimeout:
		return []byte(fmt.Sprintf(`{"errorMessage":"Task timed out after %.2f seconds"}`, fn.t.w.cfg.Reader.FunctionTimeout.Seconds())), "Unhandled", nil
	case outFailed:
		return []byte(`{"errorMessage":"injected failure","errorType":"Error"}`), "Unhandled", nil
	}
	failures := "[]"
	if n < len(seqs) {
		failures = fmt.Sprintf(`[{"itemIdentifier":%q}]`, seqs[n])
	}
	if st == nil {
		return []byte(`{"batchItemFailures":` + failures + `}`), "", nil // no state: a failed invocation
	}
	return []byte(`{"state":` + string(st) + `,"batchItemFailures":` + failures + `}`), "", nil
}

// fold registers the state the target returns: tok's with recs added. The
// caller does not hold mu.
func (c *checker) fold(tok, shardID string, seqs []string, win reader.Window) json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := &fold{parent: c.folds[tok], start: win.Start.UTC()}
	if f.parent != nil {
		f.shard, f.n = f.parent.shard, f.parent.n
	}
	for _, seq := range seqs {
		if x := c.bySeq[seq]; x != nil {
			f.recs = append(f.recs, x)
			f.shard = x.shard
		}
	}
	if f.shard == nil {
		f.shard = c.shard(shardKey{c.cur, shardID})
	}
	f.n += len(seqs)
	c.nFolds++
	name := "w" + strconv.Itoa(c.nFolds)
	c.folds[name] = f
	return json.RawMessage(`{"v":"` + name + `","n":"` + strconv.Itoa(f.n) + `"}`)
}

// stored notes a window written to the lease table with a checkpoint.
func (c *checker) stored(state []byte) {
	tok := stateToken(state)
	if tok == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.folds[tok]; f != nil {
		f.stored = true
	}
}

// winRun names the reader run (of a loop, or a Lambda invocation) that
// makes a call: the owner of its last take of the shard.
func (c *checker) winRun(run string, k shardKey) string {
	return c.curRun[run+"|"+k.String()] + "|" + k.String()
}

// windowInvoked checks a windowed invocation as it begins: its bounds, its
// records' arrival times, and the state it carries.
func (c *checker) windowInvoked(owner, run, shardID string, seqs []string, win reader.Window, state []byte, tok string, final bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.folds[tok]
	var s *shardState
	switch {
	case len(seqs) > 0 && c.bySeq[seqs[0]] != nil:
		s = c.bySeq[seqs[0]].shard
	case f != nil:
		s = f.shard
	default:
		s = c.shard(shardKey{c.cur, shardID})
	}
	who := c.tr.nameLocked(owner)
	start, end := win.Start.UTC(), win.End.UTC()
	size := c.window
	if end.Sub(start) != size || start.UnixMilli()%size.Milliseconds() != 0 {
		c.fail(s.key, "%s invoked window [%s, %s): not a window of %s aligned on the epoch", who, fmtTime(start), fmtTime(end), size)
	}
	if len(seqs) > 0 && final {
		c.fail(s.key, "%s made a final invocation of window [%s, %s) with %d records", who, fmtTime(start), fmtTime(end), len(seqs))
	}
	for _, seq := range seqs {
		if x := c.bySeq[seq]; x != nil && (x.arrival.Before(start) || !x.arrival.Before(end)) {
			c.fail(s.key, "%s delivered record %s (key %d #%d, arrived %s) in window [%s, %s)", who, short(seq), x.key, x.n, fmtTime(x.arrival), fmtTime(start), fmtTime(end))
			break
		}
	}
	what := "final invocation"
	if !final {
		what = "invocation"
	}
	switch {
	case tok == "" && hasObject(state) && !bytes.Equal(bytes.TrimSpace(state), []byte(`{}`)):
		c.fail(s.key, "%s's %s of window [%s, %s) carries state %.80s, which the target never returned", who, what, fmtTime(start), fmtTime(end), state)
		return
	case tok != "" && f == nil:
		c.fail(s.key, "%s's %s of window [%s, %s) carries state %s, which the target never returned", who, what, fmtTime(start), fmtTime(end), tok)
		return
	case f != nil && (f.shard != s || !f.start.Equal(start)):
		c.fail(s.key, "%s's %s of window [%s, %s) carries state %s of window [%s, …) of shard %s", who, what, fmtTime(start), fmtTime(end), tok, fmtTime(f.start), f.shard.key)
		return
	}
	k := c.winRun(run, s.key)
	kept := c.kept[k]
	switch {
	case kept != nil && kept.start.Equal(start) && !kept.closed:
		if kept.state != f {
			c.fail(s.key, "%s's %s of window [%s, %s) carries state %s, but its run kept %s from the window's last invocation", who, what, fmtTime(start), fmtTime(end), orEmpty(tok), c.foldName(kept.state))
		}
		return
	case kept != nil && kept.start.Before(start) && !kept.closed && kept.state != nil:
		c.fail(s.key, "%s went on to window [%s, %s) before the final invocation of window [%s, …), whose state %s it holds, succeeded", who, fmtTime(start), fmtTime(end), fmtTime(kept.start), c.foldName(kept.state))
	}
	if f != nil && !f.stored {
		c.fail(s.key, "%s's %s of window [%s, %s) carries state %s, which was never checkpointed, and its run kept no state of the window", who, what, fmtTime(start), fmtTime(end), tok)
	}
}

// windowAnswered notes what the reader keeps of a windowed invocation's
// answer: a state with records settled, or a final invocation's success.
func (c *checker) windowAnswered(owner, run, shardID string, win reader.Window, final bool, n int, state json.RawMessage, err error) {
	if !hasObject(state) || (final && err != nil) || (!final && n <= 0) {
		return
	}
	tok := stateToken(state)
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.folds[tok]
	if f == nil {
		c.fail(shardKey{c.cur, shardID}, "%s's invocation of window [%s, %s) answered state %.80s, which the target never returned", c.tr.nameLocked(owner), fmtTime(win.Start), fmtTime(win.End), state)
		return
	}
	s := f.shard
	if final {
		f = f.parent // the final answers the state it received
	}
	c.kept[c.winRun(run, s.key)] = &keptWindow{start: win.Start.UTC(), state: f, closed: final}
	if !final {
		return
	}
	take, ok := c.runs[runShard{run, s.key}]
	if !ok || take.epoch != s.epoch {
		return // a run of an earlier epoch, revoked since
	}
	c.finals = append(c.finals, windowFinal{shard: s, start: win.Start.UTC(), end: win.End.UTC(), state: f, order: take.order, owner: owner, at: time.Since(c.tr.began)})
}

// checkFinals checks that each successful final invocation's state holds
// every record of its window it owes (the caller holds mu).
func (c *checker) checkFinals() {
	for _, wf := range c.finals {
		has := map[*rec]bool{}
		for f := wf.state; f != nil; f = f.parent {
			for _, x := range f.recs {
				has[x] = true
			}
		}
		rl := c.ruleAt(wf.shard, wf.order)
		for _, x := range wf.shard.recs {
			if x.arrival.Before(wf.start) || !x.arrival.Before(wf.end) || has[x] || !rl.owes(x) || givenUp(x) {
				continue
			}
			c.violations = append(c.violations, Violation{At: wf.at, Shard: wf.shard.key.String(), Bug: wf.shard.bug,
				What: fmt.Sprintf("%s closed window [%s, %s) with a state that lacks record %s (key %d #%d, arrived %s, owed: %s)",
					c.tr.nameLocked(wf.owner), fmtTime(wf.start), fmtTime(wf.end), short(x.seq), x.key, x.n, fmtTime(x.arrival), rl.describe())})
			break
		}
	}
}

func givenUp(x *rec) bool {
	for _, st := range x.settles {
		if st.givenUp {
			return true
		}
	}
	return false
}

func hasObject(s []byte) bool {
	s = bytes.TrimSpace(s)
	return len(s) > 0 && s[0] == '{'
}

func orEmpty(tok string) string {
	if tok == "" {
		return "{}"
	}
	return tok
}

func (c *checker) foldName(f *fold) string {
	if f == nil {
		return "{}"
	}
	for name, g := range c.folds {
		if g == f {
			return name
		}
	}
	return "?"
}
