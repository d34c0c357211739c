package coordinator

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/shards"
)

// Loop is what a Starter needs to start one shard loop. Its JSON form is the
// first state of the loop (see docs/state.md).
type Loop struct {
	Stream    string `json:"stream"`
	StreamARN string `json:"streamArn,omitempty"`
	ShardID   string `json:"shardId"`
	Owner     string `json:"owner"`
	// Incarnation is the creation time (Unix ms) of the stream the
	// coordinator took the row for (0: not known), under the name
	// reader.State gives it: the loop's first state, so that a run that
	// finds the row deleted and takes it afresh judges the stream by it.
	Incarnation int64 `json:"incarnation,omitempty"`
}

// State is the loop's first state, as its Step Functions input carries it
// to its first Read.
func (l Loop) State() reader.State {
	return reader.State{Stream: l.Stream, StreamARN: l.StreamARN, ShardID: l.ShardID, Owner: l.Owner, Incarnation: l.Incarnation}
}

// Starter starts a loop for a shard whose lease the coordinator has just
// taken for loop.Owner. Starting the same owner twice must be harmless.
type Starter interface {
	Start(ctx context.Context, loop Loop) error
}

// KinesisAPI is what the coordinator calls on Kinesis: ListShards,
// DescribeStreamSummary (the stream's ARN, incarnation and Kinesis's clock)
// and, for create-if-missing, CreateStream.
type KinesisAPI interface {
	shards.ListAPI
	shards.CreateAPI
}

// Coordinator runs passes over its subscriptions. Its methods are safe for
// concurrent use, with one Run or Serve at a time; passes are made one at
// a time.
type Coordinator struct {
	cfg     Config
	store   lease.CoordinatorStore
	kinesis KinesisAPI
	starter Starter
	nudge   chan struct{}

	observer *lease.Observer
	// passing holds a token while a pass runs: one pass at a time. A
	// channel rather than a mutex, so a pass waiting for another gives up
	// with its context (and waits durably under testing/synctest).
	passing chan struct{}

	mu           sync.Mutex
	created      map[string]bool // streams create-if-missing has run for
	failed       []Loop          // reported to Failed, for Serve
	failedSignal chan struct{}
}

// New validates cfg and returns a Coordinator.
func New(cfg Config, store lease.CoordinatorStore, kinesis KinesisAPI, starter Starter) (*Coordinator, error) {
	cfg.Subscriptions = slices.Clone(cfg.Subscriptions)
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	switch {
	case store == nil:
		return nil, &ConfigError{Field: "store", Reason: "want a lease store"}
	case kinesis == nil:
		return nil, &ConfigError{Field: "kinesis", Reason: "want a Kinesis client"}
	case starter == nil:
		return nil, &ConfigError{Field: "starter", Reason: "want a Starter"}
	}
	observer := cfg.Observer
	if observer == nil {
		observer = lease.NewObserver(cfg.LeaseDuration)
	}
	return &Coordinator{cfg: cfg, store: store, kinesis: kinesis, starter: starter,
		nudge: make(chan struct{}, 1), passing: make(chan struct{}, 1), failedSignal: make(chan struct{}, 1), created: map[string]bool{},
		observer: observer}, nil
}

// Nudge asks a running Run or Serve to pass again at once. It never blocks.
func (c *Coordinator) Nudge() {
	select {
	case c.nudge <- struct{}{}:
	default:
	}
}

// Run passes over every subscription now and then every relist interval, or
// at once after a Nudge, until window has passed or ctx ends: what one
// scheduled invocation of a deployment with a window does. A failed pass
// is logged and retried at the next interval; Run returns the last pass's
// error only when every pass failed. Without a window a deployment runs
// Once per scheduled invocation and nudge and Watch per failed execution;
// Serve is that shape in one process.
func (c *Coordinator) Run(ctx context.Context, window time.Duration) error {
	deadline := c.cfg.Clock().Add(window)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	var lastErr error
	ok := false
	for {
		res, err := c.Pass(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			lastErr = err
			c.cfg.Logger.ErrorContext(ctx, "coordinator pass failed", "err", err)
		} else {
			ok = true
		}
		wait := c.cfg.RelistInterval
		// Pass again just after the earliest moment a held lease would lapse
		// by this coordinator's watch: a loop that died is then taken over
		// within moments of its counter having stood still for a lease
		// duration rather than at the next relist. Live leases are renewed
		// every 3 s, which restarts their watch, so this adds few passes.
		if next := res.NextLapse(); !next.IsZero() {
			if d := max(next.Sub(c.cfg.Clock())+expiryGrace, minWait); d < wait {
				wait = d
			}
		}
		if left := deadline.Sub(c.cfg.Clock()); left < wait {
			wait = left
		}
		if wait <= 0 {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-c.nudge:
			t.Stop()
		case <-t.C:
		}
		if !c.cfg.Clock().Before(deadline) {
			break
		}
	}
	if !ok {
		return lastErr
	}
	return nil
}

// expiryGrace is how long after a lease's expiry the coordinator passes
// again; minWait bounds how often it passes for expiries.
const (
	expiryGrace = 100 * time.Millisecond
	minWait     = 250 * time.Millisecond
)

// PassResult says what one pass did, per stream.
type PassResult struct {
	Streams []StreamResult
}

// NextLapse is the earliest time a lease held by another owner in any
// stream of the pass lapses unless renewed, or the zero time.
func (r PassResult) NextLapse() time.Time {
	var next time.Time
	for _, s := range r.Streams {
		if !s.NextLapse.IsZero() && (next.IsZero() || s.NextLapse.Before(next)) {
			next = s.NextLapse
		}
	}
	return next
}

// StreamResult is one subscription's part of a pass.
type StreamResult struct {
	Stream  string
	Shards  int
	Started []Loop
	// Lost counts leasable shards whose take another coordinator won.
	Lost int
	// Declined counts leasable shards Config.Claim left to others.
	Declined int
	// Waiting explains the shards not taken, by shard id.
	Waiting map[string]shards.Reason
	// Generation is the stream's generation record as this pass left it
	// (zero when it could not be read), and Step what the pass did about it:
	// "follow", "begin", "finish" or "stale".
	Generation lease.Generation
	Step       string
	// StartRecorded is true when this pass recorded a start on some row.
	StartRecorded bool
	// StaleConfiguration is true when the stream's recorded generation is
	// newer than this coordinator's start position: it changed nothing.
	StaleConfiguration bool
	// GenerationPending is true when the stream's generation record is not
	// applied to its rows yet (another coordinator recorded it and is
	// applying it, or failed part way and will finish at its next pass):
	// the pass took no shard, since a loop would open one before its
	// generation's start is on its row.
	GenerationPending bool
	// Deleted lists rows removed for shards gone from the listing or of an
	// earlier incarnation of the stream; StaleRows the shards whose rows
	// are of an earlier incarnation and still held.
	Deleted   []string
	StaleRows []string
	// Err is what went wrong in the stream's part of the pass, nil when
	// nothing did (Pass also returns it, joined with the other streams').
	Err error
	// NextLapse is the earliest time a held lease of a listed, unfinished
	// shard lapses by this coordinator's watch unless renewed (those taken
	// in this pass included), or a fence, or the lease of a finished
	// parent still held, that keeps a shard waiting passes; zero when
	// none does.
	NextLapse time.Time
	// Skipped are the shards whose records not yet delivered (under the
	// generation recorded before) the generation this pass began moves past
	// (see CheckStart); logged at WARN.
	Skipped []Skip
	// Revoked are the loops holding a listed shard's lease that a new start
	// (a generation, a reset) revoked and that have not lapsed yet: each
	// stops at its next renewal, and its shard is taken once the lease
	// lapses (Once watches them). Their Owner is the loop's owner.
	Revoked []Loop
}

// Pass runs one pass over every subscription. Errors of one subscription do
// not stop the others; they are joined.
func (c *Coordinator) Pass(ctx context.Context) (PassResult, error) {
	var res PassResult
	var errs []error
	for _, sub := range c.cfg.Subscriptions {
		r, err := c.passStream(ctx, sub)
		res.Streams = append(res.Streams, r)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return res, errors.Join(errs...)
}

// passStream runs one pass over one subscription, one pass at a time.
func (c *Coordinator) passStream(ctx context.Context, sub Subscription) (StreamResult, error) {
	name, _ := shards.StreamName(sub.Stream) // validated in New
	select {
	case c.passing <- struct{}{}:
	case <-ctx.Done():
		return StreamResult{Stream: name, Err: ctx.Err()}, ctx.Err()
	}
	defer func() { <-c.passing }()
	r, err := c.passOne(ctx, sub)
	r.Err = err
	if c.cfg.OnPass != nil {
		c.cfg.OnPass(r)
	}
	return r, err
}

func (c *Coordinator) passOne(ctx context.Context, sub Subscription) (StreamResult, error) {
	name, _ := shards.StreamName(sub.Stream) // validated in New
	res := StreamResult{Stream: name}
	log := c.cfg.Logger.With("stream", name)

	if sub.CreateShards > 0 && !c.wasCreated(name) {
		created, err := shards.CreateIfMissing(ctx, c.kinesis, sub.Stream, sub.CreateShards)
		if err != nil {
			return res, fmt.Errorf("stream %s: %w", name, err)
		}
		if created {
			log.InfoContext(ctx, "created stream", "shards", sub.CreateShards)
		}
		c.markCreated(name)
	}

	sum, err := c.describe(ctx, sub.Stream)
	if err != nil {
		return res, fmt.Errorf("stream %s: %w", name, err)
	}
	// The rows are judged against the generation record read after them;
	// the record read before the listing tells whether a generation was
	// being applied (its starts written row by row) while the shards were
	// listed and the rows read. When it is the applied record the pass
	// goes on with, every start was on the rows before the listing was
	// made, so the listing holds every shard whose row a coordinator of an
	// older generation opened before a start re-opened its parent.
	before, err := c.readGeneration(ctx, name)
	if err != nil {
		return res, fmt.Errorf("stream %s: %w", name, err)
	}
	listing, rows, err := c.listRows(ctx, sub, name)
	if err != nil {
		return res, err
	}
	res.Shards = len(listing)

	recorded, ready, err := c.generation(ctx, name, sub, listing, rows, sum, &res, log)
	if err != nil {
		return res, fmt.Errorf("stream %s: %w", name, err)
	}
	if ready && !recorded && !sameGeneration(before, res.Generation) {
		// Another coordinator applied a generation while this pass listed
		// the shards and read the rows: some rows may show its start and
		// others not yet (a parent re-opened, its child's holder not yet
		// revoked), and the listing may be older than the children of a
		// parent it re-opened. List and read again, and take nothing
		// unless the record stood still meanwhile.
		if listing, rows, err = c.listRows(ctx, sub, name); err != nil {
			return res, err
		}
		res.Shards = len(listing)
		after, err := c.readGeneration(ctx, name)
		if err != nil {
			return res, fmt.Errorf("stream %s: %w", name, err)
		}
		ready = sameGeneration(after, res.Generation)
	}
	if !ready {
		res.GenerationPending = true
		log.InfoContext(ctx, "the stream's generation is not applied to its rows yet; taking no shard this pass",
			"generation", res.Generation.ID, "order", res.Generation.Order)
		return res, nil
	}
	late, err := c.startLateShards(ctx, name, res.Generation, listing, rows, sum.incarnation)
	if err != nil {
		return res, fmt.Errorf("stream %s: %w", name, err)
	}
	missed, err := c.reopenMissedChildren(ctx, name, res.Generation, listing, rows, sum.incarnation, log)
	if err != nil {
		return res, fmt.Errorf("stream %s: %w", name, err)
	}
	if recorded || late || missed {
		// List and read again after this pass wrote starts: the listing
		// may be older than children of a parent the starts re-opened (a
		// reshard still UPDATING when it was made, or done while the pass
		// ran), whose rows a coordinator of the older generation may hold.
		// Such a child is re-opened before its parent is taken, so when
		// the listing grew, the next pass decides. And another coordinator
		// may have recorded a generation since and written its start on
		// some rows and not yet on others (a parent re-opened, its
		// children's holders not yet revoked): take nothing unless the
		// record stood still.
		fresh, again, err := c.listRows(ctx, sub, name)
		if err != nil {
			return res, err
		}
		if grew(listing, fresh) {
			res.Shards = len(fresh)
			log.InfoContext(ctx, "the stream listed more shards after this pass wrote starts; taking no shard this pass", "shards", len(fresh))
			return res, nil
		}
		listing, rows = fresh, again
		after, err := c.readGeneration(ctx, name)
		if err != nil {
			return res, fmt.Errorf("stream %s: %w", name, err)
		}
		if !sameGeneration(after, res.Generation) {
			res.GenerationPending = true
			log.InfoContext(ctx, "a generation was recorded while this pass read the rows again; taking no shard this pass",
				"generation", after.ID, "order", after.Order)
			return res, nil
		}
		// The starts this pass wrote may have re-opened the parent of a
		// shard the generation's listing missed, which the rows read
		// before them showed read to its end: re-open such a shard now,
		// and leave the takes to the next pass, which sees its holder
		// revoked (the re-opened parent waits for it).
		reopened, err := c.reopenMissedChildren(ctx, name, res.Generation, listing, rows, sum.incarnation, log)
		if err != nil {
			return res, fmt.Errorf("stream %s: %w", name, err)
		}
		if reopened {
			log.InfoContext(ctx, "this pass's starts re-opened the parent of shards the generation's listing missed; taking no shard this pass")
			return res, nil
		}
	}

	if later := laterIncarnation(rows, sum.incarnation); later != 0 {
		// The stream was deleted and created again since this pass described
		// it: these rows are the new stream's, not stale ones of an earlier
		// stream. Take and delete nothing; the next pass sees the new stream.
		log.InfoContext(ctx, "the stream was created again since this pass described it; taking nothing this pass",
			"incarnation", sum.incarnation, "rows_incarnation", later)
		return res, nil
	}
	now := c.cfg.Clock() // read after the rows arrived: the watch starts no earlier than they were written
	verdicts := make(map[string]lease.Verdict, len(rows))
	for id, r := range rows {
		verdicts[id] = c.observer.Observe(r, now)
	}
	d := shards.Decide(shards.Input{Shards: listing, Leases: rows, Verdicts: verdicts, Incarnation: sum.incarnation})
	res.Waiting = d.NotLeasable
	var stale []lease.Lease
	for id, why := range d.NotLeasable {
		switch why.Kind {
		case shards.Fenced, shards.WaitingOnDescendant, shards.WaitingOnParent:
			// A parent waited on has an Until when its holder or fence
			// keeps its children waiting (zero when it is not read yet).
			if !why.Until.IsZero() && (res.NextLapse.IsZero() || why.Until.Before(res.NextLapse)) {
				res.NextLapse = why.Until
			}
		case shards.Held:
			if !why.Until.IsZero() && (res.NextLapse.IsZero() || why.Until.Before(res.NextLapse)) {
				res.NextLapse = why.Until
			}
			if rows[id].Revoked {
				res.Revoked = append(res.Revoked, Loop{Stream: name, StreamARN: sum.arn, ShardID: id, Owner: lease.LoopOwner(rows[id].Owner)})
			}
		case shards.Stale:
			stale = append(stale, rows[id])
		}
	}
	slices.SortFunc(res.Revoked, func(a, b Loop) int { return strings.Compare(a.ShardID, b.ShardID) })
	leasable := d.Leasable
	if c.cfg.Claim != nil {
		leasable = c.cfg.Claim(name, d)
		res.Declined = len(d.Leasable) - len(leasable)
	}
	var errs []error
	for _, s := range leasable {
		owner := c.cfg.NewOwner(s.ID)
		// Taken only on the row the decision read: a start recorded since
		// (which may have re-opened the shard's parents) or a lapsed holder's
		// renewal bumped the counter, and the shard is decided again.
		r, ok := rows[s.ID]
		opts := []lease.TakeOption{lease.WithParents(s.Parents()...), lease.WithIncarnation(sum.incarnation), lease.Unchanged(r.Counter)}
		if ok && (r.Held() || r.Fence > 0) {
			opts = append(opts, lease.IfCounter(verdicts[s.ID].Counter)) // lapsed, or its fence passed
		}
		taken, err := c.store.Take(ctx, name, s.ID, owner, opts...)
		if errors.Is(err, lease.ErrHeld) {
			res.Lost++ // another coordinator took it first, or its holder renewed at last
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("take %s: %w", lease.Key(name, s.ID), err))
			continue
		}
		if len(s.Parents()) > 0 {
			// A child was decided on its parents' rows, which no take can
			// hold still: another coordinator may have recorded a new
			// generation since and re-opened a parent (the child's own row,
			// whose counter the take checked, comes after its parents). A
			// generation is recorded before any row is written, so a record
			// unchanged now means no parent was re-opened before the take
			// landed. Otherwise the child goes back, and its loop never
			// starts.
			after, err := c.readGeneration(ctx, name)
			if err != nil || !sameGeneration(after, res.Generation) {
				log.InfoContext(ctx, "a new generation was recorded while this pass took a child; giving it back", "shard_id", s.ID, "err", err)
				if rerr := c.store.Release(ctx, name, s.ID, owner, lease.Handover{}); rerr != nil {
					log.WarnContext(ctx, "release of a child taken under an older generation", "shard_id", s.ID, "owner", owner, "err", rerr)
				}
				res.Lost++
				continue
			}
		}
		loop := Loop{Stream: name, ShardID: s.ID, Owner: owner, StreamARN: sum.arn, Incarnation: cmp.Or(taken.Incarnation, sum.incarnation)}
		if strings.HasPrefix(sub.Stream, "arn:") {
			loop.StreamARN = sub.Stream
		}
		if err := c.starter.Start(ctx, loop); err != nil {
			// Give the shard back so that the next pass can try again.
			if rerr := c.store.Release(ctx, name, s.ID, owner, lease.Handover{}); rerr != nil {
				log.WarnContext(ctx, "release after a failed start", "shard_id", s.ID, "owner", owner, "err", rerr)
			}
			errs = append(errs, fmt.Errorf("start loop for %s: %w", lease.Key(name, s.ID), err))
			continue
		}
		if at := c.observer.Observe(taken, c.cfg.Clock()).LapsesAt; res.NextLapse.IsZero() || at.Before(res.NextLapse) {
			res.NextLapse = at
		}
		log.InfoContext(ctx, "started loop", "shard_id", s.ID, "owner", owner)
		res.Started = append(res.Started, loop)
	}

	deleted, err := c.cleanup(ctx, name, listing, rows, stale, verdicts, &res)
	res.Deleted = deleted
	if err != nil {
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

// listRows lists the stream's shards and reads their rows.
func (c *Coordinator) listRows(ctx context.Context, sub Subscription, name string) ([]shards.Shard, map[string]lease.Lease, error) {
	listing, err := shards.List(ctx, c.kinesis, sub.Stream)
	if err != nil {
		return nil, nil, fmt.Errorf("stream %s: %w", name, err)
	}
	ids := make([]string, len(listing))
	for i, s := range listing {
		ids[i] = s.ID
	}
	rows, err := c.store.GetMany(ctx, name, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("stream %s: read leases: %w", name, err)
	}
	return listing, rows, nil
}

// grew reports whether listing b holds a shard that a does not.
func grew(a, b []shards.Shard) bool {
	had := make(map[string]bool, len(a))
	for _, s := range a {
		had[s.ID] = true
	}
	for _, s := range b {
		if !had[s.ID] {
			return true
		}
	}
	return false
}

// readGeneration reads the stream's generation record; the zero record when
// there is none.
func (c *Coordinator) readGeneration(ctx context.Context, stream string) (lease.Generation, error) {
	g, err := c.store.GetGeneration(ctx, stream)
	if errors.Is(err, lease.ErrNotFound) {
		return lease.Generation{}, nil
	}
	if err != nil {
		return g, fmt.Errorf("read generation: %w", err)
	}
	return g, nil
}

// sameGeneration reports whether two reads of a stream's generation record
// found it unchanged: no generation recorded or applied between them.
func sameGeneration(a, b lease.Generation) bool {
	return a.ID == b.ID && a.Order == b.Order && a.Applied == b.Applied && a.Incarnation == b.Incarnation
}

// summary is what a pass needs of DescribeStreamSummary.
type summary struct {
	arn         string
	incarnation int64     // the stream's creation time, Unix ms
	serverNow   time.Time // Kinesis's clock when it answered
}

func (c *Coordinator) describe(ctx context.Context, stream string) (summary, error) {
	return describeStream(ctx, c.kinesis, c.cfg.Clock, stream)
}

// describeAPI is the Kinesis call describeStream makes.
type describeAPI interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
}

func describeStream(ctx context.Context, api describeAPI, clock func() time.Time, stream string) (summary, error) {
	in := &kinesis.DescribeStreamSummaryInput{}
	if strings.HasPrefix(stream, "arn:") {
		in.StreamARN = aws.String(stream)
	} else {
		in.StreamName = aws.String(stream)
	}
	out, err := api.DescribeStreamSummary(ctx, in)
	if err != nil {
		return summary{}, fmt.Errorf("describe stream: %w", err)
	}
	var sm summary
	if d := out.StreamDescriptionSummary; d != nil {
		sm.arn = aws.ToString(d.StreamARN)
		if d.StreamCreationTimestamp != nil {
			sm.incarnation = d.StreamCreationTimestamp.UnixMilli()
		}
	}
	if t, ok := shards.ServerTime(out.ResultMetadata); ok {
		sm.serverNow = t
	} else {
		sm.serverNow = clock() // a client without HTTP responses (tests); documented in docs/design.md
	}
	return sm, nil
}

// generation reads the stream's generation record and takes the step
// stepFor decides: it records a new generation and applies its start, or
// finishes applying the recorded one, or reports a stale configuration. It
// returns whether it recorded a start on any row, and whether shards may be
// taken: not while the stream's record of this incarnation is unapplied.
func (c *Coordinator) generation(ctx context.Context, stream string, sub Subscription, listing []shards.Shard,
	rows map[string]lease.Lease, sum summary, res *StreamResult, log *slog.Logger) (recorded, ready bool, err error) {
	rec, err := c.store.GetGeneration(ctx, stream)
	found := err == nil
	if err != nil && !errors.Is(err, lease.ErrNotFound) {
		return false, false, fmt.Errorf("read generation: %w", err)
	}
	step := stepFor(rec, found, sub, sum.incarnation)
	res.Step, res.Generation = step.String(), rec
	// A record of an earlier incarnation says nothing about this one's rows.
	applied := !found || rec.Applied || (rec.Incarnation != 0 && sum.incarnation != 0 && rec.Incarnation != sum.incarnation)
	apply := sub // the configuration whose start is applied
	// A generation the record names is the same whoever applies it: its
	// start as configured is in the record. A coordinator that does not own
	// it finishes it when its own coordinator could not, rather than wait
	// (and take nothing) until it does, which after a deploy that changed
	// the start back may be never. A record written before the configured
	// start was kept can be finished by others only when it is the default.
	theirs := Subscription{Stream: sub.Stream, Start: rec.Configured, Generation: rec.ID}
	finishOther := !applied && (rec.ID == lease.DefaultGeneration || rec.Configured != "")
	if rec.ID == lease.DefaultGeneration {
		theirs.Start, theirs.Generation = "", ""
	}
	switch step {
	case genFollow:
		if !finishOther {
			return false, applied, nil
		}
		apply = theirs
	case genStale:
		res.StaleConfiguration = true
		log.WarnContext(ctx, "the stream's recorded generation is newer than this configuration's start position; changing nothing of this configuration's",
			"start", sub.Start, "generation", sub.Generation, "recorded", rec.ID, "recorded_start", rec.Start,
			"recorded_order", rec.Order, "recorded_at", rec.RecordedAt, "recorded_by", rec.RecordedBy, "finishing_it", finishOther)
		if rec.Incarnation != 0 && sum.incarnation != 0 && rec.Incarnation != sum.incarnation {
			// The stream was created again and the current configuration
			// has not begun it yet: a superseded one begins nothing, and a
			// shard it took now would open at its tip, before the current
			// configuration's start reaches the row.
			log.InfoContext(ctx, "the stream was created again; taking nothing until the current configuration begins it")
			return false, false, nil
		}
		if !finishOther {
			return false, applied, nil
		}
		apply = theirs
	case genBegin:
		if err := checkSequenceShard(sub, listing); err != nil {
			return false, false, err
		}
		prevOrder := int64(0)
		if found {
			prevOrder = rec.Order
		}
		begin := sub
		if sequenceOfEarlierStream(rec, found, sub, sum.incarnation) {
			// The record it names went with the stream it was recorded for:
			// the stream created again begins as without a start, and this
			// configuration is superseded (stale) from now on.
			log.WarnContext(ctx, "the configured sequence start names a record of an earlier stream of this name; the stream created again begins without a start",
				"start", sub.Start, "recorded_incarnation", rec.Incarnation, "incarnation", sum.incarnation)
			begin.Start, begin.Generation = "", ""
		}
		apply = begin
		next := newGeneration(rec, found, begin, listing, sum.incarnation, sum.serverNow, c.cfg.Clock(), c.cfg.Name)
		next.Applied = adoptsLegacy(rows, sub)
		skips := c.skips(ctx, begin, listing, rows, sum, next.Applied)
		if err := c.store.PutGeneration(ctx, stream, next, prevOrder); err != nil {
			if errors.Is(err, lease.ErrChanged) {
				log.InfoContext(ctx, "another coordinator recorded a generation first; deciding again next pass")
				return false, false, nil
			}
			return false, false, fmt.Errorf("record generation: %w", err)
		}
		log.InfoContext(ctx, "generation begins", "generation", next.ID, "order", next.Order, "start", next.Start,
			"tip", next.Tip, "shards", len(next.Shards), "superseded", next.Superseded)
		if len(skips) > 0 {
			res.Skipped = skips
			warnSkips(ctx, log, sub, rec, found, skips)
		}
		rec, res.Generation = next, next
		if rec.Applied {
			return false, true, nil
		}
	}
	// Apply rec's start to the shards it covers that are still listed. Each
	// write is conditional on the row's order, so a pass that repeats one
	// after a failure changes nothing, and an older coordinator's write can
	// never land over it. A row that already carries the generation (or a
	// newer one) needs no write; a failed write does not stop the others,
	// so each pass leaves fewer rows to write and a large stream's
	// application converges under a store that fails now and then. But a
	// shard's start is never written before its parents' (the listing
	// holds parents first): a child re-opened while its parent is not yet
	// would be read from its start at once by its loop's next run, before
	// the parent's records it follows. And a row whose checkpoint the start
	// keeps (IfAbsent, or a sequence or tip start over a shard read to its
	// end) is re-opened when a parent of it was re-opened by a newer
	// generation than the row's (see reopenedParent).
	listed := make(map[string]shards.Shard, len(listing))
	for _, s := range listing {
		listed[s.ID] = s
	}
	n := 0
	var failed error
	unwritten := map[string]bool{}    // shards whose start is not written this pass
	wrote := map[string]lease.Start{} // the starts written this pass
	changedSince := false             // a row kept changed since it was read
	for _, id := range rec.Shards {
		s, ok := listed[id]
		if !ok {
			continue
		}
		row, hasRow := rows[id]
		if hasRow && carries(row, rec) {
			continue
		}
		if slices.ContainsFunc(s.Parents(), func(p string) bool { return unwritten[p] }) {
			unwritten[id] = true
			continue
		}
		st, err := startFor(rec, apply, s, row, hasRow)
		if err != nil {
			return n > 0, false, err
		}
		if hasRow && !st.ClearCheckpoint && !st.Fresh {
			if at, ok := reopenedParent(s, row, rows, wrote); ok {
				if st.IfAbsent {
					st.Position = at
				}
				st.IfAbsent, st.ClearCheckpoint = false, true
				log.InfoContext(ctx, "re-opening a shard whose parent a superseded generation re-opened", "shard_id", id, "start", st.Position)
			}
		}
		keep := st.IfAbsent && hasRow && sameIncarnation(row.Incarnation, st.Incarnation)
		if keep {
			// The row keeps what it holds, and now carries rec's order:
			// a start of a generation rec superseded, which a pass still
			// applying that one may send after rec was applied, is refused
			// from now on. Only from the order the pass read: a start
			// that landed since is not kept unseen (see below).
			st = lease.Start{Position: st.Position, Generation: rec.ID, Order: rec.Order, Incarnation: st.Incarnation, Keep: true}
		}
		// Every write over a row the pass read (of this incarnation) lands
		// only over the row as read: a start that keeps the checkpoint
		// means one thing over a shard read to its end and another over the
		// same row re-opened meanwhile by a superseded generation's late
		// start, and the children it re-opens with it (reopenedParent)
		// were decided on the row as read.
		if hasRow && !st.IfAbsent && !st.Fresh && sameIncarnation(row.Incarnation, st.Incarnation) {
			st.IfFrom, st.From = true, row.GenerationOrder
		}
		if !st.IfAbsent && !keep {
			wrote[id] = st
		}
		changed, err := c.store.SetStart(ctx, stream, id, st)
		if err != nil {
			unwritten[id] = true
			if failed == nil {
				failed = fmt.Errorf("record start position on %s: %w", id, err)
			}
			continue
		}
		if st.IfFrom && !changed {
			// The row changed since the pass read it: a superseded
			// generation's start may have re-opened it, and its children
			// are then to be re-opened after it (or another coordinator
			// wrote rec's start first). The next pass decides on the row
			// as it is; rec is not applied before.
			unwritten[id], changedSince = true, true
			continue
		}
		if changed && !keep {
			n++
		}
	}
	res.StartRecorded = n > 0
	if failed != nil {
		return n > 0, false, failed
	}
	if changedSince {
		log.InfoContext(ctx, "a row the generation keeps changed since this pass read it; applying the rest next pass", "generation", rec.ID)
		return n > 0, false, nil
	}
	rec.Applied = true
	if err := c.store.PutGeneration(ctx, stream, rec, rec.Order); err != nil {
		if errors.Is(err, lease.ErrChanged) { // a newer generation is being recorded over these rows
			return n > 0, false, nil
		}
		return n > 0, false, fmt.Errorf("mark generation applied: %w", err)
	}
	res.Generation = rec
	log.InfoContext(ctx, "generation applied", "generation", rec.ID, "order", rec.Order, "start", rec.Start, "rows", n)
	return n > 0, true, nil
}

// reopenedParent reports whether a parent of shard s was re-opened by a
// newer generation than s's row and s has gone on meanwhile (it holds a
// checkpoint, SHARD_END included, or an owner), and returns that parent's
// start. Only a generation does that to a parent read to its end while its
// children read: one that re-opens closed shards (horizon, a timestamp) applies its
// start parents first, and a newer one that keeps rows as they are (a
// sequence start, the default) can supersede it between the parent and its
// children. Kept as it is, the child would read on (or stay read to its
// end, its children reading on) while its parent's records, which come
// before its own, are read again; re-opened at the parent's start (or at
// its own, a sequence start naming it), it is read after the parent again,
// and its holder, revoked, keeps the parent waiting until its invocations
// have ended (shards.Decide). wrote holds the starts written earlier in
// this pass, which the rows read before it do not show.
func reopenedParent(s shards.Shard, row lease.Lease, rows map[string]lease.Lease, wrote map[string]lease.Start) (string, bool) {
	if row.Checkpoint == "" && !row.Held() {
		return "", false
	}
	for _, p := range s.Parents() {
		w, written := wrote[p]
		if written && w.ClearCheckpoint {
			return w.Position, true
		}
		pr, ok := rows[p]
		if ok && sameIncarnation(pr.Incarnation, row.Incarnation) && !pr.Finished() && pr.Start != "" && pr.GenerationOrder > row.GenerationOrder {
			if written {
				return w.Position, true // its start moved this pass; its checkpoint is still gone
			}
			return pr.Start, true
		}
	}
	return "", false
}

// carries reports whether row already has generation rec's start (or a
// newer generation's) recorded, for the incarnation rec is for.
func carries(row lease.Lease, rec lease.Generation) bool {
	return sameIncarnation(row.Incarnation, rec.Incarnation) && row.GenerationOrder >= rec.Order
}

// laterIncarnation is the incarnation of a row written for a stream created
// after the one of incarnation inc (0: none is).
func laterIncarnation(rows map[string]lease.Lease, inc int64) int64 {
	var later int64
	for _, r := range rows {
		if inc != 0 && r.Incarnation > inc {
			later = max(later, r.Incarnation)
		}
	}
	return later
}

// sameIncarnation reports whether two incarnations (Unix ms creation times)
// are one, 0 standing for one not recorded.
func sameIncarnation(a, b int64) bool { return a == 0 || b == 0 || a == b }

// startLateShards records a generation's future timestamp start on the
// listed shards that its own listing did not hold and that have no row yet,
// and reports whether it recorded any. A start later than the tip the
// generation pinned can fall after a split that happened after its listing:
// the children were created before the start, and the records they hold
// from before it are not owed, as on their parent, which the start covers.
// Opened at the start, a shard reads from its first record stamped at or
// after it, which for a shard created after the start is its first record,
// so the write changes nothing for the shards created later. A start at or
// before the tip needs nothing: every shard the listing missed was created
// after the tip.
func (c *Coordinator) startLateShards(ctx context.Context, stream string, rec lease.Generation, listing []shards.Shard,
	rows map[string]lease.Lease, incarnation int64) (bool, error) {
	if !startsLate(rec) || (rec.Incarnation != 0 && incarnation != 0 && rec.Incarnation != incarnation) {
		return false, nil
	}
	recorded := false
	for _, s := range listing {
		if _, ok := rows[s.ID]; ok || slices.Contains(rec.Shards, s.ID) {
			continue
		}
		changed, err := c.store.SetStart(ctx, stream, s.ID, lease.Start{
			Position: rec.Start, Generation: rec.ID, Order: rec.Order, Incarnation: rec.Incarnation, IfAbsent: true,
		})
		if err != nil {
			return recorded, fmt.Errorf("record start position on %s: %w", s.ID, err)
		}
		recorded = recorded || changed
	}
	return recorded, nil
}

// reopenMissedChildren re-opens the listed shards that generation rec's own
// listing did not hold and that were opened, under an older generation,
// before rec re-opened a parent of theirs. A listing misses the children
// of a reshard still UPDATING when it is made, or done while its pass
// runs; a coordinator that listed them meanwhile may have taken them (their
// parent read to its end) and read on. Kept as they are, they would read on
// while the parent's records, which come before theirs, are read again, and
// the parent's replay would skip what they had delivered. Each is re-opened
// at its parent's start, its checkpoint cleared and its holder revoked,
// parents first (the listing holds them first), as applying a generation
// re-opens a listed child (see reopenedParent); the parent then waits for
// the revoked holders (shards.Decide). It reports whether it sent any
// start, changed or not: either way the rows the pass read are out of date
// (another coordinator's identical start may have landed first). A child
// rec's listing missed holds only records written after the
// generation's tip, so a child opened under rec itself (after the parent
// was read again to its end) is never re-opened: its parent is finished.
// A missed shard that carries an older generation's start (a late start,
// written on it after rec's listing was made) gets rec's start for a shard
// created after it (childStart) when nothing was read from it, or when
// that start is later than where rec opens such a shard (opensLater): what
// was read from it is read again, its holder revoked, its children
// re-opened after it.
//
// A listed shard rec kept as it was (rec keeps rows: a sequence start, the
// default) is re-opened the same way when a parent of it carries a newer
// generation than its own and is read again: a start of a generation rec
// superseded, which a pass still applying that one wrote on the parent
// after rec was applied (its write slow, or its host paused), so rec's
// application, which re-opens such a child, found the parent as it was.
// Since a generation records its order on the rows it keeps (Start.Keep),
// such a start is refused and this finds nothing; it stays for tables whose
// generation a version before the keeps applied.
func (c *Coordinator) reopenMissedChildren(ctx context.Context, stream string, rec lease.Generation, listing []shards.Shard,
	rows map[string]lease.Lease, incarnation int64, log *slog.Logger) (bool, error) {
	if rec.Order == 0 || (rec.Incarnation != 0 && incarnation != 0 && rec.Incarnation != incarnation) {
		return false, nil
	}
	covered := make(map[string]bool, len(rec.Shards))
	for _, id := range rec.Shards {
		covered[id] = true
	}
	wrote := map[string]lease.Start{}
	for _, s := range listing {
		row, ok := rows[s.ID]
		if !ok || !sameIncarnation(row.Incarnation, rec.Incarnation) || row.GenerationOrder >= rec.Order {
			continue
		}
		at, reopen := reopenedParent(s, row, rows, wrote)
		why := "re-opening a shard the generation's listing missed, whose parent it re-opened"
		if covered[s.ID] {
			if !reopen {
				continue
			}
			why = "re-opening a shard the generation kept, whose parent a generation it superseded re-opened since"
		}
		unread := false
		if !reopen {
			later := opensLater(row.Start, rec)
			if row.Start == "" || row.Checkpoint != "" && !later {
				continue
			}
			// An older generation's start that nothing was read from yet,
			// or one later than where rec opens a new shard (a late start
			// written on a shard created after the older one's listing):
			// rec owes the shard as a child created after it began, from
			// its first record (or rec's own late start), not from the
			// older start, which may be later. What was read from the
			// later start is read again.
			//
			// When the restart is owed only because nothing was read (the
			// older start is no later), it is sent on that condition: a
			// slow write landing after the shard was read to its end, and
			// after another pass, seeing it finished, restarted its
			// children under rec, would have it read again while they
			// read on.
			at, why = childStart(rec), "re-starting a shard the generation's listing missed, which carries an older generation's start"
			unread = !later
		}
		st := lease.Start{Position: at, Generation: rec.ID, Order: rec.Order, Incarnation: rec.Incarnation, ClearCheckpoint: true, IfUnread: unread}
		wrote[s.ID] = st
		log.InfoContext(ctx, why, "shard_id", s.ID, "start", at, "generation", rec.ID, "order", rec.Order)
		if _, err := c.store.SetStart(ctx, stream, s.ID, st); err != nil {
			return true, fmt.Errorf("record start position on %s: %w", s.ID, err)
		}
	}
	return len(wrote) > 0, nil
}

// childStart is where generation rec opens a shard created after it
// began: its own start when that is late (startsLate), else the shard's
// first record.
func childStart(rec lease.Generation) string {
	if startsLate(rec) {
		return rec.Start
	}
	return "horizon"
}

// opensLater reports whether start is a timestamp later than where
// generation rec opens a shard created after it began (its own late start,
// else its tip): a shard opened there may skip records rec owes.
func opensLater(start string, rec lease.Generation) bool {
	at, err := reader.ParsePosition(start)
	if err != nil || at.Kind != reader.Timestamp {
		return false
	}
	from := rec.Tip
	if startsLate(rec) {
		from = rec.Start
	}
	ref, err := reader.ParsePosition(from)
	return err == nil && ref.Kind == reader.Timestamp && at.At.After(ref.At)
}

// startsLate reports whether generation rec's start is a timestamp later
// than the tip it pinned: it then also covers shards created after its
// listing (a start of another kind covers none).
func startsLate(rec lease.Generation) bool {
	if rec.Start == "" || rec.Start == rec.Tip {
		return false
	}
	at, err := reader.ParsePosition(rec.Start)
	if err != nil || at.Kind != reader.Timestamp {
		return false
	}
	tip, err := reader.ParsePosition(rec.Tip)
	return err == nil && tip.Kind == reader.Timestamp && at.At.After(tip.At)
}

// cleanup removes rows that no listed shard needs, once nobody holds them
// (released, or lapsed by this coordinator's watch; each delete is
// conditional on the counter seen): rows of shards gone from the listing
// (trimmed by retention) once no listed child still needs them (a child
// needs its parent's row until the child has a checkpoint of its own), and
// rows of an earlier incarnation of the stream. Listing every row is a scan
// on DynamoDB, so it runs only when some listed shard has a parent that is
// not listed or some listed shard's row was stale.
func (c *Coordinator) cleanup(ctx context.Context, stream string, listing []shards.Shard, rows map[string]lease.Lease,
	stale []lease.Lease, verdicts map[string]lease.Verdict, res *StreamResult) ([]string, error) {
	var deleted []string
	del := func(r lease.Lease, v lease.Verdict) error {
		if !v.Available() {
			return nil
		}
		if err := c.store.Delete(ctx, stream, r.ShardID, v.Counter, r.Incarnation); err != nil {
			if errors.Is(err, lease.ErrHeld) {
				return nil // renewed or taken since: look again next pass
			}
			return fmt.Errorf("stream %s: delete row of %s: %w", stream, r.ShardID, err)
		}
		c.observer.Forget(stream, r.ShardID)
		deleted = append(deleted, r.ShardID)
		return nil
	}
	for _, r := range stale {
		v := verdicts[r.ShardID]
		if !v.Available() {
			res.StaleRows = append(res.StaleRows, r.ShardID)
		}
		if err := del(r, v); err != nil {
			return deleted, err
		}
	}

	listed := make(map[string]bool, len(listing))
	for _, s := range listing {
		listed[s.ID] = true
	}
	needed := map[string]bool{}
	suspect := len(stale) > 0
	for _, s := range listing {
		for _, p := range s.Parents() {
			if listed[p] {
				continue
			}
			suspect = true
			if r, ok := rows[s.ID]; !ok || r.Checkpoint == "" {
				needed[p] = true
			}
		}
	}
	if !suspect {
		return deleted, nil
	}
	all, err := c.store.List(ctx, stream)
	if err != nil {
		return deleted, fmt.Errorf("stream %s: list leases for cleanup: %w", stream, err)
	}
	now := c.cfg.Clock()
	for _, r := range all {
		if listed[r.ShardID] || needed[r.ShardID] {
			continue
		}
		if err := del(r, c.observer.Observe(r, now)); err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

func (c *Coordinator) wasCreated(stream string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.created[stream]
}

func (c *Coordinator) markCreated(stream string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.created[stream] = true
}

// OwnerID returns a fresh owner id for a shard: the shard id and 64 random
// bits, e.g. "shardId-000000000001-9f86d081884c7d65". It is a valid Step
// Functions execution name.
func OwnerID(shardID string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := shardID
	if len(id) > 60 {
		id = id[len(id)-60:]
	}
	return id + "-" + hex.EncodeToString(b[:])
}

func checkStart(s string) error {
	_, err := reader.ParsePosition(s)
	return err
}
