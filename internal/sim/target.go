package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/runner"
)

// invocation is one shardreader invocation of the Lambda shape; the world
// puts it in the context it runs reader.Run with, so the store and the
// target can tell which loop, and which run of it, made a call.
type invocation struct {
	id    int64
	owner string
	dep   string
	run   string // its runKey, "inv" and its id, formatted once
}

type invocationKey struct{}

func withInvocation(ctx context.Context, inv *invocation) context.Context {
	return context.WithValue(ctx, invocationKey{}, inv)
}

func invocationOf(ctx context.Context) *invocation {
	inv, _ := ctx.Value(invocationKey{}).(*invocation)
	return inv
}

type hostKey struct{}

// withHost tags ctx with the host (a runner process, a Lambda instance)
// its calls are made from.
func withHost(ctx context.Context, host string) context.Context {
	return context.WithValue(ctx, hostKey{}, host)
}

// actor names who makes a call, for its random stream: the host, and the
// loop (by its alias, stable from run to run) when a loop makes it. Each
// actor draws from streams of its own, so what one draws does not depend
// on how the others' calls interleave with its own.
func (w *World) actor(ctx context.Context) string {
	host, alias, loop := w.actorOf(ctx)
	if loop {
		return host + "/" + alias
	}
	return host
}

// actorOf is actor in parts: the host, and the loop's alias when a loop
// makes the call (loop true; the alias is "" before the loop's first take).
func (w *World) actorOf(ctx context.Context) (host, alias string, loop bool) {
	host, _ = ctx.Value(hostKey{}).(string)
	if inv := invocationOf(ctx); inv != nil {
		return host, w.tr.known(inv.owner), true
	}
	if o, ok := runner.LoopOwner(ctx); ok {
		return host, w.tr.known(o), true
	}
	return host, "", false
}

// draws is the random stream of kind for ctx's actor and a shard: the one
// named kind + ":" + w.actor(ctx) + ":" + shardID, found without joining
// the name on the heap (every call to Kinesis, the table and the target
// draws from one).
func (w *World) draws(ctx context.Context, kind, shardID string) *stream {
	host, alias, loop := w.actorOf(ctx)
	if loop {
		return w.rnd.get(kind, ":", host, "/", alias, ":", shardID)
	}
	return w.rnd.get(kind, ":", host, ":", shardID)
}

// ownerOf returns the loop owner a call is made for and the key of its
// run: from the Lambda model's invocation, or the local runner's
// runner.LoopOwner.
func ownerOf(ctx context.Context) (owner, run string, ok bool) {
	if inv := invocationOf(ctx); inv != nil {
		return inv.owner, runKey(inv, ""), true
	}
	if o, ok := runner.LoopOwner(ctx); ok {
		return o, o, true
	}
	return "", "", false
}

// target is a deployment's target: the user's function, which runs for a
// while, then settles every record, or a leading part of them (a
// batchItemFailures answer), or fails, or times out, or settles all and
// has its answer lost on the way back. Called in process, or through
// reader.LambdaTarget (the Kinesis event as JSON) as a Lambda function.
// The function runs each invocation to its own end (its run time or its
// timeout) whatever the caller does: a caller that gives up only stops
// waiting for the answer.
type target struct {
	w   *World
	dep string
	lam *reader.LambdaTarget
	// runsOn: the function runs each invocation to its own end whatever
	// the caller does (World.runsOn); otherwise it stops when the caller's
	// context ends.
	runsOn bool
}

// errFunction is the function's own failure: it answered.
var errFunction = fmt.Errorf("sim: the target function failed (injected): %w", reader.ErrFunction)

// errAnswerLost is an answer lost on its way back: the caller cannot tell
// the function ended.
var errAnswerLost = errors.New("sim: the answer was lost after the function ran (injected)")

// errBroken is a call that broke without the function's answer, the
// function running on: the reader must take it as given up.
var errBroken = errors.New("sim: connection reset while the function runs (injected)")

// Deliver implements reader.Target.
func (t *target) Deliver(ctx context.Context, b reader.Batch) (int, error) {
	if t.lam != nil {
		return t.lam.Deliver(ctx, b)
	}
	seqs := make([]string, len(b.Records))
	for i, r := range b.Records {
		seqs[i] = aws.ToString(r.SequenceNumber)
	}
	if !t.w.chk.noContent {
		seen := make([]seenRecord, len(b.Records))
		for i, r := range b.Records {
			seen[i] = seenRecord{seq: seqs[i], pk: aws.ToString(r.PartitionKey), data: r.Data, arrivalMs: aws.ToTime(r.ApproximateArrivalTimestamp).UnixMilli()}
		}
		t.w.chk.content(t.dep, b.ShardID, seen)
	}
	n, o := t.run(ctx, b.ShardID, seqs, false)
	switch o {
	case outTimeout:
		return 0, fmt.Errorf("sim: target timed out after %s: %w", t.w.cfg.Reader.FunctionTimeout, errFunction)
	case outFailed:
		return 0, errFunction
	case outLost:
		return 0, errAnswerLost
	case outCancelled:
		return 0, ctx.Err()
	case outBroken:
		return 0, errBroken
	}
	return n, nil
}

type outcome int

const (
	outOK outcome = iota
	outFailed
	outTimeout
	outLost
	outCancelled
	// outBroken: the call broke (a connection reset) while the function
	// runs on; the caller has no answer.
	outBroken
	// outNoState: with a tumbling window, the function settled the records
	// but answered without a state: a failed invocation.
	outNoState
)

// run is the function at work on seqs of a shard; noState: with a
// tumbling window, it answers without a state (a failed invocation: what it
// did counts as settling nothing).
func (t *target) run(ctx context.Context, shardID string, seqs []string, noState bool) (int, outcome) {
	w := t.w
	f := &w.cfg.Faults
	owner, run, known := ownerOf(ctx)
	if !known {
		w.chk.mu.Lock()
		w.chk.fail(shardKey{w.chk.cur, shardID}, "a delivery by no known loop")
		w.chk.mu.Unlock()
	}
	rs := w.draws(ctx, "target", shardID)
	lat := rs.latency(f.TargetLatency, f.TargetTail)
	if rs.hit(f.TargetSlow) {
		lat += rs.dur(time.Second, max(time.Second, f.TargetSlowMax))
	}
	x := rs.float()
	partial := rs.intN(len(seqs))
	// The function runs to its own end (its run time, or its timeout)
	// whatever its caller does: a caller that gives up (the reader's
	// deadline, its invocation killed) stops waiting for the answer, not
	// the function, which delivers on and settles what it settles.
	w.wake(ctx)
	if ctx.Err() != nil {
		// The call never goes out: a caller's context that ended (while
		// its host was frozen, say) stops an SDK call before it is sent,
		// and an in-process function that honours it before it starts.
		w.tr.add(w.shardName(shardID), owner, "delivery of %d records not sent: %s", len(seqs), why(context.Cause(ctx)))
		return 0, outCancelled
	}
	if w.cutOff(ctx, "target") {
		w.tr.add(w.shardName(shardID), owner, "delivery of %d records refused: the host is cut off from the target (partition)", len(seqs))
		return 0, outFailed
	}
	start := time.Now()
	lat, ended := w.strikeInvocation(ctx, t.dep, shardID, lat)
	if !t.runsOn {
		defer ended()
		return t.work(ctx, owner, run, shardID, seqs, lat, x, partial, noState)
	}
	// A closed shard's last record that the function hangs on (PoisonEnd):
	// it runs to its timeout, and the call breaks early on, every time.
	poisoned := f.PoisonEnd && w.chk.carriesEnd(shardID, seqs)
	if poisoned {
		lat = max(lat, w.cfg.Reader.FunctionTimeout)
	}
	done := make(chan result, 1)
	w.bg.Go(func() {
		defer ended()
		n, o := t.work(context.Background(), owner, run, shardID, seqs, lat, x, partial, noState)
		done <- result{n, o}
	})
	// A call that breaks while the function runs (a connection reset):
	// drawn from a stream of its own, so worlds without it draw as before.
	var broke <-chan time.Time
	brs := w.draws(ctx, "broken", shardID)
	if hit := brs.hit(f.TargetBroken); hit || poisoned {
		within := min(lat, w.cfg.Reader.FunctionTimeout)
		if poisoned {
			within = min(time.Second, w.cfg.Reader.FunctionTimeout)
		}
		tm := time.NewTimer(brs.dur(0, within))
		defer tm.Stop()
		broke = tm.C
	}
	select {
	case r := <-done:
		return r.n, r.o
	case <-broke:
		what := "connection reset, injected"
		if poisoned {
			what += "; it carries the closed shard's last record, which the function hangs on"
		}
		w.tr.add(w.shardName(shardID), owner, "the call of %d records broke after %s (%s); the function runs on", len(seqs), time.Since(start), what)
		if poisoned && brs.hit(f.PoisonKill) {
			within := 2 * w.cfg.Reader.Renew
			if f.PoisonKillWithin > 0 {
				within = f.PoisonKillWithin
			}
			t.killAfter(shardID, owner, brs.dur(0, within))
		}
		return 0, outBroken
	case <-ctx.Done():
		w.tr.add(w.shardName(shardID), owner, "caller gave up on the delivery of %d records after %s (%s); the function runs on", len(seqs), time.Since(start), why(context.Cause(ctx)))
		return 0, outCancelled
	}
}

// killAfter kills the loop of owner reading shardID, in t's deployment,
// after d (Faults.PoisonKill): it ends without handing its state on.
func (t *target) killAfter(shardID, owner string, d time.Duration) {
	w := t.w
	i := slices.IndexFunc(w.cfg.Deployments, func(d Deployment) bool { return d.Name == t.dep })
	w.bg.Go(func() {
		time.Sleep(d)
		if w.deps[i].kill(shardID) {
			w.tr.add(w.shardName(shardID), owner, "its loop killed after the call broke on the poisoned record")
		}
	})
}

type result struct {
	n int
	o outcome
}

// work is the function's own run: it spans from its start to the end of
// its run time or its timeout, and settles what it settles then.
// An in-process function (ctx the caller's) stops when ctx ends.
func (t *target) work(ctx context.Context, owner, run, shardID string, seqs []string, lat time.Duration, x float64, partial int, noState bool) (int, outcome) {
	w := t.w
	f := &w.cfg.Faults
	start := time.Now()
	timeout := w.cfg.Reader.FunctionTimeout
	if err := w.sleep(ctx, min(lat, timeout)); err != nil {
		w.chk.delivery(t.dep, owner, run, shardID, seqs, start, 0)
		w.tr.add(w.shardName(shardID), owner, "delivery of %d records cut after %s: %s", len(seqs), time.Since(start), why(context.Cause(ctx)))
		return 0, outCancelled
	}
	switch {
	case lat > timeout:
		w.chk.delivery(t.dep, owner, run, shardID, seqs, start, 0)
		w.tr.add(w.shardName(shardID), owner, "delivery of %d records timed out", len(seqs))
		return 0, outTimeout
	case x < f.TargetFail:
		w.chk.delivery(t.dep, owner, run, shardID, seqs, start, 0)
		w.tr.add(w.shardName(shardID), owner, "delivery of %d records failed (injected)", len(seqs))
		return 0, outFailed
	case noState:
		n := len(seqs)
		if x < f.TargetFail+f.TargetPartial && n > 1 {
			n = partial
		}
		w.chk.delivery(t.dep, owner, run, shardID, seqs, start, 0)
		w.tr.add(w.shardName(shardID), owner, "settled %d of %d records %s…%s, answered without a state (injected)", n, len(seqs), short(seqs[0]), short(seqs[len(seqs)-1]))
		return n, outNoState
	case x < f.TargetFail+f.TargetPartial && len(seqs) > 1:
		w.chk.delivery(t.dep, owner, run, shardID, seqs, start, partial)
		w.tr.add(w.shardName(shardID), owner, "settled %d of %d records %s…%s (partial, injected)", partial, len(seqs), short(seqs[0]), short(seqs[len(seqs)-1]))
		return partial, outOK
	}
	w.chk.delivery(t.dep, owner, run, shardID, seqs, start, len(seqs))
	if x < f.TargetFail+f.TargetPartial+f.TargetLost {
		w.tr.add(w.shardName(shardID), owner, "settled %d records %s…%s, answer lost (injected)", len(seqs), short(seqs[0]), short(seqs[len(seqs)-1]))
		return len(seqs), outLost
	}
	w.tr.add(w.shardName(shardID), owner, "settled %d records %s…%s", len(seqs), short(seqs[0]), short(seqs[len(seqs)-1]))
	return len(seqs), outOK
}

// itemFailures is the batchItemFailures answer of a function that
// processed seqs[:n] and failed seqs[n]: as a function written for the
// trigger may, it names some of the records after the first failure too
// (it went on after it, or stopped there and names every one left), in any
// order. The trigger, and the reader, retry from the lowest one named.
func (fn function) itemFailures(ctx context.Context, shardID string, seqs []string, n int) []byte {
	rs := fn.t.w.draws(ctx, "items", shardID)
	failed := []string{seqs[n]}
	all := rs.hit(0.3)
	for _, seq := range seqs[n+1:] {
		if all || rs.hit(0.3) {
			failed = append(failed, seq)
		}
	}
	for i := len(failed) - 1; i > 0; i-- {
		j := rs.intN(i + 1)
		failed[i], failed[j] = failed[j], failed[i]
	}
	b := []byte(`{"batchItemFailures":[`)
	for i, seq := range failed {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"itemIdentifier":%q}`, seq)
	}
	return append(b, "]}"...)
}

// function is the target as a Lambda function behind the Invoke API, for
// reader.LambdaTarget: it reads the Kinesis event and answers as a
// function written for Lambda's own trigger does.
type function struct{ t *target }

// Invoke implements reader.LambdaInvoker. It reads the event's sequence
// numbers and shard by scanning for their fields, not with encoding/json:
// the payload is well formed (reader.LambdaTarget's own tests hold it to
// Lambda's event), and decoding it is most of a world's cost otherwise.
func (fn function) Invoke(ctx context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	if bytes.Contains(in.Payload, []byte(`"isFinalInvokeForWindow":`)) {
		body, fnErr, err := fn.invokeWindow(ctx, in.Payload)
		if err != nil {
			return nil, err
		}
		out := &lambda.InvokeOutput{StatusCode: 200, Payload: body}
		if fnErr != "" {
			out.FunctionError = aws.String(fnErr)
		}
		return out, nil
	}
	fs := scanEvent(in.Payload)
	if len(fs[fSeq]) == 0 || len(fs[fID]) != len(fs[fSeq]) {
		return nil, fmt.Errorf("sim: the function got an event it cannot read: %.200s", in.Payload)
	}
	seqs := make([]string, len(fs[fSeq]))
	for i, v := range fs[fSeq] {
		seqs[i] = string(v)
	}
	shardID, _, _ := strings.Cut(string(fs[fID][0]), ":")
	if c := fn.t.w.chk; !c.noContent {
		seen, bad := checkEvent(fs, seqs, shardID, streamName)
		if bad != "" {
			c.mu.Lock()
			c.fail(shardKey{c.cur, shardID}, "%s: the function got an event with %s", fn.t.dep, bad)
			c.mu.Unlock()
		}
		c.content(fn.t.dep, shardID, seen)
	}
	n, o := fn.t.run(ctx, shardID, seqs, false)
	switch o {
	case outCancelled:
		return nil, fmt.Errorf("sim: invoke: %w", ctx.Err())
	case outLost:
		return nil, errors.New("sim: invoke: connection reset after the function ran (injected)")
	case outBroken:
		return nil, fmt.Errorf("sim: invoke: %w", errBroken)
	case outTimeout:
		msg := fmt.Sprintf(`{"errorMessage":"Task timed out after %.2f seconds"}`, fn.t.w.cfg.Reader.FunctionTimeout.Seconds())
		return &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"), Payload: []byte(msg)}, nil
	case outFailed:
		return &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"), Payload: []byte(`{"errorMessage":"injected failure","errorType":"Error"}`)}, nil
	}
	if n < len(seqs) {
		return &lambda.InvokeOutput{StatusCode: 200, Payload: fn.itemFailures(ctx, shardID, seqs, n)}, nil
	}
	return &lambda.InvokeOutput{StatusCode: 200, Payload: []byte(`{"batchItemFailures":[]}`)}, nil
}

// destination is a deployment's on-failure destination: it records the
// batches given up, and refuses some.
type destination struct {
	w   *World
	dep string
}

// Send implements reader.Destination.
func (d *destination) Send(ctx context.Context, fr reader.FailureRecord) error {
	w := d.w
	f := &w.cfg.Faults
	rs := w.draws(ctx, "destination", fr.KinesisBatchInfo.ShardID)
	if err := w.sleep(ctx, rs.latency(f.StoreLatency, f.StoreTail)); err != nil {
		return err
	}
	owner, run, _ := ownerOf(ctx)
	if rs.hit(f.DestinationFail) {
		w.tr.add(w.shardName(fr.KinesisBatchInfo.ShardID), owner, "destination refused the record of %d given up (injected)", fr.KinesisBatchInfo.BatchSize)
		return errors.New("sim: destination unavailable (injected)")
	}
	w.tr.add(w.shardName(fr.KinesisBatchInfo.ShardID), owner, "gave up %d records %s…%s (%s)", fr.KinesisBatchInfo.BatchSize,
		short(fr.KinesisBatchInfo.StartSequenceNumber), short(fr.KinesisBatchInfo.EndSequenceNumber), fr.RequestContext.Condition)
	w.chk.givenUp(owner, run, fr, w.cfg.Reader.MaxRetryAttempts >= 0, w.cfg.Reader.MaxRecordAge > 0)
	return nil
}

// fieldValues returns the string values that follow each occurrence of
// prefix (a JSON field name, colon and opening quote) in b.
func fieldValues(b []byte, prefix string) []string { return valuesAfter(b, prefix, `"`) }

// valuesAfter returns the text that follows each occurrence of prefix in b
// up to the first of the bytes in ends.
func valuesAfter(b []byte, prefix, ends string) []string {
	var out []string
	p := []byte(prefix)
	for {
		i := bytes.Index(b, p)
		if i < 0 {
			return out
		}
		b = b[i+len(p):]
		j := bytes.IndexAny(b, ends)
		if j < 0 {
			return out
		}
		out = append(out, string(b[:j]))
		b = b[j:]
	}
}

// scanField is a prefix whose values a scanner reads, and the bytes that
// end them.
type scanField struct{ prefix, ends string }

// scanner reads the values of several fields (valuesAfter's) in one walk.
type scanner struct {
	fs []scanField
	// by is, by the byte after the quote, the fields whose prefix has it
	// there: most quotes of an event end a name or a value, and no field
	// is tried there.
	by [256][]int
}

func newScanner(fs ...scanField) *scanner {
	s := &scanner{fs: fs}
	for x, f := range fs {
		if len(f.prefix) < 2 || f.prefix[0] != '"' {
			panic("sim: newScanner: a prefix that is not a quote and more: " + f.prefix)
		}
		s.by[f.prefix[1]] = append(s.by[f.prefix[1]], x)
	}
	return s
}

// values returns, for each field f of s, valuesAfter(b, f.prefix,
// f.ends), in one walk of b instead of one a field: every prefix starts
// with a quote, so the walk tries them at each quote of b, each from where
// its last value ended, as valuesAfter goes on. The function reads a dozen
// fields of every event it gets, and scanning the event once a field was
// 7 % of a world's time.
func (s *scanner) values(b []byte) [][]string {
	spans := s.spans(b, 0)
	out := make([][]string, len(spans))
	for x, vs := range spans {
		for _, v := range vs {
			out[x] = append(out[x], string(v))
		}
	}
	return out
}

// spans is values as the bytes of b they are (no copies: most values are
// only compared). each is how many values a field is expected to have (0:
// not known): room for that many is made for all fields in one allocation,
// not grown value by value.
func (s *scanner) spans(b []byte, each int) [][][]byte {
	out := make([][][]byte, len(s.fs))
	if each > 0 {
		room := make([][]byte, len(s.fs)*each)
		for x := range out {
			out[x] = room[x*each : x*each : (x+1)*each]
		}
	}
	from := make([]int, len(s.fs)) // where each field's next occurrence may start; -1: no more
	for i := 0; i < len(b)-1; i++ {
		k := bytes.IndexByte(b[i:len(b)-1], '"')
		if k < 0 {
			break
		}
		i += k
		for _, x := range s.by[b[i+1]] {
			f := s.fs[x]
			if from[x] < 0 || i < from[x] || !bytes.HasPrefix(b[i:], []byte(f.prefix)) {
				continue
			}
			v := b[i+len(f.prefix):]
			j := bytes.IndexAny(v, f.ends)
			if j < 0 {
				from[x] = -1
				continue
			}
			out[x] = append(out[x], v[:j:j])
			from[x] = i + len(f.prefix) + j
		}
	}
	return out
}

// why says in a word why a delivery was cut (the cause's text names raw
// owner ids, which differ from run to run).
func why(cause error) string {
	switch {
	case errors.Is(cause, lease.ErrNotOwner):
		return "the lease was lost"
	case errors.Is(cause, lease.ErrLapsed):
		return "the lease's deadline passed"
	case errors.Is(cause, context.DeadlineExceeded):
		return "the run's deadline"
	}
	return "cancelled"
}
