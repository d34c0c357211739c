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

// metaSeparator joins a stream and the name of one of its own rows (the
// generation record); no stream name or shard id contains it.
const metaSeparator = "#"

// generationKey is the key of a stream's generation record.
func generationKey(stream string) string { return stream + metaSeparator + "generation" }

// Lease is one row of the lease table.
type Lease struct {
	Stream  string // stream name
	ShardID string
	// Owner holds the lease while it renews it; empty when released or never
	// taken. Whether a holder is still alive is judged by a taker watching
	// Counter on its own clock (Observer), never by Expiry.
	Owner string
	// Expiry is when the holder's last take or renew would end the lease by
	// the holder's clock. It is for operators (shardloop status); no
	// decision reads it, because hosts' clocks disagree.
	Expiry time.Time
	// Counter goes up on every take and renew, and when a start is
	// recorded (SetStart, Reset); it never goes down. A lease whose counter
	// a taker has seen unchanged for a lease duration has lapsed (see
	// Observer and IfCounter); a take or delete conditional on a counter
	// seen before a start was recorded fails, so a row is never deleted
	// or taken over on what it said before its new start.
	Counter int64
	// Revoked is set when a new start (a generation, a reset) was recorded
	// under a holder: the holder may no longer renew, checkpoint or pin, so it
	// stops at its next renewal; the row is taken by another owner only once a
	// taker has seen its counter stand still for a lease duration (so the
	// holder's deadline has passed), or at once by the next run of the same
	// loop, unless the shard has parents: the new start may have opened a
	// parent again, so only a coordinator, which opens a child only after
	// every parent is read to its end, takes a revoked child. A take clears
	// it.
	Revoked bool
	// Checkpoint is the sequence number of the last record settled, ShardEnd,
	// or empty when nothing has been checkpointed.
	Checkpoint string
	// ParentShardIDs are the shard's parents (one after a split, two after a
	// merge), as recorded when the lease was first taken.
	ParentShardIDs []string
	// Start is where the shard opens next instead of after its checkpoint: a
	// subscription generation's start position (SetStart), a reader's pin of
	// a tip opening (Pin), or an operator's reset (Reset). StartApplied turns
	// true with the first checkpoint written after it: from then on the
	// checkpoint says where the shard opens.
	Start        string
	StartApplied bool
	// Generation and GenerationOrder name the subscription generation whose
	// start was last recorded on the row (see Generation); empty and 0 when
	// none was.
	Generation      string
	GenerationOrder int64
	// Incarnation is the creation time (Unix ms) of the stream incarnation the
	// row belongs to, 0 when not recorded: a row of a stream deleted and
	// created again under the same name is of an earlier incarnation.
	Incarnation int64
	// MillisBehind is how far behind the tip of its shard the holder's
	// reader was (GetRecords' MillisBehindLatest) when it wrote a checkpoint
	// that carried it (WithMillisBehind, Renewal.MillisBehind; a Holder
	// given HolderOptions.Lag does); LagAt is when, zero when never recorded.
	// Both are as of the last checkpoint that carried them: a reader that
	// is stuck writes none, so read them together with LagAt.
	MillisBehind int64
	LagAt        time.Time
	// Fence is how long the invocations the row's last writer may have
	// started can still run: a taker that watches the row's counter waits a
	// lease duration plus Fence for a held row (the holder's deadline, then
	// its invocations), and Fence alone for a released one, before it takes
	// (see Observer). 0 when the writer had nothing in flight.
	Fence time.Duration
	// WriteSeq is the number of the holder's last renewal (Renewal.Seq):
	// a renewal lands only over a lower one, so one sent late (an attempt
	// that timed out at the client and reached the table afterwards) never
	// lands over a newer one. A take clears it.
	WriteSeq int64
	// Failing is what the reader records of deliveries that keep failing
	// after the checkpoint (their records and how often each failed), so
	// that an owner that takes the row, a new loop after a crash too, goes
	// on counting where the last one stopped instead of at 0. It is opaque
	// to the store (at most MaxFailing bytes), written by renewals and
	// releases that carry it (Renewal.Failing, Handover.Failing), kept by
	// takes and checkpoints, and removed by a new start (SetStart, Reset).
	// "" when nothing is failing.
	Failing string
}

// MaxFailing bounds Lease.Failing, in bytes.
const MaxFailing = 16 << 10

// Key returns the row's key, "<stream>:<shard>".
func (l Lease) Key() string { return Key(l.Stream, l.ShardID) }

// Key returns the lease key of a shard of a stream.
func Key(stream, shardID string) string { return stream + KeySeparator + shardID }

// Held reports whether the row names an owner. The owner may be dead: only
// an Observer tells a live holder from a lapsed one.
func (l Lease) Held() bool { return l.Owner != "" }

// Finished reports whether the shard was read to its end.
func (l Lease) Finished() bool { return l.Checkpoint == ShardEnd }

// The lease table is used by five kinds of caller, and each gets an
// interface of what it calls, small enough that a wrapper (a fault
// injector, a dead process's store, a simulator's network) implements the
// one it wraps whole: a method added to an interface then breaks the
// wrapper's build instead of passing through it unseen. Store is all of
// them, for the constructors: MemoryStore and DynamoStore implement it.
// Implementations are safe for concurrent use.

// HolderStore is what one run's Holder uses: its writes to the row it
// holds, and the read that resyncs it after a refusal.
type HolderStore interface {
	// Take gives the lease to owner when the row does not exist, has no
	// owner and no fence, has this owner, was handed back to its loop with
	// no fence (WithOwnerFamily), or still has the counter the taker saw
	// unchanged for as long as the row required (IfCounter, Observer),
	// creating the row if needed. It records the fence WithFence gives (0
	// without) and returns the row as written, or an error matching ErrHeld.
	Take(ctx context.Context, stream, shardID, owner string, opts ...TakeOption) (Lease, error)
	// Renew extends owner's lease: it bumps the counter, sets Expiry and
	// records rn (its fence, and the checkpoint it carries), or fails with
	// ErrNotOwner (another owner, or the lease was revoked), or ErrBehind
	// (the row's checkpoint is past the one rn carries; nothing written).
	// A renewal whose Seq is not above the row's WriteSeq is not written;
	// when the row's is Seq itself (an earlier attempt of this very
	// renewal landed), it succeeds.
	Renew(ctx context.Context, stream, shardID, owner string, rn Renewal) (Lease, error)
	// Checkpoint records seq (a sequence number or ShardEnd) as settled, or
	// fails with ErrNotOwner (another owner, or the lease was revoked) or
	// ErrBehind: checkpoints only move forward (ShardEnd last) until a new
	// start (SetStart, Reset) re-opens the shard. WithMillisBehind records
	// the reader's lag in the same write.
	Checkpoint(ctx context.Context, stream, shardID, owner, seq string, opts ...CheckpointOption) (Lease, error)
	// CheckpointWindow records w.Seq as the checkpoint, as Checkpoint does,
	// and w as the shard's tumbling window, in one conditional write: the
	// window state and the checkpoint it belongs to are durable together or
	// not at all. It fails with ErrNotOwner (another owner, or the lease was
	// revoked), leaving the previous window as it was, and with ErrInvalid
	// for a state over MaxWindowState.
	CheckpointWindow(ctx context.Context, stream, shardID, owner string, w Window) error
	// Pin records start as where owner opened the shard at its tip, before
	// its first delivery, so that every later reader opens at or before it
	// until a checkpoint is written. It keeps the row's generation; it fails
	// with ErrNotOwner.
	Pin(ctx context.Context, stream, shardID, owner, start string) (Lease, error)
	// Release gives the lease up, keeping the checkpoint: to anyone, or
	// back to the loop ho.To names, recording ho.Fence; it bumps the
	// counter. It fails with ErrNotOwner.
	Release(ctx context.Context, stream, shardID, owner string, ho Handover) error
	// Get reads one row, strongly consistent, or fails with ErrNotFound.
	Get(ctx context.Context, stream, shardID string) (Lease, error)
}

// CoordinatorStore is what a coordinator uses: the rows of many shards,
// the starts it records, the rows it cleans up, the stream's generation
// record, and its takes of the shards it starts loops for (released again
// when a start fails).
type CoordinatorStore interface {
	// GetMany reads the rows of many shards of one stream, strongly
	// consistent, keyed by shard id; shards without a row are absent.
	GetMany(ctx context.Context, stream string, shardIDs []string) (map[string]Lease, error)
	// List returns every shard row of one stream, ordered by shard id.
	List(ctx context.Context, stream string) ([]Lease, error)
	// SetStart records a subscription generation's start on a shard's row
	// (creating it if needed) and revokes the holder's lease, so that a loop
	// reading under an earlier generation stops at its next renewal and the
	// shard is taken again, once that holder's deadline has passed, to open at
	// the new start. It changes nothing and returns
	// false when the row already carries this generation's order or a later
	// one, so that overlapping coordinators record a generation once and an
	// older one never overwrites a newer one (or, with Start.IfAbsent, when
	// the row exists). A row of an earlier incarnation of the stream than
	// Start.Incarnation is always replaced; a row of a later one is never
	// changed (the start is for a stream deleted since). A start it records drops the
	// row's window (GetWindow then fails with ErrNotFound).
	SetStart(ctx context.Context, stream, shardID string, start Start) (bool, error)
	// Delete removes a row when its counter is still counter and its
	// incarnation still incarnation (0: none recorded): the caller saw it
	// released, or unchanged for a lease duration (a lapsed holder). It
	// fails with ErrHeld when either moved: a row deleted and written again
	// since starts its counter again, and a stale row's delete that lands
	// late must not remove the new stream's row of the same shard id.
	// Deleting a missing row is not an error. The row's window goes with it.
	Delete(ctx context.Context, stream, shardID string, counter, incarnation int64) error
	// GetGeneration reads the stream's generation record, strongly
	// consistent, or fails with ErrNotFound.
	GetGeneration(ctx context.Context, stream string) (Generation, error)
	// PutGeneration writes the stream's generation record when the stored
	// one still has order prevOrder (0: when there is none), or fails with
	// ErrChanged: another coordinator wrote first.
	PutGeneration(ctx context.Context, stream string, g Generation, prevOrder int64) error
	// Take: see HolderStore.
	Take(ctx context.Context, stream, shardID, owner string, opts ...TakeOption) (Lease, error)
	// Release: see HolderStore.
	Release(ctx context.Context, stream, shardID, owner string, ho Handover) error
}

// HeartbeatStore is what runners that share a table use to see each other.
type HeartbeatStore interface {
	// Beat writes the heartbeat row of runner hb.Runner for stream: it bumps
	// the row's counter, records hb's Host, PID, Leases and BeatAt, creates
	// the row when there is none (a first beat, or a row a watcher removed
	// as gone) and lists the runner among the stream's runners. It returns
	// the row as written.
	Beat(ctx context.Context, stream string, hb Heartbeat) (Heartbeat, error)
	// Runners returns the heartbeat rows of the stream's runners, strongly
	// consistent, ordered by runner id. A runner listed without a row
	// (between the two writes of a Beat or a Leave) comes with Counter 0.
	Runners(ctx context.Context, stream string) ([]Heartbeat, error)
	// Leave removes runner's heartbeat row when its counter is still counter
	// (the runner's own last beat, or one a watcher saw stand still for a
	// lease duration: a runner gone; 0 for a runner listed without a row)
	// and takes the runner off the stream's runners. It fails with ErrHeld
	// when the counter moved. Leaving twice is not an error.
	Leave(ctx context.Context, stream, runner string, counter int64) error
}

// WindowReader reads the tumbling window a holder recorded
// (HolderStore.CheckpointWindow).
type WindowReader interface {
	// GetWindow reads the shard's window as last recorded by
	// CheckpointWindow, strongly consistent, or fails with ErrNotFound, or
	// with ErrWindowUnreadable when the row names a window it cannot read. Its
	// Seq may be behind the row's checkpoint (a checkpoint written without
	// a window): then it describes other records. A new start, a reset and
	// a delete drop the window.
	GetWindow(ctx context.Context, stream, shardID string) (Window, error)
}

// AdminStore is what an operator's tools use on one row.
type AdminStore interface {
	// Reset moves a shard's reading position by an operator, not an owner:
	// it records start (a position in the reader's text form) as the row's
	// start, not yet applied, so the next reader opens there whatever the
	// checkpoint says, and it revokes the holder's lease (see Revoked) so the
	// holder stops at its next renewal or checkpoint. It keeps the row's
	// generation, and drops the row's window. It fails with ErrNotFound
	// when the shard has no row, and with ErrHeld while an owner holds the
	// row unless force is set (shardloop reset forces it only after watching
	// the counter stand still for a lease duration, or when told to).
	Reset(ctx context.Context, stream, shardID, start string, force bool) (Lease, error)
	// Get: see HolderStore.
	Get(ctx context.Context, stream, shardID string) (Lease, error)
}

// Store is every operation on the lease table.
type Store interface {
	HolderStore
	CoordinatorStore
	HeartbeatStore
	WindowReader
	AdminStore
}

// Renewal is what a renewal writes besides extending the lease.
type Renewal struct {
	// Seq numbers the holder's renewals, from 1 up: the store writes a
	// renewal only over a lower one (Lease.WriteSeq). 0: unnumbered (a
	// caller that sends one renewal at a time and waits for each), written
	// whatever the row's number.
	Seq int64
	// Fence is recorded as the row's Fence: how long after the holder's
	// deadline that this renewal sets (its send time + the lease - the
	// holder's margin) the invocations it may start or have started can
	// still run. 0: none is running, and none starts before a renewal
	// with a fence is written.
	Fence time.Duration
	// Checkpoint, when not empty, is recorded as by Checkpoint, in the
	// same write (coalesced with the renewal); MillisBehind, when not nil,
	// with it, as by WithMillisBehind.
	Checkpoint   string
	MillisBehind *int64
	// Failing, when not nil, is recorded as the row's Failing ("" removes
	// it); nil leaves the row's as it is.
	Failing *string
}

// Handover is how a holder gives its lease up (Release).
type Handover struct {
	// To is the loop owner the row goes back to: its next run takes it at
	// once when Fence is 0 (WithOwnerFamily). Empty frees the row for
	// anyone.
	To string
	// Fence is recorded as the row's Fence: how long, from the release,
	// invocations the holder started may still run. A taker waits it out.
	Fence time.Duration
	// Failing, when not nil, is recorded as the row's Failing, as a
	// renewal's is.
	Failing *string
}

// Start is what SetStart records on a shard's row.
type Start struct {
	// Position is the start in the reader's text form (a tip pinned as a
	// timestamp).
	Position string
	// Generation and Order name the generation (see Generation).
	Generation string
	Order      int64
	// Incarnation of the stream the row belongs to (Lease.Incarnation).
	Incarnation int64
	// Finished records the shard as read to its end. (The coordinator no
	// longer uses it: a shard closed when a generation starts at the tip
	// may hold records newer than the tip, so it is read from there.)
	Finished bool
	// ClearCheckpoint removes the checkpoint, SHARD_END included, so a shard
	// read to its end is read again from Position (a horizon or timestamp
	// generation re-reads closed shards still in retention, parents before
	// children).
	ClearCheckpoint bool
	// IfAbsent records the start only on a shard that has no row (or a row
	// of an earlier incarnation): the default start of a subscription that
	// configures none never moves a checkpoint.
	IfAbsent bool
	// IfUnread records the start only on a row that holds no checkpoint
	// (SHARD_END included), or on none: a restart a coordinator decided
	// because nothing was read from the shard is refused once something
	// was. Landing later, after the shard was read to its end and its
	// children read on, it would have the shard read again while they
	// went on.
	IfUnread bool
	// Fresh writes the row as new: its checkpoint, parents and lag are
	// removed (the writer saw it was of an earlier incarnation of the
	// stream; a shard id of a stream created again is another shard).
	Fresh bool
	// IfFrom records the start only over a row of the same incarnation (or
	// of none recorded) whose order is still From, as the writer read it (0:
	// none recorded): a start another coordinator wrote since (one of a
	// generation this one superseded, landing late) is not overwritten
	// unseen, and the writer decides again on the row as it is. A start
	// that keeps the checkpoint means one thing over a shard read to its
	// end and another over the same row re-opened meanwhile.
	IfFrom bool
	From   int64
	// Keep records that a generation keeps the row as it is: only its
	// generation and order change (Position is not written; the start,
	// checkpoint, counter and holder stay). It goes with IfFrom. Once every
	// row a generation lists carries its order, a start of a generation it
	// superseded, sent by a pass still applying that one, is refused.
	Keep bool
}

// Generation is a stream's subscription generation record: one row per
// stream beside its shard rows. A generation begins when a coordinator with
// an explicitly configured start position finds none recorded, or finds one
// it has never seen (a newer configuration); its start then applies once to
// the shards listed at that moment, overriding their checkpoints. A
// coordinator whose generation is among Superseded is older than the
// recorded one and changes nothing.
type Generation struct {
	// ID is the generation's id, derived from the stream and the start as
	// configured; DefaultGeneration for a subscription that configures none.
	ID string
	// Start is the start position as recorded (a tip pinned as
	// "timestamp:<ms>" on Kinesis's clock, once, when the record was made).
	Start string
	// Configured is the start as its configuration gave it ("latest",
	// "horizon", "timestamp:<ms>", "sequence:<shard>:<seq>"; empty for the
	// default generation, and in records written before it was kept): with
	// it, any coordinator can finish applying the generation, whatever its
	// own configuration.
	Configured string
	// Tip is the stream's tip when the generation began, pinned the same
	// way: where a shard the start does not name opens when it has no row
	// yet (the other shards of a sequence start, every shard of the
	// default generation).
	Tip string
	// Order is 1 for the stream's first generation and one more for each
	// later one.
	Order int64
	// Superseded are the ids of earlier generations, oldest first (the
	// newest MaxSuperseded are kept).
	Superseded []string
	// Incarnation is the creation time (Unix ms) of the stream incarnation
	// the record is for.
	Incarnation int64
	// Shards are the shards listed when the generation began: the start
	// applies to these, and to a shard created later only when it is a
	// timestamp after Tip (the coordinator records it on such a shard that
	// has no row yet). Applied turns true once every one of them has it.
	Shards  []string
	Applied bool
	// DeployedAt is when the configuration that recorded it was deployed
	// (its coordinator function's last update, as Lambda reports it; the
	// time a local runner started), zero when unknown. Configurations are
	// ordered by it where both know theirs: one deployed earlier never
	// supersedes the record of one deployed later, whichever passed first.
	DeployedAt time.Time
	// RecordedAt (the recorder's clock) and RecordedBy are for operators.
	RecordedAt time.Time
	RecordedBy string
}

// DefaultGeneration is the id of the generation a subscription without a
// configured start records on a stream that has none: its tip start applies
// only to shards without a row.
const DefaultGeneration = "default"

// MaxSuperseded is how many superseded generation ids a record keeps.
const MaxSuperseded = 64

// Supersedes reports whether id is one of g's superseded generations.
func (g Generation) Supersedes(id string) bool { return slices.Contains(g.Superseded, id) }

// CheckpointOption adds what a checkpoint records beside its sequence
// number.
type CheckpointOption func(*checkpointOptions)

type checkpointOptions struct {
	millisBehind *int64
}

// WithMillisBehind records millis as how far behind the tip of its shard
// the reader was (Lease.MillisBehind, and LagAt), in the checkpoint's own
// conditional write. A negative lag is refused with ErrInvalid.
func WithMillisBehind(millis int64) CheckpointOption {
	return func(o *checkpointOptions) { o.millisBehind = &millis }
}

func applyCheckpoint(opts []CheckpointOption) checkpointOptions {
	var o checkpointOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// TakeOption adds conditions and attributes to a take.
type TakeOption func(*takeOptions)

type takeOptions struct {
	parents     []string
	family      string
	counter     int64
	ifCounter   bool
	unchanged   int64
	ifUnchanged bool
	incarnation int64
	fence       time.Duration
}

// RunSeparator joins a loop's owner id and the id of one of its runs in the
// owner a run writes ("<loop owner>/<run>"); see WithOwnerFamily.
const RunSeparator = "/"

// WithOwnerFamily lets a take also succeed when the row's owner is family
// itself with no fence: the loop's coordinator took it, or the loop's
// previous run ended and handed it back (Handover.To) with nothing left
// running. A loop takes each run's lease under a fresh run owner (family +
// RunSeparator + run id). A row still held by a run of the loop (one that
// did not hand back: it crashed, or a retried invocation overlaps it) or
// handed back with a fence is taken only as any taker takes it: once its
// counter stood still for as long as the row requires (IfCounter,
// Observer.ObserveAs). It does not apply to a revoked row of a shard with
// parents (see Lease.Revoked), and a take with it never has a free row: a
// loop's run that finds its row freed (the loop read it to its end, or gave
// it up, and a new start opened it again) leaves it to a coordinator, which
// checks the parents and the descendants still held under an older start.
func WithOwnerFamily(family string) TakeOption {
	return func(o *takeOptions) { o.family = family }
}

// IfCounter lets a take also succeed when the row's counter is still
// counter: the taker has seen it so for a full lease duration on its own
// clock (Observer), so its holder has stopped delivering whatever the skew
// between the two hosts' clocks.
func IfCounter(counter int64) TakeOption {
	return func(o *takeOptions) { o.counter, o.ifCounter = counter, true }
}

// Unchanged makes a take conditional on the row's counter being still
// counter (0: no row yet), whatever else allows it: a coordinator takes a
// shard only on the row its decision read, so a start another coordinator
// recorded in between (which bumps the counter, and may have re-opened the
// shard's parents) makes the take fail with ErrHeld, to be decided again.
func Unchanged(counter int64) TakeOption {
	return func(o *takeOptions) { o.unchanged, o.ifUnchanged = counter, true }
}

// WithFence records fence on the row as taken (Lease.Fence): how long
// invocations the taker may start could run past its deadline. Without it
// the take records none: a taker that has started nothing yet starts its
// first invocation only after a renewal recorded a fence.
func WithFence(fence time.Duration) TakeOption {
	return func(o *takeOptions) { o.fence = fence }
}

// WithIncarnation records the stream incarnation (Lease.Incarnation) on
// the row, and refuses (ErrHeld) a row of a later incarnation: a taker that
// described the stream before it was deleted and created again never lands
// on the new stream's row, free or held.
func WithIncarnation(created int64) TakeOption {
	return func(o *takeOptions) { o.incarnation = created }
}

// LoopOwner returns the loop owner of a run owner ("X/run" -> "X"), or owner
// itself.
func LoopOwner(owner string) string {
	loop, _, _ := strings.Cut(owner, RunSeparator)
	return loop
}

// InFamily reports whether owner is loop or one of its runs.
func InFamily(owner, loop string) bool {
	return loop != "" && (owner == loop || strings.HasPrefix(owner, loop+RunSeparator))
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
	// ErrNotFound: no row for this shard (or no generation record).
	ErrNotFound = errors.New("lease not found")
	// ErrWindowUnreadable: the row names a window that cannot be read
	// whole (a chunk item missing or undecodable). The window's state is
	// lost; a reader starts the window afresh, as Lambda's trigger does
	// when it loses a window's state.
	ErrWindowUnreadable = errors.New("window unreadable")
	// ErrChanged: a generation record refused because another writer changed
	// it since it was read.
	ErrChanged = errors.New("generation record changed since it was read")
	// ErrInvalid: bad input, reported before any request is sent.
	ErrInvalid = errors.New("invalid lease input")
	// ErrBehind: a checkpoint refused because the row's is already past
	// it (checkpoints only move forward within a start; ShardEnd is last).
	ErrBehind = errors.New("checkpoint behind the row's")
)

// ConflictError is a refused conditional write. It matches ErrHeld,
// ErrNotOwner, ErrBehind or ErrChanged with errors.Is. Current is the row as the store saw it when
// the store could tell without another read, else nil.
type ConflictError struct {
	Op      string // "take", "renew", "checkpoint", "pin", "release", "delete", "reset", "set start", "put generation", "leave"
	Key     string
	Owner   string // the caller's owner id
	Current *Lease
	Err     error // ErrHeld, ErrNotOwner, ErrBehind or ErrChanged
}

func (e *ConflictError) Error() string {
	msg := fmt.Sprintf("%s %s for %q: %v", e.Op, e.Key, e.Owner, e.Err)
	if e.Owner == "" {
		msg = fmt.Sprintf("%s %s: %v", e.Op, e.Key, e.Err)
	}
	if e.Current != nil && e.Current.Owner != "" {
		msg += fmt.Sprintf(" (owner %q, counter %d, expiry %s by its clock)", e.Current.Owner, e.Current.Counter, e.Current.Expiry.UTC().Format(time.RFC3339Nano))
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
	case strings.Contains(v, metaSeparator):
		return &InvalidError{Field: field, Value: v, Want: fmt.Sprintf("a name without %q", metaSeparator)}
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

func checkStart(stream, shardID string, st Start) error {
	if err := checkKey(stream, shardID); err != nil {
		return err
	}
	switch {
	case st.Position == "":
		return &InvalidError{Field: "start", Value: st.Position, Want: "a start position"}
	case st.Generation == "":
		return &InvalidError{Field: "generation", Value: st.Generation, Want: "a non-empty generation"}
	case st.Order < 1:
		return &InvalidError{Field: "generation order", Value: fmt.Sprint(st.Order), Want: "at least 1"}
	case st.Finished && st.ClearCheckpoint:
		return &InvalidError{Field: "start", Value: st.Position, Want: "Finished or ClearCheckpoint, not both"}
	case st.Keep && (!st.IfFrom || st.Finished || st.ClearCheckpoint || st.IfAbsent || st.IfUnread || st.Fresh):
		return &InvalidError{Field: "start", Value: st.Position, Want: "Keep with IfFrom alone, without Finished, ClearCheckpoint, IfAbsent, IfUnread or Fresh"}
	case st.IfFrom && (st.IfAbsent || st.Fresh):
		return &InvalidError{Field: "start", Value: st.Position, Want: "IfFrom over a row of the stream as it is: not with IfAbsent or Fresh"}
	case st.IfFrom && (st.From < 0 || st.From >= st.Order):
		return &InvalidError{Field: "from", Value: fmt.Sprint(st.From), Want: fmt.Sprintf("at least 0 and below the order %d", st.Order)}
	}
	return nil
}

func checkGeneration(stream string, g Generation, prevOrder int64) error {
	if err := checkName("stream", stream); err != nil {
		return err
	}
	switch {
	case g.ID == "":
		return &InvalidError{Field: "generation id", Value: g.ID, Want: "a non-empty id"}
	case g.Start == "":
		return &InvalidError{Field: "generation start", Value: g.Start, Want: "a start position"}
	case g.Order < 1 || prevOrder < 0 || g.Order < prevOrder:
		return &InvalidError{Field: "generation order", Value: fmt.Sprint(g.Order), Want: fmt.Sprintf("at least 1 and at least the stored order %d", prevOrder)}
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

// checkpointOrder is seq's place among a shard's checkpoints, as a string
// that compares like the numbers: sequence numbers by their value (their
// length in three digits, then their digits), ShardEnd after every one.
// Stores keep it beside the checkpoint and write a checkpoint only at or
// above it.
func checkpointOrder(seq string) string {
	if seq == ShardEnd {
		return "~"
	}
	digits := strings.TrimLeft(seq, "0")
	n := len(digits)
	if n > 999 {
		return fmt.Sprintf("%03d", n) + digits
	}
	// As above, without fmt: every checkpoint written computes it.
	b := make([]byte, 0, 3+n)
	b = append(b, byte('0'+n/100), byte('0'+n/10%10), byte('0'+n%10))
	return string(append(b, digits...))
}

func checkRenewal(rn Renewal) error {
	switch {
	case rn.Seq < 0:
		return &InvalidError{Field: "renewal seq", Value: fmt.Sprint(rn.Seq), Want: "0 (unnumbered) or more"}
	case rn.Fence < 0:
		return &InvalidError{Field: "fence", Value: rn.Fence.String(), Want: "a non-negative duration"}
	case rn.MillisBehind != nil && rn.Checkpoint == "":
		return &InvalidError{Field: "millis behind", Value: fmt.Sprint(*rn.MillisBehind), Want: "only with a checkpoint"}
	}
	if rn.Checkpoint != "" {
		if err := checkSeq(rn.Checkpoint); err != nil {
			return err
		}
	}
	if rn.MillisBehind != nil {
		if err := checkLag(*rn.MillisBehind); err != nil {
			return err
		}
	}
	return checkFailing(rn.Failing)
}

func checkFailing(f *string) error {
	if f != nil && len(*f) > MaxFailing {
		return &InvalidError{Field: "failing", Value: fmt.Sprintf("%d bytes", len(*f)), Want: fmt.Sprintf("at most %d bytes", MaxFailing)}
	}
	return nil
}

func checkHandover(ho Handover) error {
	switch {
	case ho.Fence < 0:
		return &InvalidError{Field: "fence", Value: ho.Fence.String(), Want: "a non-negative duration"}
	case strings.Contains(ho.To, RunSeparator):
		return &InvalidError{Field: "handover to", Value: ho.To, Want: "a loop owner, not a run (no " + RunSeparator + ")"}
	}
	return checkFailing(ho.Failing)
}
