package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

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
}

// Starter starts a loop for a shard whose lease the coordinator has just
// taken for loop.Owner. Starting the same owner twice must be harmless.
type Starter interface {
	Start(ctx context.Context, loop Loop) error
}

// KinesisAPI is what the coordinator calls on Kinesis.
type KinesisAPI interface {
	shards.ListAPI
	shards.CreateAPI
}

// Coordinator runs passes over its subscriptions. It is safe for one Run at a
// time plus concurrent Nudge calls.
type Coordinator struct {
	cfg     Config
	store   lease.Store
	kinesis KinesisAPI
	starter Starter
	nudge   chan struct{}

	mu      sync.Mutex
	created map[string]bool // streams create-if-missing has run for
}

// New validates cfg and returns a Coordinator.
func New(cfg Config, store lease.Store, kinesis KinesisAPI, starter Starter) (*Coordinator, error) {
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
	return &Coordinator{cfg: cfg, store: store, kinesis: kinesis, starter: starter,
		nudge: make(chan struct{}, 1), created: map[string]bool{}}, nil
}

// Nudge asks a running Run to pass again at once. It never blocks.
func (c *Coordinator) Nudge() {
	select {
	case c.nudge <- struct{}{}:
	default:
	}
}

// Run passes over every subscription now and then every relist interval, or
// at once after a Nudge, until window has passed or ctx ends. A failed pass
// is logged and retried at the next interval; Run returns the last pass's
// error only when every pass failed.
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
		// Pass again just after the earliest lease expiry seen: a loop that
		// died is then taken over within moments of its lease lapsing rather
		// than at the next relist. Live leases are renewed every 3 s, so their
		// expiries are never nearer than ~7 s and this adds few passes.
		if next := res.NextExpiry(); !next.IsZero() {
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

// NextExpiry is the earliest future expiry of a lease held by another owner
// in any stream of the pass, or the zero time.
func (r PassResult) NextExpiry() time.Time {
	var next time.Time
	for _, s := range r.Streams {
		if !s.NextExpiry.IsZero() && (next.IsZero() || s.NextExpiry.Before(next)) {
			next = s.NextExpiry
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
	// Waiting explains the shards not taken, by shard id.
	Waiting map[string]shards.Reason
	// StartRecorded is true when this pass recorded the start position.
	StartRecorded bool
	// Deleted lists rows removed for shards gone from the listing.
	Deleted []string
	// NextExpiry is the earliest expiry of the held leases of listed,
	// unfinished shards, those taken in this pass included; zero when none
	// is held.
	NextExpiry time.Time
}

// Pass runs one pass over every subscription. Errors of one subscription do
// not stop the others; they are joined.
func (c *Coordinator) Pass(ctx context.Context) (PassResult, error) {
	var res PassResult
	var errs []error
	for _, sub := range c.cfg.Subscriptions {
		r, err := c.passOne(ctx, sub)
		res.Streams = append(res.Streams, r)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return res, errors.Join(errs...)
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

	listing, err := shards.List(ctx, c.kinesis, sub.Stream)
	if err != nil {
		return res, fmt.Errorf("stream %s: %w", name, err)
	}
	res.Shards = len(listing)
	ids := make([]string, len(listing))
	for i, s := range listing {
		ids[i] = s.ID
	}
	rows, err := c.store.GetMany(ctx, name, ids)
	if err != nil {
		return res, fmt.Errorf("stream %s: read leases: %w", name, err)
	}

	// Subscription startup: the first pass of a generation records the start
	// position on every shard it opens with. A later pass finishes a startup
	// that failed part way: an original shard (no parents) still without a
	// row gets the start recorded on its siblings' rows. Children never get
	// it: they open at their oldest record.
	start, todo := startupPlan(listing, rows, sub, c.cfg.Clock())
	for _, id := range todo {
		if _, err := c.store.SetStart(ctx, name, id, start, sub.Generation); err != nil {
			return res, fmt.Errorf("stream %s: record start position: %w", name, err)
		}
	}
	if len(todo) > 0 {
		res.StartRecorded = true
		log.InfoContext(ctx, "subscription start recorded", "start", start, "generation", sub.Generation, "shards", len(todo))
		if rows, err = c.store.GetMany(ctx, name, ids); err != nil {
			return res, fmt.Errorf("stream %s: read leases: %w", name, err)
		}
	}

	d := shards.Decide(shards.Input{Shards: listing, Leases: rows, StartAtTip: sub.Start == "latest", Now: c.cfg.Clock()})
	res.Waiting = d.NotLeasable
	for _, why := range d.NotLeasable {
		if why.Kind == shards.Held && (res.NextExpiry.IsZero() || why.Until.Before(res.NextExpiry)) {
			res.NextExpiry = why.Until
		}
	}
	var errs []error
	for _, s := range d.Leasable {
		owner := c.cfg.NewOwner(s.ID)
		taken, err := c.store.Take(ctx, name, s.ID, owner, lease.WithParents(s.Parents()...), lease.WithGeneration(sub.Generation))
		if errors.Is(err, lease.ErrHeld) {
			res.Lost++ // another coordinator took it first
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("take %s: %w", lease.Key(name, s.ID), err))
			continue
		}
		loop := Loop{Stream: name, ShardID: s.ID, Owner: owner}
		if strings.HasPrefix(sub.Stream, "arn:") {
			loop.StreamARN = sub.Stream
		}
		if err := c.starter.Start(ctx, loop); err != nil {
			// Give the shard back so that the next pass can try again.
			if rerr := c.store.Release(ctx, name, s.ID, owner); rerr != nil {
				log.WarnContext(ctx, "release after a failed start", "shard_id", s.ID, "owner", owner, "err", rerr)
			}
			errs = append(errs, fmt.Errorf("start loop for %s: %w", lease.Key(name, s.ID), err))
			continue
		}
		if res.NextExpiry.IsZero() || taken.Expiry.Before(res.NextExpiry) {
			res.NextExpiry = taken.Expiry
		}
		log.InfoContext(ctx, "started loop", "shard_id", s.ID, "owner", owner)
		res.Started = append(res.Started, loop)
	}

	deleted, err := c.cleanup(ctx, name, listing, rows)
	res.Deleted = deleted
	if err != nil {
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

// cleanup removes the rows of shards gone from the listing (trimmed by
// retention) once no listed child still needs them: a child needs its
// parent's row until the child has a checkpoint of its own. Rows of listed
// shards are never touched. It lists the stream's rows, which on DynamoDB is
// a scan, so it runs only when some listed shard has a parent that is not
// listed or the row count differs from the listing.
func (c *Coordinator) cleanup(ctx context.Context, stream string, listing []shards.Shard, rows map[string]lease.Lease) ([]string, error) {
	listed := make(map[string]bool, len(listing))
	for _, s := range listing {
		listed[s.ID] = true
	}
	needed := map[string]bool{}
	suspect := false
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
		return nil, nil
	}
	all, err := c.store.List(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: list leases for cleanup: %w", stream, err)
	}
	var deleted []string
	for _, r := range all {
		if listed[r.ShardID] || needed[r.ShardID] || r.HeldAt(c.cfg.Clock()) {
			continue
		}
		if err := c.store.Delete(ctx, stream, r.ShardID); err != nil {
			if errors.Is(err, lease.ErrHeld) {
				continue
			}
			return deleted, fmt.Errorf("stream %s: delete row of trimmed shard %s: %w", stream, r.ShardID, err)
		}
		deleted = append(deleted, r.ShardID)
	}
	return deleted, nil
}

// recordedStart is the start position written on the rows at startup. The
// tip ("latest") is pinned to the startup time, as a timestamp: a reader that
// opens at the tip and dies before its first checkpoint would otherwise leave
// its successor at a later tip, and the records in between would be skipped.
// With the timestamp every reader of the opening set opens at the same place
// until a checkpoint is written (a few records may be delivered twice).
func recordedStart(start string, now time.Time) string {
	if start == "latest" {
		return fmt.Sprintf("timestamp:%d", now.UnixMilli())
	}
	return start
}

// startupPlan says which listed shards need the start position recorded, and
// which position. With no row of this generation, this pass is the
// subscription's startup: every listed shard. Otherwise the shards a
// startup that failed part way missed: rows of another generation, and
// parentless shards without a row (a child without a row was created after
// startup and opens at its oldest record), with the start already recorded
// on the generation's rows.
func startupPlan(listing []shards.Shard, rows map[string]lease.Lease, sub Subscription, now time.Time) (string, []string) {
	var recorded string
	started := false
	for _, r := range rows {
		if r.Generation == sub.Generation {
			started = true
			if r.Start != "" {
				recorded = r.Start
			}
		}
	}
	var todo []string
	for _, s := range listing {
		row, hasRow := rows[s.ID]
		switch {
		case !started, // the startup itself
			hasRow && row.Generation != sub.Generation, // missed by a startup that failed part way
			!hasRow && len(s.Parents()) == 0:           // likewise, a row never written
			todo = append(todo, s.ID)
		}
	}
	if recorded == "" {
		recorded = recordedStart(sub.Start, now)
	}
	return recorded, todo
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
