package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Defaults, defined in one place. A reader renews well inside the lease so
// that two missed renewals still leave it holding the shard.
const (
	// DefaultDuration is how long a take or renew holds a lease.
	DefaultDuration = 10 * time.Second
	// DefaultRenewInterval is how often a holder renews its lease.
	DefaultRenewInterval = 3 * time.Second
)

// ShardEnd is the checkpoint of a shard read to its end. A shard whose
// checkpoint is ShardEnd is never read again; its children may open.
const ShardEnd = "SHARD_END"

// KeySeparator joins stream and shard id in a row's key; neither may contain it.
const KeySeparator = ":"

// Lease is one row of the lease table.
type Lease struct {
	Stream  string // stream name
	ShardID string
	// Owner holds the lease until Expiry; empty when released or never taken.
	Owner  string
	Expiry time.Time
	// Counter goes up on every take and renew; it never goes down.
	Counter int64
	// Checkpoint is the sequence number of the last record settled, ShardEnd,
	// or empty when nothing has been checkpointed.
	Checkpoint string
	// ParentShardIDs are the shard's parents (one after a split, two after a
	// merge), as recorded when the lease was first taken.
	ParentShardIDs []string
	// Start is the subscription's start position recorded at startup for the
	// shards the subscription opened with; Generation names that startup.
	// StartApplied turns true with the first checkpoint written after it:
	// from then on the checkpoint, not Start, says where the shard opens.
	Start        string
	Generation   string
	StartApplied bool
	// MillisBehind is how far behind the tip of its shard the holder's
	// reader was (GetRecords' MillisBehindLatest) when it wrote a checkpoint
	// through a LagCheckpointer; LagAt is when, zero when never recorded.
	// Both are as of the last checkpoint that carried them: a reader that
	// is stuck writes none, so read them together with LagAt.
	MillisBehind int64
	LagAt        time.Time
}

// Key returns the row's key, "<stream>:<shard>".
func (l Lease) Key() string { return Key(l.Stream, l.ShardID) }

// Key returns the lease key of a shard of a stream.
func Key(stream, shardID string) string { return stream + KeySeparator + shardID }

// HeldAt reports whether an owner holds the lease at now.
func (l Lease) HeldAt(now time.Time) bool { return l.Owner != "" && now.Before(l.Expiry) }

// Finished reports whether the shard was read to its end.
func (l Lease) Finished() bool { return l.Checkpoint == ShardEnd }

// Store keeps lease rows. Implementations are safe for concurrent use.
type Store interface {
	// Take gives the lease to owner when the row has no owner, has this
	// owner, or has expired, creating the row if needed. It returns the row
	// as written, or an error matching ErrHeld.
	Take(ctx context.Context, stream, shardID, owner string, opts ...TakeOption) (Lease, error)
	// Renew extends owner's lease by the lease duration, or fails with
	// ErrNotOwner.
	Renew(ctx context.Context, stream, shardID, owner string) (Lease, error)
	// Checkpoint records seq (a sequence number or ShardEnd) as settled, or
	// fails with ErrNotOwner.
	Checkpoint(ctx context.Context, stream, shardID, owner, seq string) (Lease, error)
	// Release gives the lease up, keeping the checkpoint, or fails with
	// ErrNotOwner.
	Release(ctx context.Context, stream, shardID, owner string) error
	// Get reads one row, strongly consistent, or fails with ErrNotFound.
	Get(ctx context.Context, stream, shardID string) (Lease, error)
	// GetMany reads the rows of many shards of one stream, strongly
	// consistent, keyed by shard id; shards without a row are absent.
	GetMany(ctx context.Context, stream string, shardIDs []string) (map[string]Lease, error)
	// List returns every row of one stream, ordered by shard id.
	List(ctx context.Context, stream string) ([]Lease, error)
	// SetStart records the subscription's start position and generation on a
	// shard's row (creating it if needed), marks it not yet applied and
	// clears the owner: a loop reading under the previous generation stops
	// at its next renewal, and the shard is taken again to open at the new
	// start. It changes nothing and returns false when the row already
	// carries this generation, so that overlapping coordinators record it
	// once.
	SetStart(ctx context.Context, stream, shardID, start, generation string) (bool, error)
	// Delete removes a row nobody holds (released or expired), for shards
	// gone from the stream; it fails with ErrHeld while a live owner holds it.
	Delete(ctx context.Context, stream, shardID string) error
	// Reset moves a shard's reading position by an operator, not an owner:
	// it records start (a position in the reader's text form) as the row's
	// start, not yet applied, so the next reader opens there whatever the
	// checkpoint says, and it clears the owner so a holder stops at its next
	// renewal or checkpoint. It keeps the row's generation, so a coordinator
	// does not take the reset for a new subscription. It fails with
	// ErrNotFound when the shard has no row, and with ErrHeld while a live
	// owner holds the row unless force is set.
	Reset(ctx context.Context, stream, shardID, start string, force bool) (Lease, error)
}

// LagCheckpointer is a Store that can record the reader's lag in the same
// conditional write as a checkpoint. MemoryStore and DynamoStore are.
type LagCheckpointer interface {
	// CheckpointWithLag is Checkpoint that also sets MillisBehind and LagAt.
	CheckpointWithLag(ctx context.Context, stream, shardID, owner, seq string, millisBehind int64) (Lease, error)
}

// WithLag returns s with a Checkpoint that also records lag(stream,
// shardID), when lag knows it and s is a LagCheckpointer; every other
// method is s's own. lag must be fast and safe for concurrent use (for
// example metrics.Recorder.Lag, fed by the reader's MillisBehindLatest
// hook, which runs before the batch it read is delivered and checkpointed).
func WithLag(s Store, lag func(stream, shardID string) (millis int64, ok bool)) Store {
	lc, ok := s.(LagCheckpointer)
	if !ok || lag == nil {
		return s
	}
	return lagStore{Store: s, lc: lc, lag: lag}
}

type lagStore struct {
	Store
	lc  LagCheckpointer
	lag func(stream, shardID string) (int64, bool)
}

func (s lagStore) Checkpoint(ctx context.Context, stream, shardID, owner, seq string) (Lease, error) {
	if ms, ok := s.lag(stream, shardID); ok {
		// A negative lag (clock skew at the peer) is no reason to refuse a
		// checkpoint: record it as none.
		return s.lc.CheckpointWithLag(ctx, stream, shardID, owner, seq, max(ms, 0))
	}
	return s.Store.Checkpoint(ctx, stream, shardID, owner, seq)
}

// TakeOption adds attributes written together with a take.
type TakeOption func(*takeOptions)

type takeOptions struct {
	parents    []string
	generation string
	family     string
}

// RunSeparator joins a loop's owner id and the id of one of its runs in the
// owner a run writes ("<loop owner>/<run>"); see WithOwnerFamily.
const RunSeparator = "/"

// WithOwnerFamily lets a take also succeed when the row's owner is family
// itself or one of its runs (family + RunSeparator + anything). A loop
// takes each run's lease under a fresh run owner in the family of the loop's
// owner: the run takes over from the loop's previous run, and a previous
// run still going (a retried invocation that overlaps the first) finds its
// next renew or checkpoint refused and stops.
func WithOwnerFamily(family string) TakeOption {
	return func(o *takeOptions) { o.family = family }
}

// LoopOwner returns the loop owner of a run owner ("X/run" -> "X"), or owner
// itself.
func LoopOwner(owner string) string {
	loop, _, _ := strings.Cut(owner, RunSeparator)
	return loop
}

func (o takeOptions) inFamily(owner string) bool {
	return o.family != "" && (owner == o.family || strings.HasPrefix(owner, o.family+RunSeparator))
}

// WithGeneration marks a row that carries no generation yet with the
// subscription generation under which it was taken (without a start
// position), so the coordinator can still tell a running subscription from
// a new one after every shard it opened with is gone. A row that already
// carries a generation keeps it.
func WithGeneration(gen string) TakeOption {
	return func(o *takeOptions) { o.generation = gen }
}

// WithParents records the shard's parent ids on the row.
func WithParents(ids ...string) TakeOption {
	return func(o *takeOptions) {
		o.parents = slices.DeleteFunc(slices.Clone(ids), func(s string) bool { return s == "" })
	}
}

func applyTake(opts []TakeOption) takeOptions {
	var o takeOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Options configure a store.
type Options struct {
	// Duration of a lease from a take or renew. Default DefaultDuration.
	Duration time.Duration
	// Clock returns the current time. Default time.Now.
	Clock func() time.Time
}

func (o *Options) setDefaults() {
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
}

func (o Options) validate() error {
	if o.Duration < 0 {
		return &InvalidError{Field: "Duration", Value: o.Duration.String(), Want: "a positive duration"}
	}
	return nil
}

// Sentinel errors; match them with errors.Is through any wrapping.
var (
	// ErrHeld: a take refused because another owner's lease is live (or a
	// delete or unforced reset refused because someone holds the row).
	ErrHeld = errors.New("lease held by another owner")
	// ErrNotOwner: a renew, checkpoint or release refused because this owner
	// no longer holds the row.
	ErrNotOwner = errors.New("lease not held by this owner")
	// ErrNotFound: no row for this shard.
	ErrNotFound = errors.New("lease not found")
	// ErrInvalid: bad input, reported before any request is sent.
	ErrInvalid = errors.New("invalid lease input")
)

// ConflictError is a refused conditional write. It matches ErrHeld or
// ErrNotOwner with errors.Is. Current is the row as the store saw it when
// the store could tell without another read, else nil.
type ConflictError struct {
	Op      string // "take", "renew", "checkpoint", "release", "delete", "reset"
	Key     string
	Owner   string // the caller's owner id
	Current *Lease
	Err     error // ErrHeld or ErrNotOwner
}

func (e *ConflictError) Error() string {
	msg := fmt.Sprintf("%s %s for %q: %v", e.Op, e.Key, e.Owner, e.Err)
	if e.Owner == "" {
		msg = fmt.Sprintf("%s %s: %v", e.Op, e.Key, e.Err)
	}
	if e.Current != nil && e.Current.Owner != "" {
		msg += fmt.Sprintf(" (owner %q until %s)", e.Current.Owner, e.Current.Expiry.UTC().Format(time.RFC3339Nano))
	}
	return msg
}

func (e *ConflictError) Unwrap() error { return e.Err }

// InvalidError names the input field that was refused and what was expected.
// It matches ErrInvalid with errors.Is.
type InvalidError struct {
	Field string
	Value string
	Want  string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("lease: invalid %s %q: want %s", e.Field, e.Value, e.Want)
}

func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func checkName(field, v string) error {
	switch {
	case v == "":
		return &InvalidError{Field: field, Value: v, Want: "a non-empty name"}
	case strings.Contains(v, KeySeparator):
		return &InvalidError{Field: field, Value: v, Want: fmt.Sprintf("a name without %q (use the stream name, not its ARN)", KeySeparator)}
	}
	return nil
}

func checkKey(stream, shardID string) error {
	if err := checkName("stream", stream); err != nil {
		return err
	}
	return checkName("shard id", shardID)
}

func checkOwned(stream, shardID, owner string) error {
	if err := checkKey(stream, shardID); err != nil {
		return err
	}
	if owner == "" {
		return &InvalidError{Field: "owner", Value: owner, Want: "a non-empty owner id"}
	}
	return nil
}

func checkSeq(seq string) error {
	if seq == "" {
		return &InvalidError{Field: "checkpoint", Value: seq, Want: "a sequence number or " + ShardEnd}
	}
	if seq != ShardEnd {
		for _, r := range seq {
			if r < '0' || r > '9' {
				return &InvalidError{Field: "checkpoint", Value: seq, Want: "a decimal sequence number or " + ShardEnd}
			}
		}
	}
	return nil
}

func checkMany(stream string, shardIDs []string) error {
	if err := checkName("stream", stream); err != nil {
		return err
	}
	for _, id := range shardIDs {
		if err := checkName("shard id", id); err != nil {
			return err
		}
	}
	return nil
}

func checkStart(stream, shardID, start, generation string) error {
	if err := checkKey(stream, shardID); err != nil {
		return err
	}
	if start == "" {
		return &InvalidError{Field: "start", Value: start, Want: "a start position"}
	}
	if generation == "" {
		return &InvalidError{Field: "generation", Value: generation, Want: "a non-empty generation"}
	}
	return nil
}

func checkReset(stream, shardID, start string) error {
	if err := checkKey(stream, shardID); err != nil {
		return err
	}
	if start == "" {
		return &InvalidError{Field: "start", Value: start, Want: "a position to reset to"}
	}
	return nil
}

func checkLag(ms int64) error {
	if ms < 0 {
		return &InvalidError{Field: "millis behind", Value: fmt.Sprint(ms), Want: "a non-negative number of milliseconds"}
	}
	return nil
}

func notFound(stream, shardID string) error {
	return fmt.Errorf("get %s: %w", Key(stream, shardID), ErrNotFound)
}

func sortByShard(ls []Lease) {
	slices.SortFunc(ls, func(a, b Lease) int { return strings.Compare(a.ShardID, b.ShardID) })
}
