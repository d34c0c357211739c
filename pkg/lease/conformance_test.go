package lease_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/lease"
)

func TestMain(m *testing.M) { os.Exit(testaws.Main(m)) }

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock { return &fakeClock{now: time.UnixMilli(1_800_000_000_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// factory makes a fresh, empty store on the given clock.
type factory func(t *testing.T, clock func() time.Time) lease.Store

func memoryFactory(t *testing.T, clock func() time.Time) lease.Store {
	s, err := lease.NewMemoryStore(func(o *lease.Options) { o.Clock = clock })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func dynamoFactory(t *testing.T, clock func() time.Time) lease.Store {
	client := testaws.Dynamo(t)
	table := testaws.Name(t)
	if err := lease.CreateTable(t.Context(), client, table); err != nil {
		t.Fatal(err)
	}
	s, err := lease.NewDynamoStore(client, table, func(o *lease.Options) { o.Clock = clock })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var stores = []struct {
	name string
	make factory
}{
	{"memory", memoryFactory},
	{"dynamo", dynamoFactory},
}

// conformanceCase is one rule a store is held to. It gets the whole store:
// a case sets up rows through the other interfaces before it checks the
// one its suite is for.
type conformanceCase struct {
	name string
	run  func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock)
}

// runConformance runs cases against every store: one suite per interface
// of the store, each on MemoryStore and on DynamoStore.
func runConformance(t *testing.T, cases []conformanceCase) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					clock := newClock()
					c.run(t, t.Context(), st.make(t, clock.Now), clock)
				})
			}
		})
	}
}

func TestHolderStoreConformance(t *testing.T)      { runConformance(t, holderCases) }
func TestCoordinatorStoreConformance(t *testing.T) { runConformance(t, coordinatorCases) }
func TestHeartbeatStoreConformance(t *testing.T)   { runConformance(t, heartbeatCases) }
func TestAdminStoreConformance(t *testing.T)       { runConformance(t, adminCases) }

const stream = "orders"

// holderCases hold a store to HolderStore's rules: takes, renewals (with
// the checkpoint they carry), checkpoints, pins, releases and the read of
// one row.
var holderCases = []conformanceCase{
	{"TakeEmptyCreatesRow", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		l, err := s.Take(ctx, stream, "shardId-000000000000", "A", lease.WithParents("shardId-p"))
		must(t, err)
		if l.Owner != "A" || l.Counter != 1 || !l.Expiry.Equal(clock.Now().Add(lease.DefaultDuration)) {
			t.Fatalf("take = %+v, want owner A counter 1 expiry now+10s", l)
		}
		if len(l.ParentShardIDs) != 1 || l.ParentShardIDs[0] != "shardId-p" {
			t.Fatalf("parents = %v, want [shardId-p]", l.ParentShardIDs)
		}
		got, err := s.Get(ctx, stream, "shardId-000000000000")
		must(t, err)
		if got.Owner != "A" || got.Stream != stream || got.ShardID != "shardId-000000000000" || got.Checkpoint != "" {
			t.Fatalf("get after take = %+v", got)
		}
	}},
	{"TakeBySameOwnerSucceeds", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		clock.Advance(time.Second)
		l, err := s.Take(ctx, stream, "s1", "A")
		must(t, err)
		if l.Counter != 2 {
			t.Fatalf("counter = %d, want 2", l.Counter)
		}
	}},
	{"TakeHeldRowRefusedWhateverItsExpiry", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		// Long past the expiry A's clock wrote: a row that names an owner is
		// taken only by a taker that saw its counter stand still (IfCounter).
		clock.Advance(time.Hour)
		_, err := s.Take(ctx, stream, "s1", "B")
		if !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("take by B of A's row: err = %v, want ErrHeld", err)
		}
		var ce *lease.ConflictError
		if !errors.As(fmt.Errorf("wrapped: %w", err), &ce) || ce.Op != "take" || ce.Owner != "B" {
			t.Fatalf("err = %#v, want a *ConflictError for take by B", err)
		}
		got, _ := s.Get(ctx, stream, "s1")
		if got.Owner != "A" {
			t.Fatalf("owner after refused take = %q, want A", got.Owner)
		}
	}},
	{"TakeIfCounterSucceedsOnlyWhileTheCounterStandsStill", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		l, err := s.Take(ctx, stream, "s1", "A")
		must(t, err)
		seen := l.Counter
		noErr(t)(s.Renew(ctx, stream, "s1", "A", lease.Renewal{})) // A is alive after all
		if _, err := s.Take(ctx, stream, "s1", "B", lease.IfCounter(seen)); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("take with a counter A has moved past: err = %v, want ErrHeld", err)
		}
		got, _ := s.Get(ctx, stream, "s1")
		l, err = s.Take(ctx, stream, "s1", "B", lease.IfCounter(got.Counter))
		must(t, err)
		if l.Owner != "B" || l.Counter != got.Counter+1 {
			t.Fatalf("take of a lapsed lease = %+v, want owner B counter %d", l, got.Counter+1)
		}
		// A row that exists without a counter (SetStart made it) is taken
		// with IfCounter(0), and by anyone since it has no owner.
		_, err = s.SetStart(ctx, stream, "s2", lease.Start{Position: "horizon", Generation: "g", Order: 1})
		must(t, err)
		noErr(t)(s.Take(ctx, stream, "s2", "C", lease.IfCounter(0)))
	}},
	{"RenewOnlyByOwner", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		clock.Advance(3 * time.Second)
		l, err := s.Renew(ctx, stream, "s1", "A", lease.Renewal{})
		must(t, err)
		if !l.Expiry.Equal(clock.Now().Add(lease.DefaultDuration)) || l.Counter != 2 {
			t.Fatalf("renew = %+v, want expiry now+10s counter 2", l)
		}
		if _, err := s.Renew(ctx, stream, "s1", "B", lease.Renewal{}); !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("renew by B: err = %v, want ErrNotOwner", err)
		}
		if _, err := s.Renew(ctx, stream, "missing", "A", lease.Renewal{}); !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("renew of a missing row: err = %v, want ErrNotOwner", err)
		}
	}},
	{"RenewAfterTakeoverRefused", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		l, err := s.Take(ctx, stream, "s1", "A")
		must(t, err)
		noErr(t)(s.Take(ctx, stream, "s1", "B", lease.IfCounter(l.Counter)))
		if _, err := s.Renew(ctx, stream, "s1", "A", lease.Renewal{}); !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("renew by A after B took over: err = %v, want ErrNotOwner", err)
		}
		if _, err := s.Checkpoint(ctx, stream, "s1", "A", "5"); !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("checkpoint by A after B took over: err = %v, want ErrNotOwner", err)
		}
	}},
	{"CheckpointOnlyByOwner", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		l, err := s.Checkpoint(ctx, stream, "s1", "A", "49590338271490256608559692538361571095921575989136588898")
		must(t, err)
		if l.Checkpoint != "49590338271490256608559692538361571095921575989136588898" {
			t.Fatalf("checkpoint = %q", l.Checkpoint)
		}
		if _, err := s.Checkpoint(ctx, stream, "s1", "B", "7"); !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("checkpoint by B: err = %v, want ErrNotOwner", err)
		}
		l, err = s.Checkpoint(ctx, stream, "s1", "A", lease.ShardEnd)
		must(t, err)
		if !l.Finished() {
			t.Fatalf("after SHARD_END checkpoint Finished() = false")
		}
	}},
	{"ReleaseThenTakeByAnother", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		if err := s.Release(ctx, stream, "s1", "B", lease.Handover{}); !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("release by B: err = %v, want ErrNotOwner", err)
		}
		must(t, s.Release(ctx, stream, "s1", "A", lease.Handover{}))
		got, err := s.Get(ctx, stream, "s1")
		must(t, err)
		if got.Owner != "" || got.Held() {
			t.Fatalf("after release = %+v, want no owner", got)
		}
		l, err := s.Take(ctx, stream, "s1", "B")
		must(t, err)
		if l.Owner != "B" {
			t.Fatalf("take after release = %+v", l)
		}
		if err := s.Release(ctx, stream, "s1", "A", lease.Handover{}); !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("second release by A: err = %v, want ErrNotOwner", err)
		}
	}},
	{"CheckpointSurvivesOwnerChange", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		a, err := s.Take(ctx, stream, "s1", "A")
		must(t, err)
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "A", "100"))
		l, err := s.Take(ctx, stream, "s1", "B", lease.IfCounter(a.Counter))
		must(t, err)
		if l.Checkpoint != "100" {
			t.Fatalf("checkpoint after takeover = %q, want 100", l.Checkpoint)
		}
		must(t, s.Release(ctx, stream, "s1", "B", lease.Handover{}))
		got, _ := s.Get(ctx, stream, "s1")
		if got.Checkpoint != "100" {
			t.Fatalf("checkpoint after release = %q, want 100", got.Checkpoint)
		}
	}},
	{"CounterNeverGoesDown", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		var last int64
		check := func(l lease.Lease, err error) {
			t.Helper()
			must(t, err)
			if l.Counter <= last {
				t.Fatalf("counter went from %d to %d", last, l.Counter)
			}
			last = l.Counter
		}
		check(s.Take(ctx, stream, "s1", "A"))
		check(s.Renew(ctx, stream, "s1", "A", lease.Renewal{}))
		must(t, s.Release(ctx, stream, "s1", "A", lease.Handover{}))
		check(s.Take(ctx, stream, "s1", "B"))
		clock.Advance(time.Minute)
		check(s.Take(ctx, stream, "s1", "C", lease.IfCounter(last)))
		check(s.Renew(ctx, stream, "s1", "C", lease.Renewal{}))
		got, _ := s.Get(ctx, stream, "s1")
		if got.Counter != last {
			t.Fatalf("stored counter %d, last returned %d", got.Counter, last)
		}
	}},
	{"ReadAfterWriteSeesIt", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		for i := range 20 {
			seq := fmt.Sprint(1000 + i)
			if i == 0 {
				noErr(t)(s.Take(ctx, stream, "s1", "A"))
			}
			noErr(t)(s.Checkpoint(ctx, stream, "s1", "A", seq))
			got, err := s.Get(ctx, stream, "s1")
			must(t, err)
			if got.Checkpoint != seq {
				t.Fatalf("read after checkpoint %s saw %q", seq, got.Checkpoint)
			}
		}
	}},
	{"GetMissingIsNotFound", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		_, err := s.Get(ctx, stream, "nope")
		if !errors.Is(err, lease.ErrNotFound) {
			t.Fatalf("get missing: err = %v, want ErrNotFound", err)
		}
	}},
	{"RenewCarryingACheckpointIsOneWriteOfBothByTheOwnerOnly", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		_, err := s.SetStart(ctx, stream, "s1", lease.Start{Position: "horizon", Generation: "g", Order: 1})
		must(t, err)
		l, err := s.Take(ctx, stream, "s1", "A")
		must(t, err)
		clock.Advance(time.Second)
		lag := int64(250)
		got, err := s.Renew(ctx, stream, "s1", "A", lease.Renewal{Checkpoint: "77", MillisBehind: &lag})
		must(t, err)
		if got.Counter != l.Counter+1 || got.Checkpoint != "77" || !got.StartApplied || got.MillisBehind != 250 ||
			!got.LagAt.Equal(clock.Now()) || !got.Expiry.Equal(clock.Now().Add(lease.DefaultDuration)) {
			t.Fatalf("renew with checkpoint = %+v", got)
		}
		if _, err := s.Renew(ctx, stream, "s1", "B", lease.Renewal{Checkpoint: "78"}); !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("by B: err = %v, want ErrNotOwner", err)
		}
		_, err = s.SetStart(ctx, stream, "s1", lease.Start{Position: "horizon", Generation: "g", Order: 2})
		must(t, err)
		if _, err := s.Renew(ctx, stream, "s1", "A", lease.Renewal{Checkpoint: "79"}); !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("of a revoked lease: err = %v, want ErrNotOwner", err)
		}
		if row, _ := s.Get(ctx, stream, "s1"); row.Checkpoint != "77" {
			t.Fatalf("row %+v after refused writes, want checkpoint 77", row)
		}
	}},
	{"PinOnlyByTheOwnerKeepsTheGeneration", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		_, err := s.SetStart(ctx, stream, "s1", lease.Start{Position: "sequence:s0:1", Generation: "g1", Order: 1})
		must(t, err)
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		if _, err := s.Pin(ctx, stream, "s1", "B", "timestamp:100"); !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("pin by B: err = %v, want ErrNotOwner", err)
		}
		l, err := s.Pin(ctx, stream, "s1", "A", "timestamp:100")
		must(t, err)
		if l.Start != "timestamp:100" || l.StartApplied || l.Generation != "g1" || l.GenerationOrder != 1 || l.Owner != "A" {
			t.Fatalf("pin = %+v, want start pinned, pending, generation kept", l)
		}
	}},
	{"TakeWithIncarnationRecordsIt", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		l, err := s.Take(ctx, stream, "s1", "A", lease.WithIncarnation(1234))
		must(t, err)
		if l.Incarnation != 1234 {
			t.Fatalf("take with incarnation = %+v", l)
		}
		l, err = s.Take(ctx, stream, "s1", "A")
		must(t, err)
		if l.Incarnation != 1234 {
			t.Fatalf("a take without one kept %d, want 1234", l.Incarnation)
		}
	}},
	{"TakeInOwnerFamilyOnlyOfARowHandedBack", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "loop"))
		noErr(t)(s.Take(ctx, stream, "s1", "loop/r1", lease.WithOwnerFamily("loop")))
		// A run still holding the row (or one that crashed) is not taken
		// over by the loop's next run: a retried invocation waits like
		// any taker.
		if _, err := s.Take(ctx, stream, "s1", "loop/r2", lease.WithOwnerFamily("loop")); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("take of a row held by the previous run: err = %v, want ErrHeld", err)
		}
		must(t, s.Release(ctx, stream, "s1", "loop/r1", lease.Handover{To: "loop"}))
		if got, _ := s.Get(ctx, stream, "s1"); got.Owner != "loop" || got.Fence != 0 {
			t.Fatalf("row handed back = %+v, want owner loop and no fence", got)
		}
		if _, err := s.Take(ctx, stream, "s1", "loopy/r3", lease.WithOwnerFamily("loopy")); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("take by a family that only shares a prefix: err = %v, want ErrHeld", err)
		}
		if _, err := s.Take(ctx, stream, "s1", "other/r1", lease.WithOwnerFamily("other")); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("take by another loop: err = %v, want ErrHeld", err)
		}
		noErr(t)(s.Take(ctx, stream, "s1", "loop/r2", lease.WithOwnerFamily("loop")))
		if _, err := s.Renew(ctx, stream, "s1", "loop/r1", lease.Renewal{}); !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("renew by the previous run: err = %v, want ErrNotOwner", err)
		}
		// Handed back with invocations that may still run: the next run
		// waits the fence out (IfCounter) like any taker.
		must(t, s.Release(ctx, stream, "s1", "loop/r2", lease.Handover{To: "loop", Fence: 3 * time.Second}))
		got, _ := s.Get(ctx, stream, "s1")
		if got.Owner != "loop" || got.Fence != 3*time.Second {
			t.Fatalf("row handed back with a fence = %+v", got)
		}
		if _, err := s.Take(ctx, stream, "s1", "loop/r3", lease.WithOwnerFamily("loop")); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("take of a row handed back with a fence: err = %v, want ErrHeld", err)
		}
		l, err := s.Take(ctx, stream, "s1", "loop/r3", lease.WithOwnerFamily("loop"), lease.IfCounter(got.Counter))
		must(t, err)
		if l.Fence != 0 || l.Owner != "loop/r3" {
			t.Fatalf("take after the fence = %+v, want no fence recorded", l)
		}
		if got := lease.LoopOwner("loop/r2"); got != "loop" {
			t.Fatalf("LoopOwner = %q", got)
		}
	}},
	{"FenceIsRecordedAndWaitedOut", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		l, err := s.Take(ctx, stream, "s1", "A", lease.WithFence(2*time.Second))
		must(t, err)
		if l.Fence != 2*time.Second {
			t.Fatalf("take WithFence = %+v", l)
		}
		got, err := s.Renew(ctx, stream, "s1", "A", lease.Renewal{Fence: 5 * time.Second})
		must(t, err)
		if got.Fence != 5*time.Second || got.Counter != l.Counter+1 {
			t.Fatalf("renew with a fence = %+v", got)
		}
		got, err = s.Renew(ctx, stream, "s1", "A", lease.Renewal{})
		must(t, err)
		if got.Fence != 0 {
			t.Fatalf("renew with no fence = %+v", got)
		}
		// Released with a fence: nobody takes it at once; a taker that
		// watched the counter does.
		before := got.Counter
		must(t, s.Release(ctx, stream, "s1", "A", lease.Handover{Fence: 1500 * time.Millisecond}))
		got, _ = s.Get(ctx, stream, "s1")
		if got.Owner != "" || got.Fence != 1500*time.Millisecond || got.Counter != before+1 {
			t.Fatalf("released with a fence = %+v, want no owner, the fence and the counter bumped", got)
		}
		if _, err := s.Take(ctx, stream, "s1", "B"); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("take of a row released with a fence: err = %v, want ErrHeld", err)
		}
		noErr(t)(s.Take(ctx, stream, "s1", "B", lease.IfCounter(got.Counter)))
		// Released with none: free at once.
		must(t, s.Release(ctx, stream, "s1", "B", lease.Handover{}))
		noErr(t)(s.Take(ctx, stream, "s1", "C"))
	}},
	{"FailingOutlivesItsWriterUntilANewStart", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		str := func(v string) *string { return &v }
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		got, err := s.Renew(ctx, stream, "s1", "A", lease.Renewal{Failing: str("f1")})
		must(t, err)
		if got.Failing != "f1" {
			t.Fatalf("renewal carrying failing = %+v", got)
		}
		// A renewal without it leaves it; a checkpoint and a take keep it.
		noErr(t)(s.Renew(ctx, stream, "s1", "A", lease.Renewal{Checkpoint: "10"}))
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "A", "11"))
		must(t, s.Release(ctx, stream, "s1", "A", lease.Handover{}))
		got, err = s.Take(ctx, stream, "s1", "B")
		must(t, err)
		if got.Failing != "f1" {
			t.Fatalf("row taken by a new owner = %+v, want the failing its last holder wrote", got)
		}
		// A release carries it too; "" removes it.
		must(t, s.Release(ctx, stream, "s1", "B", lease.Handover{Failing: str("f2")}))
		if got, _ = s.Get(ctx, stream, "s1"); got.Failing != "f2" {
			t.Fatalf("released carrying failing = %+v", got)
		}
		noErr(t)(s.Take(ctx, stream, "s1", "C"))
		if got = mustLease(t)(s.Renew(ctx, stream, "s1", "C", lease.Renewal{Failing: str("")})); got.Failing != "" {
			t.Fatalf("renewal clearing failing = %+v", got)
		}
		// A new start, or a reset, removes it: its counts were of records
		// delivered before it.
		noErr(t)(s.Renew(ctx, stream, "s1", "C", lease.Renewal{Failing: str("f3")}))
		_, err = s.SetStart(ctx, stream, "s1", lease.Start{Position: "horizon", Generation: "g", Order: 1})
		must(t, err)
		if got, _ = s.Get(ctx, stream, "s1"); got.Failing != "" {
			t.Fatalf("row after a new start = %+v, want no failing", got)
		}
		noErr(t)(s.Take(ctx, stream, "s1", "D", lease.IfCounter(got.Counter)))
		noErr(t)(s.Renew(ctx, stream, "s1", "D", lease.Renewal{Failing: str("f4")}))
		noErr(t)(s.Reset(ctx, stream, "s1", "horizon", true))
		if got, _ = s.Get(ctx, stream, "s1"); got.Failing != "" {
			t.Fatalf("row after a reset = %+v, want no failing", got)
		}
		// Larger than MaxFailing: refused, naming the field.
		big := strings.Repeat("x", lease.MaxFailing+1)
		if _, err := s.Renew(ctx, stream, "s1", "D", lease.Renewal{Failing: &big}); !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("renewal with %d bytes of failing: err = %v, want ErrInvalid", len(big), err)
		}
	}},
	{"NumberedRenewalsLandOnlyOverLowerOnes", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		second, err := s.Renew(ctx, stream, "s1", "A", lease.Renewal{Seq: 2, Fence: 4 * time.Second})
		must(t, err)
		if second.WriteSeq != 2 {
			t.Fatalf("renewal 2 = %+v", second)
		}
		// Renewal 1 reaching the table late (its attempt timed out at the
		// client) does not land over 2: the fence 2 recorded stays.
		noErr(t)(s.Renew(ctx, stream, "s1", "A", lease.Renewal{Seq: 1, Checkpoint: "10"}))
		// Renewal 2 again (the SDK retried an attempt that had landed):
		// it succeeds, written once.
		again, err := s.Renew(ctx, stream, "s1", "A", lease.Renewal{Seq: 2, Fence: 4 * time.Second})
		must(t, err)
		if again.Counter != second.Counter {
			t.Fatalf("renewal 2 again bumped the counter to %d from %d", again.Counter, second.Counter)
		}
		if got, _ := s.Get(ctx, stream, "s1"); got.Counter != second.Counter || got.Fence != 4*time.Second || got.Checkpoint != "" {
			t.Fatalf("row = %+v after a late renewal 1 and a repeated 2, want renewal 2's", got)
		}
		// A new owner starts numbering afresh.
		must(t, s.Release(ctx, stream, "s1", "A", lease.Handover{}))
		l, err := s.Take(ctx, stream, "s1", "B")
		must(t, err)
		if l.WriteSeq != 0 {
			t.Fatalf("take kept the previous owner's renewal number: %+v", l)
		}
		noErr(t)(s.Renew(ctx, stream, "s1", "B", lease.Renewal{Seq: 1, Fence: time.Second}))
		if got, _ := s.Get(ctx, stream, "s1"); got.WriteSeq != 1 || got.Fence != time.Second {
			t.Fatalf("the new owner's renewal 1 = %+v", got)
		}
	}},
	{"CheckpointsOnlyMoveForwardAndShardEndIsLast", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "A", "100"))
		for _, write := range []struct {
			name string
			do   func() error
		}{
			{"checkpoint 99", func() error { _, err := s.Checkpoint(ctx, stream, "s1", "A", "99"); return err }},
			{"renewal carrying 98", func() error {
				_, err := s.Renew(ctx, stream, "s1", "A", lease.Renewal{Seq: 7, Checkpoint: "98"})
				return err
			}},
			{"window at 97", func() error {
				return s.CheckpointWindow(ctx, stream, "s1", "A", lease.Window{Seq: "97", Start: time.UnixMilli(0), End: time.UnixMilli(1000), State: []byte("{}")})
			}},
		} {
			if err := write.do(); !errors.Is(err, lease.ErrBehind) {
				t.Fatalf("%s behind 100: err = %v, want ErrBehind", write.name, err)
			}
		}
		if got, _ := s.Get(ctx, stream, "s1"); got.Checkpoint != "100" || got.WriteSeq == 7 {
			t.Fatalf("row = %+v after writes behind it, want checkpoint 100 and no renewal landed", got)
		}
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "A", "100")) // the same again
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "A", "1000"))
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "A", lease.ShardEnd))
		if _, err := s.Checkpoint(ctx, stream, "s1", "A", "999999"); !errors.Is(err, lease.ErrBehind) {
			t.Fatalf("a checkpoint after SHARD_END: err = %v, want ErrBehind", err)
		}
		if _, err := s.Renew(ctx, stream, "s1", "A", lease.Renewal{Checkpoint: "1000"}); !errors.Is(err, lease.ErrBehind) {
			t.Fatalf("a renewal carrying a checkpoint after SHARD_END: err = %v, want ErrBehind", err)
		}
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "A", lease.ShardEnd))
		if got, _ := s.Get(ctx, stream, "s1"); !got.Finished() {
			t.Fatalf("row = %+v, want SHARD_END kept", got)
		}
		// A new start re-opens the shard: its checkpoints begin again
		// from wherever it starts.
		_, err := s.SetStart(ctx, stream, "s1", lease.Start{Position: "horizon", Generation: "g", Order: 1, ClearCheckpoint: true})
		must(t, err)
		must(t, s.Release(ctx, stream, "s1", "A", lease.Handover{}))
		noErr(t)(s.Take(ctx, stream, "s1", "B"))
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "B", "5"))
		// So does an operator's reset, and a start that keeps the
		// checkpoint (a sequence start behind it).
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "B", "50"))
		noErr(t)(s.Reset(ctx, stream, "s1", "horizon", true))
		must(t, s.Release(ctx, stream, "s1", "B", lease.Handover{}))
		noErr(t)(s.Take(ctx, stream, "s1", "C"))
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "C", "6"))
		_, err = s.SetStart(ctx, stream, "s1", lease.Start{Position: "sequence:s1:3", Generation: "g2", Order: 2})
		must(t, err)
		must(t, s.Release(ctx, stream, "s1", "C", lease.Handover{}))
		noErr(t)(s.Take(ctx, stream, "s1", "D"))
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "D", "4"))
	}},
	{"CheckpointWithMillisBehindRecordsLagUntilTheNext", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		got, _ := s.Get(ctx, stream, "s1")
		if !got.LagAt.IsZero() {
			t.Fatalf("fresh row has lag recorded at %v", got.LagAt)
		}
		l, err := s.Checkpoint(ctx, stream, "s1", "A", "10", lease.WithMillisBehind(1234))
		must(t, err)
		if l.Checkpoint != "10" || l.MillisBehind != 1234 || !l.LagAt.Equal(clock.Now()) || !l.StartApplied {
			t.Fatalf("checkpoint with lag = %+v", l)
		}
		clock.Advance(time.Second)
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "A", "11", lease.WithMillisBehind(0)))
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "A", "12"))
		got, err = s.Get(ctx, stream, "s1")
		must(t, err)
		if got.Checkpoint != "12" || got.MillisBehind != 0 || !got.LagAt.Equal(clock.Now()) {
			t.Fatalf("after lag 0 and a plain checkpoint = %+v, want lag 0 recorded at now", got)
		}
		if _, err := s.Checkpoint(ctx, stream, "s1", "B", "13", lease.WithMillisBehind(5)); !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("checkpoint with lag by B: err = %v, want ErrNotOwner", err)
		}
		if _, err := s.Checkpoint(ctx, stream, "s1", "A", "13", lease.WithMillisBehind(-1)); !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("checkpoint with a negative lag: err = %v, want ErrInvalid", err)
		}
	}},
	{"HolderWithLagWritesTheLagOfItsShard", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		lag := func(st, shard string) (int64, bool) { return 700, st == stream && shard == "s1" }
		for _, shard := range []string{"s1", "s2"} {
			h, _, err := lease.Hold(ctx, lease.HolderOptions{Store: s, Stream: stream, ShardID: shard, Owner: "A", Clock: clock.Now, Lag: lag})
			must(t, err)
			noErr(t)(h.Checkpoint(ctx, "1"))
			h.Close()
		}
		rows, err := s.List(ctx, stream)
		must(t, err)
		if len(rows) != 2 || rows[0].MillisBehind != 700 || rows[0].LagAt.IsZero() || !rows[1].LagAt.IsZero() {
			t.Fatalf("rows = %+v, want lag 700 on s1 only", rows)
		}
	}},
}

// coordinatorCases hold a store to CoordinatorStore's rules: reads of many
// rows, recorded starts, deletes, the generation record, and the takes a
// coordinator makes on what it read.
var coordinatorCases = []conformanceCase{
	{"StreamsWithSameShardIDStayIndependent", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		const shard = "shardId-000000000000"
		noErr(t)(s.Take(ctx, "orders", shard, "A"))
		noErr(t)(s.Take(ctx, "payments", shard, "B"))
		noErr(t)(s.Checkpoint(ctx, "orders", shard, "A", "1"))
		noErr(t)(s.Checkpoint(ctx, "payments", shard, "B", "2"))
		o, _ := s.Get(ctx, "orders", shard)
		p, _ := s.Get(ctx, "payments", shard)
		if o.Owner != "A" || o.Checkpoint != "1" || p.Owner != "B" || p.Checkpoint != "2" {
			t.Fatalf("orders = %+v, payments = %+v", o, p)
		}
		ls, err := s.List(ctx, "orders")
		must(t, err)
		if len(ls) != 1 || ls[0].Stream != "orders" {
			t.Fatalf("list orders = %+v, want the one orders row", ls)
		}
	}},
	{"BatchReadOf250Keys", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		var ids []string
		for i := range 250 {
			ids = append(ids, fmt.Sprintf("shardId-%012d", i))
		}
		for i, id := range ids {
			if i%2 == 0 { // every other shard has a row
				noErr(t)(s.Take(ctx, stream, id, fmt.Sprint("owner-", i)))
			}
		}
		got, err := s.GetMany(ctx, stream, append(ids, "shardId-missing"))
		must(t, err)
		if len(got) != 125 {
			t.Fatalf("GetMany returned %d rows, want 125", len(got))
		}
		for i, id := range ids {
			l, ok := got[id]
			if ok != (i%2 == 0) || (ok && l.Owner != fmt.Sprint("owner-", i)) {
				t.Fatalf("GetMany[%s] = %+v, %v", id, l, ok)
			}
		}
		all, err := s.List(ctx, stream)
		must(t, err)
		if len(all) != 125 || all[0].ShardID != ids[0] {
			t.Fatalf("List returned %d rows starting %v, want 125 sorted", len(all), all[0].ShardID)
		}
	}},
	{"SetStartOncePerGenerationOrder", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		g1 := lease.Start{Position: "horizon", Generation: "g1", Order: 1, Incarnation: 77}
		ok, err := s.SetStart(ctx, stream, "s1", g1)
		must(t, err)
		if !ok {
			t.Fatal("first SetStart of g1 reported no change")
		}
		if ok, _ := s.SetStart(ctx, stream, "s1", g1); ok {
			t.Fatal("second SetStart of g1 reported a change")
		}
		l, err := s.Take(ctx, stream, "s1", "A")
		must(t, err)
		if l.Start != "horizon" || l.Generation != "g1" || l.GenerationOrder != 1 || l.StartApplied || l.Incarnation != 77 {
			t.Fatalf("after SetStart and take = %+v", l)
		}
		l, err = s.Checkpoint(ctx, stream, "s1", "A", "9")
		must(t, err)
		if !l.StartApplied {
			t.Fatal("checkpoint did not mark the start applied")
		}
		ok, err = s.SetStart(ctx, stream, "s1", lease.Start{Position: "timestamp:5", Generation: "g2", Order: 2})
		must(t, err)
		got, _ := s.Get(ctx, stream, "s1")
		if !ok || got.Start != "timestamp:5" || got.Generation != "g2" || got.GenerationOrder != 2 || got.StartApplied || !got.Revoked || got.Owner != "A" || got.Checkpoint != "9" {
			t.Fatalf("after SetStart g2 = %+v (changed %v), want the start recorded, A's lease revoked, the checkpoint kept", got, ok)
		}
		if _, err := s.Renew(ctx, stream, "s1", "A", lease.Renewal{}); !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("renew by the g1 owner after SetStart g2: err = %v, want ErrNotOwner", err)
		}
		// An older generation never overwrites a newer one, whatever its id:
		// a coordinator still running the configuration of before a deploy.
		if ok, err := s.SetStart(ctx, stream, "s1", lease.Start{Position: "latest", Generation: "g1", Order: 1}); ok || err != nil {
			t.Fatalf("SetStart of order 1 over order 2: changed %v, err %v", ok, err)
		}
		if got, _ := s.Get(ctx, stream, "s1"); got.Generation != "g2" || got.Start != "timestamp:5" {
			t.Fatalf("row after an older SetStart = %+v, want g2 kept", got)
		}
	}},
	{"SetStartKeepRaisesTheOrderOfTheRowAsRead", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		// A generation that keeps a row raises its order and nothing else:
		// the start, checkpoint, counter and holder stay.
		_, err := s.SetStart(ctx, stream, "s1", lease.Start{Position: "horizon", Generation: "g1", Order: 1, Incarnation: 77})
		must(t, err)
		_, err = s.Take(ctx, stream, "s1", "A")
		must(t, err)
		before, err := s.Checkpoint(ctx, stream, "s1", "A", "9")
		must(t, err)
		keep := lease.Start{Position: "sequence:s0:5", Generation: "g3", Order: 3, Incarnation: 77, Keep: true, IfFrom: true, From: 1}
		ok, err := s.SetStart(ctx, stream, "s1", keep)
		must(t, err)
		got, _ := s.Get(ctx, stream, "s1")
		if !ok || got.Generation != "g3" || got.GenerationOrder != 3 || got.Start != "horizon" || got.Checkpoint != "9" ||
			got.Counter != before.Counter || got.Owner != "A" || got.Revoked || got.Incarnation != 77 {
			t.Fatalf("after a keep = %+v (changed %v), want order 3 and the rest as it was (%+v)", got, ok, before)
		}
		if _, err := s.Renew(ctx, stream, "s1", "A", lease.Renewal{Checkpoint: "10"}); err != nil {
			t.Fatalf("renew by the holder after a keep: %v", err)
		}
		// An older generation's start now loses to it: a pass still
		// applying generation 2 after 3 kept the row.
		if ok, err := s.SetStart(ctx, stream, "s1", lease.Start{Position: "horizon", Generation: "g2", Order: 2, ClearCheckpoint: true}); ok || err != nil {
			t.Fatalf("SetStart of order 2 over a row kept at 3: changed %v, err %v", ok, err)
		}
		// A keep from an order the row no longer has is refused: the row
		// changed since it was read (generation 2's start landed first).
		_, err = s.SetStart(ctx, stream, "s2", lease.Start{Position: "horizon", Generation: "g2", Order: 2, ClearCheckpoint: true})
		must(t, err)
		if ok, err := s.SetStart(ctx, stream, "s2", lease.Start{Position: "x", Generation: "g3", Order: 3, Keep: true, IfFrom: true, From: 1}); ok || err != nil {
			t.Fatalf("a keep from order 1 over a row at 2: changed %v, err %v", ok, err)
		}
		if got, _ := s.Get(ctx, stream, "s2"); got.GenerationOrder != 2 || got.Start != "horizon" {
			t.Fatalf("row after a refused keep = %+v, want generation 2's start", got)
		}
		// No row: nothing to keep. A row of another incarnation: not kept.
		if ok, err := s.SetStart(ctx, stream, "none", lease.Start{Position: "x", Generation: "g3", Order: 3, Keep: true, IfFrom: true}); ok || err != nil {
			t.Fatalf("a keep on no row: changed %v, err %v", ok, err)
		}
		if _, err := s.Get(ctx, stream, "none"); !errors.Is(err, lease.ErrNotFound) {
			t.Fatalf("a keep on no row made one: %v", err)
		}
		if ok, err := s.SetStart(ctx, stream, "s1", lease.Start{Position: "x", Generation: "g4", Order: 4, Incarnation: 78, Keep: true, IfFrom: true, From: 3}); ok || err != nil {
			t.Fatalf("a keep for another incarnation: changed %v, err %v", ok, err)
		}
		// A keep is a keep alone, from below its own order.
		for _, bad := range []lease.Start{
			{Position: "x", Generation: "g3", Order: 3, Keep: true, IfFrom: true, From: 3},
			{Position: "x", Generation: "g3", Order: 3, Keep: true},
			{Position: "x", Generation: "g3", Order: 3, Keep: true, IfFrom: true, ClearCheckpoint: true},
			{Position: "x", Generation: "g3", Order: 3, IfFrom: true, IfAbsent: true},
		} {
			var inv *lease.InvalidError
			if _, err := s.SetStart(ctx, stream, "s1", bad); !errors.As(err, &inv) {
				t.Fatalf("SetStart(%+v): err = %v, want an InvalidError", bad, err)
			}
		}
	}},
	{"SetStartIfFromOnlyOverTheRowAsRead", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		// A start sent over the row a pass read lands only while the row's
		// order is what the pass read: read to its end at order 1, the row
		// re-opened at order 2 since, a start of 3 that keeps the
		// checkpoint is refused.
		_, err := s.SetStart(ctx, stream, "s1", lease.Start{Position: "horizon", Generation: "g1", Order: 1})
		must(t, err)
		_, err = s.Take(ctx, stream, "s1", "A")
		must(t, err)
		_, err = s.Checkpoint(ctx, stream, "s1", "A", lease.ShardEnd)
		must(t, err)
		seq := lease.Start{Position: "sequence:s1:5", Generation: "g3", Order: 3, IfFrom: true, From: 1}
		_, err = s.SetStart(ctx, stream, "s1", lease.Start{Position: "horizon", Generation: "g2", Order: 2, ClearCheckpoint: true})
		must(t, err)
		if ok, err := s.SetStart(ctx, stream, "s1", seq); ok || err != nil {
			t.Fatalf("a start from order 1 over a row at 2: changed %v, err %v", ok, err)
		}
		if got, _ := s.Get(ctx, stream, "s1"); got.GenerationOrder != 2 || got.Start != "horizon" {
			t.Fatalf("row after a refused start = %+v, want generation 2's", got)
		}
		// From the order the row has, it lands as any start does.
		seq.From = 2
		if ok, err := s.SetStart(ctx, stream, "s1", seq); !ok || err != nil {
			t.Fatalf("a start from order 2 over a row at 2: changed %v, err %v", ok, err)
		}
		if got, _ := s.Get(ctx, stream, "s1"); got.GenerationOrder != 3 || got.Start != "sequence:s1:5" || !got.Revoked {
			t.Fatalf("row after the start = %+v, want generation 3's start, the holder revoked", got)
		}
		// No row: the pass read one, so nothing lands.
		if ok, err := s.SetStart(ctx, stream, "none", lease.Start{Position: "horizon", Generation: "g3", Order: 3, IfFrom: true}); ok || err != nil {
			t.Fatalf("a start from order 0 on no row: changed %v, err %v", ok, err)
		}
	}},
	{"SetStartIfUnreadOnlyOverARowWithoutACheckpoint", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		// A restart decided on a row nothing was read from: it lands on
		// no row, and on a row with no checkpoint, held or not (the holder
		// revoked).
		restart := lease.Start{Position: "horizon", Generation: "g2", Order: 2, IfUnread: true, ClearCheckpoint: true}
		if ok, err := s.SetStart(ctx, stream, "none", restart); !ok || err != nil {
			t.Fatalf("SetStart IfUnread on no row: changed %v, err %v", ok, err)
		}
		for _, id := range []string{"unread", "read", "ended"} {
			_, err := s.SetStart(ctx, stream, id, lease.Start{Position: "timestamp:5", Generation: "g1", Order: 1})
			must(t, err)
			_, err = s.Take(ctx, stream, id, "A")
			must(t, err)
		}
		_, err := s.Checkpoint(ctx, stream, "read", "A", "9")
		must(t, err)
		_, err = s.Checkpoint(ctx, stream, "ended", "A", lease.ShardEnd)
		must(t, err)
		must(t, s.Release(ctx, stream, "ended", "A", lease.Handover{}))
		ok, err := s.SetStart(ctx, stream, "unread", restart)
		must(t, err)
		if got, _ := s.Get(ctx, stream, "unread"); !ok || got.Start != "horizon" || got.GenerationOrder != 2 || !got.Revoked {
			t.Fatalf("SetStart IfUnread on a held row with no checkpoint = %+v (changed %v), want the start recorded and A revoked", got, ok)
		}
		// Once something was read (SHARD_END included), it is refused and
		// the row is kept as it is.
		for id, want := range map[string]string{"read": "9", "ended": lease.ShardEnd} {
			ok, err := s.SetStart(ctx, stream, id, restart)
			must(t, err)
			if got, _ := s.Get(ctx, stream, id); ok || got.Checkpoint != want || got.GenerationOrder != 1 || got.Start != "timestamp:5" || got.Revoked {
				t.Fatalf("SetStart IfUnread over checkpoint %s = %+v (changed %v), want the row unchanged", want, got, ok)
			}
		}
		// Without IfUnread the same start re-opens the shard read to its end.
		restart.IfUnread = false
		if ok, err := s.SetStart(ctx, stream, "ended", restart); !ok || err != nil {
			t.Fatalf("SetStart over SHARD_END: changed %v, err %v", ok, err)
		}
		if got, _ := s.Get(ctx, stream, "ended"); got.Checkpoint != "" || got.GenerationOrder != 2 {
			t.Fatalf("after SetStart over SHARD_END = %+v, want it re-opened", got)
		}
	}},
	{"SetStartFinishedClearCheckpointAndIfAbsent", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		// A closed shard at a tip generation: recorded read to its end.
		_, err := s.SetStart(ctx, stream, "closed", lease.Start{Position: "timestamp:1", Generation: "g1", Order: 1, Finished: true})
		must(t, err)
		if got, _ := s.Get(ctx, stream, "closed"); !got.Finished() || !got.StartApplied {
			t.Fatalf("finished start = %+v, want SHARD_END", got)
		}
		// A horizon generation reads it again.
		_, err = s.SetStart(ctx, stream, "closed", lease.Start{Position: "horizon", Generation: "g2", Order: 2, ClearCheckpoint: true})
		must(t, err)
		if got, _ := s.Get(ctx, stream, "closed"); got.Checkpoint != "" || got.Start != "horizon" || got.StartApplied {
			t.Fatalf("start with ClearCheckpoint = %+v, want no checkpoint, horizon pending", got)
		}
		// IfAbsent never touches an existing row, even of an older order.
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "A", "42"))
		def := lease.Start{Position: "timestamp:9", Generation: lease.DefaultGeneration, Order: 3, IfAbsent: true}
		if ok, err := s.SetStart(ctx, stream, "s1", def); ok || err != nil {
			t.Fatalf("IfAbsent on an existing row: changed %v, err %v", ok, err)
		}
		if got, _ := s.Get(ctx, stream, "s1"); got.Owner != "A" || got.Checkpoint != "42" || got.Start != "" {
			t.Fatalf("row after IfAbsent = %+v, want it untouched", got)
		}
		if ok, err := s.SetStart(ctx, stream, "new", def); !ok || err != nil {
			t.Fatalf("IfAbsent on a missing row: changed %v, err %v", ok, err)
		}
		if got, _ := s.Get(ctx, stream, "new"); got.Start != "timestamp:9" || got.Generation != lease.DefaultGeneration {
			t.Fatalf("row made by IfAbsent = %+v", got)
		}
		if _, err := s.SetStart(ctx, stream, "x", lease.Start{Position: "horizon", Generation: "g"}); !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("SetStart without an order: err = %v, want ErrInvalid", err)
		}
	}},
	{"SetStartReplacesARowOfAnEarlierIncarnation", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		_, err := s.SetStart(ctx, stream, "s1", lease.Start{Position: "horizon", Generation: "g", Order: 5, Incarnation: 100})
		must(t, err)
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "A", lease.ShardEnd))
		// The stream was deleted and created again: even a lower order, even
		// IfAbsent, replaces the old incarnation's row.
		st := lease.Start{Position: "timestamp:9", Generation: lease.DefaultGeneration, Order: 1, Incarnation: 200, IfAbsent: true, Fresh: true}
		if ok, err := s.SetStart(ctx, stream, "s1", st); !ok || err != nil {
			t.Fatalf("SetStart over an earlier incarnation: changed %v, err %v", ok, err)
		}
		got, _ := s.Get(ctx, stream, "s1")
		if got.Incarnation != 200 || !got.Revoked || got.Start != "timestamp:9" || got.GenerationOrder != 1 || got.Checkpoint != "" || got.Finished() {
			t.Fatalf("row = %+v, want the new incarnation's start and no checkpoint", got)
		}
		if ok, _ := s.SetStart(ctx, stream, "s1", st); ok {
			t.Fatal("a second IfAbsent of the same incarnation changed the row")
		}
	}},
	{"SetStartOfAnEarlierIncarnationNeverLandsOnALaterOnesRow", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		// A coordinator still applying a generation of the deleted stream
		// (incarnation 100) writes its start after the stream was created
		// again (200) and its own generation reached the row: the row keeps
		// the new stream's start, whatever the orders (world 1171: the old
		// start made the row look stale, cleanup deleted it, and the loop
		// opened at the tip past records the new start owed).
		newer := lease.Start{Position: "timestamp:9", Generation: "g4", Order: 4, Incarnation: 200, Fresh: true}
		if ok, err := s.SetStart(ctx, stream, "s1", newer); !ok || err != nil {
			t.Fatalf("SetStart: changed %v, err %v", ok, err)
		}
		for _, old := range []lease.Start{
			{Position: "timestamp:5", Generation: "g3", Order: 3, Incarnation: 100, ClearCheckpoint: true},
			{Position: "timestamp:5", Generation: "g5", Order: 5, Incarnation: 100},
		} {
			if ok, err := s.SetStart(ctx, stream, "s1", old); ok || err != nil {
				t.Fatalf("start of an earlier incarnation %+v: changed %v, err %v; want unchanged", old, ok, err)
			}
		}
		// Nor on a row the new stream's loop made without a start.
		noErr(t)(s.Take(ctx, stream, "s2", "A", lease.WithIncarnation(200)))
		if ok, err := s.SetStart(ctx, stream, "s2", lease.Start{Position: "horizon", Generation: "g3", Order: 3, Incarnation: 100}); ok || err != nil {
			t.Fatalf("start of an earlier incarnation on a taken row: changed %v, err %v; want unchanged", ok, err)
		}
		for _, id := range []string{"s1", "s2"} {
			if got, _ := s.Get(ctx, stream, id); got.Incarnation != 200 || got.Generation == "g3" || got.Generation == "g5" {
				t.Fatalf("row %s = %+v, want the later incarnation's", id, got)
			}
		}
	}},
	{"TakeOfAnEarlierIncarnationNeverLandsOnALaterOnesRow", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		// A coordinator that described the deleted stream (incarnation 100)
		// takes a row the stream created again (200) has written meanwhile:
		// the take is refused, free row or not, and the row keeps its
		// incarnation. A take of the same or a later incarnation, or of a
		// row that names none, goes through.
		noErr(t)(s.Take(ctx, stream, "s1", "A", lease.WithIncarnation(200)))
		must(t, s.Release(ctx, stream, "s1", "A", lease.Handover{}))
		if _, err := s.Take(ctx, stream, "s1", "B", lease.WithIncarnation(100)); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("take of an earlier incarnation's free row: err = %v, want ErrHeld", err)
		}
		noErr(t)(s.Take(ctx, stream, "s2", "A", lease.WithIncarnation(200)))
		if _, err := s.Take(ctx, stream, "s2", "A", lease.WithIncarnation(100)); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("take back by its holder under an earlier incarnation: err = %v, want ErrHeld", err)
		}
		for _, id := range []string{"s1", "s2"} {
			if got, _ := s.Get(ctx, stream, id); got.Incarnation != 200 || got.Owner == "B" {
				t.Fatalf("row %s = %+v, want the later incarnation's, not taken by B", id, got)
			}
		}
		noErr(t)(s.Take(ctx, stream, "s1", "B", lease.WithIncarnation(200)))
		noErr(t)(s.Take(ctx, stream, "s3", "B"))
		if got, err := s.Take(ctx, stream, "s3", "B", lease.WithIncarnation(300)); err != nil || got.Incarnation != 300 {
			t.Fatalf("take of a later incarnation: row = %+v, err %v; want incarnation 300", got, err)
		}
	}},
	{"RevokedLeaseIsTakenOnlyByItsLoopOrOnceItLapsed", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		for _, shard := range []string{"s1", "s2"} {
			noErr(t)(s.Take(ctx, stream, shard, "loop/r1"))
			_, err := s.SetStart(ctx, stream, shard, lease.Start{Position: "horizon", Generation: "g", Order: 1})
			must(t, err)
			if _, err := s.Checkpoint(ctx, stream, shard, "loop/r1", "5"); !errors.Is(err, lease.ErrNotOwner) {
				t.Fatalf("checkpoint of a revoked lease: err = %v, want ErrNotOwner", err)
			}
			if _, err := s.Pin(ctx, stream, shard, "loop/r1", "timestamp:1"); !errors.Is(err, lease.ErrNotOwner) {
				t.Fatalf("pin of a revoked lease: err = %v, want ErrNotOwner", err)
			}
			// Until a taker has watched it lapse, nobody else may take it:
			// its holder may still be delivering until its next renewal.
			if _, err := s.Take(ctx, stream, shard, "other"); !errors.Is(err, lease.ErrHeld) {
				t.Fatalf("take of a revoked lease: err = %v, want ErrHeld", err)
			}
		}
		// The loop's next run does not take it while the run holding it
		// may still be delivering; once that run handed it back (its end),
		// it takes it at once, and may write again.
		if _, err := s.Take(ctx, stream, "s1", "loop/r2", lease.WithOwnerFamily("loop")); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("take by the loop's next run while the revoked run holds it: err = %v, want ErrHeld", err)
		}
		must(t, s.Release(ctx, stream, "s1", "loop/r1", lease.Handover{To: "loop"}))
		l, err := s.Take(ctx, stream, "s1", "loop/r2", lease.WithOwnerFamily("loop"))
		must(t, err)
		if l.Revoked {
			t.Fatalf("take by the loop's next run = %+v, want it no longer revoked", l)
		}
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "loop/r2", "6"))
		// Another owner takes it once its counter stood still.
		got, _ := s.Get(ctx, stream, "s2")
		l, err = s.Take(ctx, stream, "s2", "other", lease.IfCounter(got.Counter))
		must(t, err)
		if l.Revoked || l.Owner != "other" {
			t.Fatalf("take of a lapsed revoked lease = %+v", l)
		}
		// A revoked lease may still be released.
		_, err = s.SetStart(ctx, stream, "s2", lease.Start{Position: "horizon", Generation: "g", Order: 2})
		must(t, err)
		must(t, s.Release(ctx, stream, "s2", "other", lease.Handover{}))
		if got, _ := s.Get(ctx, stream, "s2"); got.Owner != "" || got.Revoked {
			t.Fatalf("after release = %+v", got)
		}
	}},
	{"RecordedStartInvalidatesTheCounterSeen", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		// A coordinator that saw a row of an earlier incarnation released
		// must not delete it once another coordinator recorded the new
		// incarnation's start on it, nor take it over on what it saw.
		noErr(t)(s.Take(ctx, stream, "s1", "A", lease.WithIncarnation(100)))
		must(t, s.Release(ctx, stream, "s1", "A", lease.Handover{}))
		seen, _ := s.Get(ctx, stream, "s1")
		changed, err := s.SetStart(ctx, stream, "s1", lease.Start{Position: "horizon", Generation: "g", Order: 1, Incarnation: 200, Fresh: true})
		must(t, err)
		if !changed {
			t.Fatal("SetStart over a row of an earlier incarnation changed nothing")
		}
		if err := s.Delete(ctx, stream, "s1", seen.Counter, seen.Incarnation); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("delete with the counter seen before the start: err = %v, want ErrHeld", err)
		}
		if got, err := s.Get(ctx, stream, "s1"); err != nil || got.Start != "horizon" || got.Counter <= seen.Counter {
			t.Fatalf("row = %+v, %v, want the new start kept and a higher counter than %d", got, err, seen.Counter)
		}
		// Likewise a reset, and a take conditional on the old counter.
		noErr(t)(s.Take(ctx, stream, "s2", "A"))
		seen, _ = s.Get(ctx, stream, "s2")
		noErr(t)(s.Reset(ctx, stream, "s2", "horizon", true))
		if _, err := s.Take(ctx, stream, "s2", "B", lease.IfCounter(seen.Counter)); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("take with the counter seen before a reset: err = %v, want ErrHeld", err)
		}
	}},
	{"RevokedChildIsNotTakenBackByItsLoop", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		// A new start on a child may come with its parent opened again
		// (a horizon generation): the child's loop must not take it back
		// and read it before the parent; a coordinator takes it, once it
		// lapsed, after the parent is read to its end.
		noErr(t)(s.Take(ctx, stream, "child", "loop", lease.WithParents("parent")))
		noErr(t)(s.Take(ctx, stream, "child", "loop/r1", lease.WithOwnerFamily("loop")))
		_, err := s.SetStart(ctx, stream, "child", lease.Start{Position: "horizon", Generation: "g", Order: 1, ClearCheckpoint: true})
		must(t, err)
		if _, err := s.Take(ctx, stream, "child", "loop/r2", lease.WithOwnerFamily("loop")); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("take of a revoked child by its loop's next run: err = %v, want ErrHeld", err)
		}
		if _, err := s.Take(ctx, stream, "child", "loop/r1"); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("take of a revoked child by its holder: err = %v, want ErrHeld", err)
		}
		got, _ := s.Get(ctx, stream, "child")
		l, err := s.Take(ctx, stream, "child", "other", lease.IfCounter(got.Counter))
		must(t, err)
		if l.Revoked || l.Owner != "other" {
			t.Fatalf("take of the lapsed revoked child = %+v, want it taken and no longer revoked", l)
		}
		// Not revoked, the child's loop takes it back as before.
		noErr(t)(s.Take(ctx, stream, "child", "other/r1", lease.WithOwnerFamily("other")))
	}},
	{"FreeChildIsNotTakenByALoopsRun", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		// A child's loop read it to its end and released it; a new start
		// opened it (and may have opened its parent) again. A run of that
		// loop (a retried invocation of its last run) must not take the
		// free row and read the child before its parent: only a
		// coordinator, which checks the parents, takes a free child.
		readToItsEndAndReopened(ctx, t, s, "child", lease.WithParents("parent"))
		if _, err := s.Take(ctx, stream, "child", "loop/r2", lease.WithOwnerFamily("loop")); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("take of a free child by a run of a loop: err = %v, want ErrHeld", err)
		}
		l, err := s.Take(ctx, stream, "child", "coordinated", lease.WithParents("parent"))
		must(t, err)
		if l.Owner != "coordinated" {
			t.Fatalf("a coordinator's take of the free child = %+v", l)
		}
	}},
	{"FreeRootIsNotTakenByALoopsRun", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		// A shard without parents read to its end and released, then
		// opened again by a new start, may have descendants still held by
		// loops of the older generation. A retried invocation of the
		// loop's last run must not take the free row and replay it beside
		// them (the simulator's world 7,001,068): only a coordinator,
		// which checks the descendants, takes a free row.
		readToItsEndAndReopened(ctx, t, s, "root")
		if _, err := s.Take(ctx, stream, "root", "loop/r2", lease.WithOwnerFamily("loop")); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("take of a free root by a run of a loop: err = %v, want ErrHeld", err)
		}
		l, err := s.Take(ctx, stream, "root", "coordinated")
		must(t, err)
		if l.Owner != "coordinated" {
			t.Fatalf("a coordinator's take of the free root = %+v", l)
		}
		// Handed back to its loop, it is the loop's run's to take.
		must(t, s.Release(ctx, stream, "root", "coordinated", lease.Handover{To: "coordinated"}))
		noErr(t)(s.Take(ctx, stream, "root", "coordinated/r1", lease.WithOwnerFamily("coordinated")))
		// A row that does not exist (deleted as stale) a loop's run takes
		// afresh; the reader then judges it by the loop's incarnation.
		noErr(t)(s.Take(ctx, stream, "absent", "loop/r1", lease.WithOwnerFamily("loop")))
	}},
	{"TakeUnchangedOnlyOnTheRowItRead", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		// A coordinator's take is conditional on the counter its decision
		// read: 0 for a shard without a row.
		noErr(t)(s.Take(ctx, stream, "s1", "A", lease.Unchanged(0)))
		if _, err := s.Take(ctx, stream, "s1", "B", lease.Unchanged(0)); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("take of a row that exists with Unchanged(0): err = %v, want ErrHeld", err)
		}
		must(t, s.Release(ctx, stream, "s1", "A", lease.Handover{}))
		seen, _ := s.Get(ctx, stream, "s1")
		_, err := s.SetStart(ctx, stream, "s1", lease.Start{Position: "horizon", Generation: "g", Order: 1, ClearCheckpoint: true})
		must(t, err)
		if _, err := s.Take(ctx, stream, "s1", "B", lease.Unchanged(seen.Counter)); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("take of a free row whose start changed since it was read: err = %v, want ErrHeld", err)
		}
		now, _ := s.Get(ctx, stream, "s1")
		l, err := s.Take(ctx, stream, "s1", "B", lease.Unchanged(now.Counter))
		must(t, err)
		if l.Owner != "B" || l.Start != "horizon" {
			t.Fatalf("take on the row as read = %+v", l)
		}
	}},
	{"GenerationRecordIsWrittenOnlyOverTheOrderRead", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		if _, err := s.GetGeneration(ctx, stream); !errors.Is(err, lease.ErrNotFound) {
			t.Fatalf("no record yet: err = %v, want ErrNotFound", err)
		}
		g1 := lease.Generation{ID: "ga", Start: "horizon", Configured: "horizon", Tip: "timestamp:9", Order: 1, Incarnation: 1700,
			Shards: []string{"s0", "s1"}, DeployedAt: clock.Now().Add(-time.Hour), RecordedAt: clock.Now(), RecordedBy: "coordinator-1"}
		must(t, s.PutGeneration(ctx, stream, g1, 0))
		if err := s.PutGeneration(ctx, stream, lease.Generation{ID: "gb", Start: "latest", Order: 1}, 0); !errors.Is(err, lease.ErrChanged) {
			t.Fatalf("a second first record: err = %v, want ErrChanged", err)
		}
		got, err := s.GetGeneration(ctx, stream)
		must(t, err)
		if got.ID != "ga" || got.Configured != "horizon" || got.Tip != "timestamp:9" || got.Order != 1 || got.Incarnation != 1700 || len(got.Shards) != 2 || got.Applied ||
			!got.RecordedAt.Equal(clock.Now()) || got.RecordedBy != "coordinator-1" || !got.DeployedAt.Equal(clock.Now().Add(-time.Hour)) {
			t.Fatalf("record = %+v, want g1 as written", got)
		}
		g1.Applied = true
		must(t, s.PutGeneration(ctx, stream, g1, 1))
		g2 := lease.Generation{ID: "gb", Start: "timestamp:5", Order: 2, Superseded: []string{"ga"}}
		must(t, s.PutGeneration(ctx, stream, g2, 1))
		if err := s.PutGeneration(ctx, stream, g1, 1); !errors.Is(err, lease.ErrChanged) {
			t.Fatalf("a write over a stale order: err = %v, want ErrChanged", err)
		}
		got, _ = s.GetGeneration(ctx, stream)
		if got.ID != "gb" || !got.Supersedes("ga") || got.Supersedes("gb") {
			t.Fatalf("record = %+v, want gb superseding ga", got)
		}
		// The record is not a shard row.
		noErr(t)(s.Take(ctx, stream, "s0", "A"))
		rows, err := s.List(ctx, stream)
		must(t, err)
		if len(rows) != 1 || rows[0].ShardID != "s0" {
			t.Fatalf("List = %+v, want the one shard row", rows)
		}
		if _, err := s.GetGeneration(ctx, "other"); !errors.Is(err, lease.ErrNotFound) {
			t.Fatalf("another stream's record: err = %v, want ErrNotFound", err)
		}
		if err := s.PutGeneration(ctx, stream, lease.Generation{ID: "", Start: "x", Order: 3}, 2); !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("a record without an id: err = %v, want ErrInvalid", err)
		}
	}},
	{"DeleteOnlyWithTheCounterSeen", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		l, err := s.Take(ctx, stream, "s1", "A")
		must(t, err)
		noErr(t)(s.Renew(ctx, stream, "s1", "A", lease.Renewal{}))
		if err := s.Delete(ctx, stream, "s1", l.Counter, 0); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("delete with a counter the holder moved past: err = %v, want ErrHeld", err)
		}
		must(t, s.Delete(ctx, stream, "s1", l.Counter+1, 0))
		if _, err := s.Get(ctx, stream, "s1"); !errors.Is(err, lease.ErrNotFound) {
			t.Fatalf("get after delete: err = %v, want ErrNotFound", err)
		}
		must(t, s.Delete(ctx, stream, "never-existed", 0, 0))
		// A row deleted and written again starts its counter again: a
		// delete decided on the old row (a stale incarnation's, landing
		// late) must not remove the new stream's row of the shard id.
		old, err := s.Take(ctx, stream, "s2", "A", lease.WithIncarnation(100))
		must(t, err)
		must(t, s.Delete(ctx, stream, "s2", old.Counter, 100))
		now, err := s.Take(ctx, stream, "s2", "B", lease.WithIncarnation(200))
		must(t, err)
		if now.Counter != old.Counter {
			t.Fatalf("setup: the row written again has counter %d, want %d as the deleted one had", now.Counter, old.Counter)
		}
		if err := s.Delete(ctx, stream, "s2", old.Counter, 100); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("a late delete of the earlier incarnation's row: err = %v, want ErrHeld", err)
		}
		if got, err := s.Get(ctx, stream, "s2"); err != nil || got.Owner != "B" {
			t.Fatalf("row after the late delete = %+v, %v; want B's row kept", got, err)
		}
	}},
}

// heartbeatCases hold a store to HeartbeatStore's rules.
var heartbeatCases = []conformanceCase{
	{"BeatCreatesAndBumpsTheRunnersRow", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		if hs, err := s.Runners(ctx, stream); err != nil || len(hs) != 0 {
			t.Fatalf("Runners of a stream nobody beat for = %+v, %v; want none", hs, err)
		}
		hb, err := s.Beat(ctx, stream, lease.Heartbeat{Runner: "host-b.1", Host: "host-b", PID: 42, Leases: 3, BeatAt: clock.Now()})
		must(t, err)
		if hb.Counter != 1 || hb.Leases != 3 || hb.Host != "host-b" || hb.PID != 42 || !hb.BeatAt.Equal(clock.Now()) {
			t.Fatalf("first beat = %+v, want counter 1 and the fields as given", hb)
		}
		clock.Advance(time.Second)
		hb, err = s.Beat(ctx, stream, lease.Heartbeat{Runner: "host-b.1", Host: "host-b", PID: 42, Leases: 0, BeatAt: clock.Now()})
		must(t, err)
		if hb.Counter != 2 || hb.Leases != 0 {
			t.Fatalf("second beat = %+v, want counter 2 and no leases", hb)
		}
		noErrHB(t)(s.Beat(ctx, stream, lease.Heartbeat{Runner: "a-runner", Leases: 1, BeatAt: clock.Now()}))
		noErrHB(t)(s.Beat(ctx, "other", lease.Heartbeat{Runner: "c", BeatAt: clock.Now()}))
		hs, err := s.Runners(ctx, stream)
		must(t, err)
		if len(hs) != 2 || hs[0].Runner != "a-runner" || hs[0].Counter != 1 || hs[1].Runner != "host-b.1" || hs[1].Counter != 2 ||
			!hs[1].BeatAt.Equal(clock.Now()) || hs[1].PID != 42 {
			t.Fatalf("Runners = %+v, want a-runner (counter 1) then host-b.1 (counter 2) of this stream only", hs)
		}
		// Heartbeat rows are not shard rows.
		noErr(t)(s.Take(ctx, stream, "s0", lease.RunnerOwner("s0-x", "a-runner")))
		rows, err := s.List(ctx, stream)
		must(t, err)
		if len(rows) != 1 || rows[0].ShardID != "s0" || lease.OwnerRunner(rows[0].Owner) != "a-runner" {
			t.Fatalf("List = %+v, want the one shard row, owned by a-runner", rows)
		}
		for _, bad := range []string{"", "has/slash", "has@at", "has#hash", "has:colon", strings.Repeat("x", lease.MaxRunnerID+1)} {
			if _, err := s.Beat(ctx, stream, lease.Heartbeat{Runner: bad}); !errors.Is(err, lease.ErrInvalid) {
				t.Fatalf("beat as %q: err = %v, want ErrInvalid", bad, err)
			}
		}
	}},
	{"LeaveOnlyWithTheCounterSeen", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		first, err := s.Beat(ctx, stream, lease.Heartbeat{Runner: "r1", BeatAt: clock.Now()})
		must(t, err)
		noErrHB(t)(s.Beat(ctx, stream, lease.Heartbeat{Runner: "r2", BeatAt: clock.Now()}))
		last, err := s.Beat(ctx, stream, lease.Heartbeat{Runner: "r1", BeatAt: clock.Now()})
		must(t, err)
		// A watcher that saw an older counter stand still is too late: the
		// runner beat since.
		if err := s.Leave(ctx, stream, "r1", first.Counter); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("leave with a counter the runner moved past: err = %v, want ErrHeld", err)
		}
		must(t, s.Leave(ctx, stream, "r1", last.Counter))
		hs, err := s.Runners(ctx, stream)
		must(t, err)
		if len(hs) != 1 || hs[0].Runner != "r2" {
			t.Fatalf("Runners after r1 left = %+v, want r2 only", hs)
		}
		must(t, s.Leave(ctx, stream, "r1", last.Counter)) // twice is fine
		must(t, s.Leave(ctx, stream, "never-beat", 0))
		// A runner removed while it was only slow comes back with its next beat.
		hb, err := s.Beat(ctx, stream, lease.Heartbeat{Runner: "r1", BeatAt: clock.Now()})
		must(t, err)
		if hb.Counter != 1 {
			t.Fatalf("beat after leaving = %+v, want a new row, counter 1", hb)
		}
		if hs, _ := s.Runners(ctx, stream); len(hs) != 2 {
			t.Fatalf("Runners after r1 came back = %+v, want r1 and r2", hs)
		}
	}},
}

// adminCases hold a store to AdminStore's rules: an operator's reset.
var adminCases = []conformanceCase{
	{"ResetRefusedWhileHeldUnlessForced", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		_, err := s.SetStart(ctx, stream, "s1", lease.Start{Position: "timestamp:1", Generation: "g1", Order: 1})
		must(t, err)
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "A", "100"))
		clock.Advance(time.Hour) // past A's expiry: only force resets a row with an owner
		_, err = s.Reset(ctx, stream, "s1", "horizon", false)
		if !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("unforced reset of a live lease: err = %v, want ErrHeld", err)
		}
		var ce *lease.ConflictError
		if !errors.As(err, &ce) || ce.Op != "reset" || ce.Current == nil || ce.Current.Owner != "A" {
			t.Fatalf("err = %#v, want a *ConflictError for reset naming owner A", err)
		}
		got, _ := s.Get(ctx, stream, "s1")
		if got.Owner != "A" || got.Start != "timestamp:1" || !got.StartApplied {
			t.Fatalf("row after a refused reset = %+v, want it unchanged", got)
		}
		l, err := s.Reset(ctx, stream, "s1", "horizon", true)
		must(t, err)
		if !l.Revoked || l.Start != "horizon" || l.StartApplied || l.Generation != "g1" || l.Checkpoint != "100" {
			t.Fatalf("forced reset = %+v, want A's lease revoked, start horizon not applied, generation g1 and checkpoint kept", l)
		}
		if _, err := s.Renew(ctx, stream, "s1", "A", lease.Renewal{}); !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("renew by the holder after a forced reset: err = %v, want ErrNotOwner", err)
		}
		if _, err := s.Checkpoint(ctx, stream, "s1", "A", "101"); !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("checkpoint by the holder after a forced reset: err = %v, want ErrNotOwner", err)
		}
		if ok, _ := s.SetStart(ctx, stream, "s1", lease.Start{Position: "latest", Generation: "g1", Order: 1}); ok {
			t.Fatal("SetStart of the same generation overwrote the reset")
		}
		got, _ = s.Get(ctx, stream, "s1")
		if got.Start != "horizon" || got.StartApplied {
			t.Fatalf("row after reset = %+v", got)
		}
		noErr(t)(s.Take(ctx, stream, "s1", "B", lease.IfCounter(got.Counter))) // once A's lease lapsed
		l, err = s.Checkpoint(ctx, stream, "s1", "B", "5")
		must(t, err)
		if !l.StartApplied {
			t.Fatal("the first checkpoint after a reset did not mark it applied")
		}
	}},
	{"ResetOfReleasedLeaseNeedsNoForce", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		must(t, s.Release(ctx, stream, "s1", "A", lease.Handover{}))
		l, err := s.Reset(ctx, stream, "s1", "latest", false)
		must(t, err)
		if l.Start != "latest" || l.StartApplied {
			t.Fatalf("reset of a released row = %+v", l)
		}
	}},
	{"ResetOfMissingRowIsNotFound", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		for _, force := range []bool{false, true} {
			_, err := s.Reset(ctx, stream, "nope", "horizon", force)
			if !errors.Is(err, lease.ErrNotFound) {
				t.Fatalf("reset (force %v) of a missing row: err = %v, want ErrNotFound", force, err)
			}
		}
		if _, err := s.Get(ctx, stream, "nope"); !errors.Is(err, lease.ErrNotFound) {
			t.Fatalf("reset created a row: get err = %v", err)
		}
		if _, err := s.Reset(ctx, stream, "s1", "", true); !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("reset to an empty position: err = %v, want ErrInvalid", err)
		}
	}},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// noErrHB fails the test when the returned error is not nil.
func noErrHB(t *testing.T) func(lease.Heartbeat, error) {
	return func(_ lease.Heartbeat, err error) {
		t.Helper()
		must(t, err)
	}
}

// noErr fails the test when the returned error is not nil.
func noErr(t *testing.T) func(lease.Lease, error) {
	return func(_ lease.Lease, err error) {
		t.Helper()
		must(t, err)
	}
}

func mustLease(t *testing.T) func(lease.Lease, error) lease.Lease {
	t.Helper()
	return func(l lease.Lease, err error) lease.Lease {
		t.Helper()
		must(t, err)
		return l
	}
}

// readToItsEndAndReopened takes shard for loop "loop" (with opts, as its
// coordinator does), lets the loop's run "loop/r1" read it to its end and
// release it to anyone, then records a horizon start that opens it again.
func readToItsEndAndReopened(ctx context.Context, t *testing.T, s lease.Store, shard string, opts ...lease.TakeOption) {
	t.Helper()
	noErr(t)(s.Take(ctx, stream, shard, "loop", opts...))
	noErr(t)(s.Take(ctx, stream, shard, "loop/r1", lease.WithOwnerFamily("loop")))
	_, err := s.Checkpoint(ctx, stream, shard, "loop/r1", lease.ShardEnd)
	must(t, err)
	must(t, s.Release(ctx, stream, shard, "loop/r1", lease.Handover{}))
	_, err = s.SetStart(ctx, stream, shard, lease.Start{Position: "horizon", Generation: "g", Order: 1, ClearCheckpoint: true})
	must(t, err)
}
