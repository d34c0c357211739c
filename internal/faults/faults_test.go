package faults_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/faults"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
)

// fakeKinesis counts the GetRecords calls that reached it; it fakes
// nothing else.
type fakeKinesis struct {
	gets int
}

var errNotFaked = errors.New("fakeKinesis: not faked")

func (f *fakeKinesis) ListShards(context.Context, *kinesis.ListShardsInput, ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	return nil, errNotFaked
}

func (f *fakeKinesis) DescribeStreamSummary(context.Context, *kinesis.DescribeStreamSummaryInput, ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	return nil, errNotFaked
}

func (f *fakeKinesis) CreateStream(context.Context, *kinesis.CreateStreamInput, ...func(*kinesis.Options)) (*kinesis.CreateStreamOutput, error) {
	return nil, errNotFaked
}

func (f *fakeKinesis) GetShardIterator(context.Context, *kinesis.GetShardIteratorInput, ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return nil, errNotFaked
}

func (f *fakeKinesis) GetRecords(context.Context, *kinesis.GetRecordsInput, ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	f.gets++
	return &kinesis.GetRecordsOutput{NextShardIterator: aws.String("next")}, nil
}

func TestKinesis_InjectedErrorsAreTheSDKTypesAndMatchErrInjected(t *testing.T) {
	ctx := t.Context()
	cases := []struct {
		name  string
		rates faults.KinesisRates
		check func(error) bool
	}{
		{"throttle", faults.KinesisRates{Throttle: 1}, func(err error) bool {
			var e *types.ProvisionedThroughputExceededException
			return errors.As(err, &e)
		}},
		{"expired", faults.KinesisRates{Expired: 1}, func(err error) bool {
			var e *types.ExpiredIteratorException
			return errors.As(err, &e)
		}},
		{"other", faults.KinesisRates{Other: 1}, func(err error) bool {
			var e *types.InternalFailureException
			return errors.As(err, &e)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeKinesis{}
			k := &faults.Kinesis{API: f, Rates: c.rates, In: faults.NewInjector(1)}
			for range 20 {
				_, err := k.GetRecords(ctx, &kinesis.GetRecordsInput{})
				if !c.check(err) || !errors.Is(err, faults.ErrInjected) {
					t.Fatalf("GetRecords: got %v", err)
				}
			}
			if c.name != "other" && f.gets != 0 {
				t.Errorf("%d calls reached the client; a %s fault is injected before the call", f.gets, c.name)
			}
			if got := k.In.Total(); got != 20 {
				t.Errorf("Total = %d, want 20", got)
			}
		})
	}
}

func TestInjector_RatesAreRoughlyHonouredAndOffMeansOff(t *testing.T) {
	ctx := t.Context()
	f := &fakeKinesis{}
	in := faults.NewInjector(42)
	k := &faults.Kinesis{API: f, Rates: faults.KinesisRates{Throttle: 0.1, Expired: 0.1}, In: in}
	const n = 10000
	for range n {
		_, _ = k.GetRecords(ctx, &kinesis.GetRecordsInput{})
	}
	c := in.Counts()
	for _, kind := range []string{faults.KinesisThrottle, faults.KinesisExpired} {
		if c[kind] < n/20 || c[kind] > n*3/20 {
			t.Errorf("%s: %d of %d calls, want about 10%%", kind, c[kind], n)
		}
	}
	in.SetEnabled(false)
	before := in.Total()
	for range 100 {
		if _, err := k.GetRecords(ctx, &kinesis.GetRecordsInput{}); err != nil {
			t.Fatalf("injector off: %v", err)
		}
	}
	if in.Total() != before {
		t.Error("faults counted while the injector was off")
	}
}

func TestStore_AnswerLostMeansTheWriteHappened(t *testing.T) {
	ctx := t.Context()
	mem, err := lease.NewMemoryStore()
	if err != nil {
		t.Fatal(err)
	}
	s := &faults.Store{Store: mem, Rates: faults.StoreRates{After: 1}, In: faults.NewInjector(7)}
	_, takeErr := s.Take(ctx, "s", "shard-1", "a")
	if !errors.Is(takeErr, faults.ErrInjected) {
		t.Fatalf("Take: got %v, want an injected error", takeErr)
	}
	if errors.Is(takeErr, lease.ErrNotOwner) || errors.Is(takeErr, lease.ErrHeld) {
		t.Fatal("an injected failure must not look like a lost lease")
	}
	row, err := mem.Get(ctx, "s", "shard-1")
	if err != nil || row.Owner != "a" {
		t.Fatalf("row after a take whose answer was lost: %+v, %v; want owner a", row, err)
	}

	s.Rates = faults.StoreRates{Before: 1}
	if _, err := s.Checkpoint(ctx, "s", "shard-1", "a", "42"); !errors.Is(err, faults.ErrInjected) {
		t.Fatalf("Checkpoint: got %v", err)
	}
	if row, _ := mem.Get(ctx, "s", "shard-1"); row.Checkpoint != "" {
		t.Fatalf("checkpoint %q written although the failure was before the call", row.Checkpoint)
	}
	// Reads always go through.
	if _, err := s.Get(ctx, "s", "shard-1"); err != nil {
		t.Fatalf("Get: %v", err)
	}
}

func TestStore_SlowRenewSucceedsLateBeforeOrAfterTheWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, err := lease.NewMemoryStore()
		if err != nil {
			t.Fatal(err)
		}
		s := &faults.Store{Store: mem, Rates: faults.StoreRates{SlowRenew: 1, SlowMin: 2 * time.Second, SlowMax: 5 * time.Second}, In: faults.NewInjector(3)}
		if _, err := s.Take(t.Context(), "s", "shard-1", "a"); err != nil {
			t.Fatal(err)
		}
		for range 20 {
			began := time.Now()
			l, err := s.Renew(t.Context(), "s", "shard-1", "a", lease.Renewal{})
			if took := time.Since(began); err != nil || took < 2*time.Second || took > 5*time.Second {
				t.Fatalf("slow renew took %s, err %v; want 2 to 5 s and success", took, err)
			}
			if row, _ := mem.Get(t.Context(), "s", "shard-1"); row.Counter != l.Counter {
				t.Fatalf("counter %d on the row, %d returned", row.Counter, l.Counter)
			}
		}
		if n := s.In.Counts()[faults.StoreSlowRenew]; n != 20 {
			t.Fatalf("%d slow renewals counted, want 20", n)
		}
		// A caller that stops waiting gets its context's error.
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := s.Renew(ctx, "s", "shard-1", "a", lease.Renewal{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("renew bounded by 1 s: err = %v, want the deadline", err)
		}
	})
}

func TestTarget_PartialDeliversALeadingPartOnly(t *testing.T) {
	var got []int
	inner := reader.FuncTarget(func(_ context.Context, b reader.Batch) (int, error) {
		got = append(got, len(b.Records))
		return len(b.Records), nil
	})
	tg := &faults.Target{Target: inner, Rates: faults.TargetRates{Partial: 1}, In: faults.NewInjector(3)}
	b := reader.Batch{Records: make([]types.Record, 10)}
	for range 50 {
		n, err := tg.Deliver(t.Context(), b)
		if !errors.Is(err, faults.ErrInjected) || n >= 10 {
			t.Fatalf("Deliver = %d, %v; want fewer than 10 settled and an injected error", n, err)
		}
	}
	for _, n := range got {
		if n == 0 || n >= 10 {
			t.Fatalf("inner target got %d records, want a non-empty strict prefix", n)
		}
	}

	tg.Rates = faults.TargetRates{Fail: 1}
	calls := len(got)
	if n, err := tg.Deliver(t.Context(), b); n != 0 || !errors.Is(err, faults.ErrInjected) || len(got) != calls {
		t.Fatalf("Fail: %d, %v, inner called %d times; want 0, injected, not called", n, err, len(got)-calls)
	}
}

// Each kind with a rate above zero is injected at its first chance, however
// small its rate: a run's coverage of its kinds does not depend on how many
// calls it makes; a kind with rate zero never is.
func TestInjector_EveryKindWithARateIsInjectedAtItsFirstChance(t *testing.T) {
	ctx := t.Context()
	in := faults.NewInjector(7)
	k := &faults.Kinesis{API: &fakeKinesis{}, Rates: faults.KinesisRates{Throttle: 1e-9, Expired: 1e-9}, In: in}
	mem, err := lease.NewMemoryStore()
	if err != nil {
		t.Fatal(err)
	}
	s := &faults.Store{Store: mem, Rates: faults.StoreRates{SlowRenew: 1e-9, SlowMin: time.Millisecond, SlowMax: time.Millisecond}, In: in}
	for range 3 {
		_, _ = k.GetRecords(ctx, &kinesis.GetRecordsInput{})
	}
	if _, err := s.Take(ctx, "s", "shard-1", "o"); err != nil {
		t.Fatal(err)
	}
	_, _ = s.Renew(ctx, "s", "shard-1", "o", lease.Renewal{})
	c := in.Counts()
	for _, kind := range []string{faults.KinesisThrottle, faults.KinesisExpired, faults.StoreSlowRenew} {
		if c[kind] != 1 {
			t.Errorf("%s injected %d times in its first chances, want once: %v", kind, c[kind], c)
		}
	}
	if c[faults.KinesisOther] != 0 || c[faults.StoreBefore] != 0 {
		t.Errorf("kinds with rate zero injected: %v", c)
	}
}
