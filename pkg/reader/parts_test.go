package reader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/shardloop/shardloop/internal/awsconf"
	"github.com/shardloop/shardloop/pkg/lease"
)

// Tests of the run's parts that need no emulator: the pacer, the ledger,
// the lanes' routing, the pipelining rule, the cursor's reopening and a
// lane's failure policy.

func TestPacer_KeepsFiveCallsInAnySecondCountedFromTheAnswers(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := newPacer(5, 1<<30)
	for i := range 5 {
		at := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		if d := p.delay(at); d != 0 {
			t.Fatalf("call %d: delay %s, want none within the first five", i+1, d)
		}
		p.done(at.Add(20*time.Millisecond), 0) // answered 20 ms later
	}
	// The sixth waits until a second after the first answer (t0+20ms).
	if d := p.delay(t0.Add(100 * time.Millisecond)); d != 920*time.Millisecond {
		t.Errorf("sixth call: delay %s, want 920ms", d)
	}
	if d := p.delay(t0.Add(1020 * time.Millisecond)); d != 0 {
		t.Errorf("a second after the first answer: delay %s, want none", d)
	}
}

func TestPacer_RepaysALargeReadAtTheByteRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const rate = 2 << 20
	p := newPacer(5, rate)
	p.done(t0, 10<<20) // a 10 MiB answer: 8 MiB in debt
	d := p.delay(t0)
	if want := 4 * time.Second; d < want || d > want+2*time.Millisecond {
		t.Errorf("after 10 MiB: delay %s, want 4s (the debt at 2 MiB/s)", d)
	}
	if d := p.delay(t0.Add(4*time.Second + 2*time.Millisecond)); d != 0 {
		t.Errorf("once repaid: delay %s", d)
	}
	var off pacer
	off.done(t0, 100<<20)
	if d := off.delay(t0); d != 0 {
		t.Errorf("the zero pacer waited %s", d)
	}
}

func TestLedger_CheckpointIsTheLastRecordWithEveryRecordBeforeItSettled(t *testing.T) {
	var l ledger
	for i := range 6 {
		l.add(entry{ckpt: fmt.Sprint(10 + i), records: 1, bytes: 100})
	}
	for _, tc := range []struct {
		settle int
		want   string // "" for no move
	}{
		{3, ""}, {1, ""}, {0, "11"}, {2, "13"}, {5, ""}, {4, "15"},
	} {
		l.settle(tc.settle)
		got, ok := l.advance()
		if (tc.want == "") == ok || got != tc.want {
			t.Fatalf("after settling %d: advance = %q, %v; want %q", tc.settle, got, ok, tc.want)
		}
	}
	if !l.empty() || l.records != 0 || l.bytes != 0 {
		t.Errorf("ledger %+v, want empty", l)
	}
	if i := l.add(entry{ckpt: "20", records: 3, settled: true}); i != 6 {
		t.Errorf("next index %d, want 6", i)
	}
	if got, ok := l.advance(); !ok || got != "20" {
		t.Errorf("a stretch with nothing to deliver: advance = %q, %v", got, ok)
	}
}

func TestLaneOf_IsStableSpreadsKeysAndIsZeroForOneLane(t *testing.T) {
	if laneOf("anything", 1) != 0 || laneOf("anything", 0) != 0 {
		t.Fatal("one lane: not lane 0")
	}
	counts := make([]int, 10)
	for i := range 10000 {
		k := fmt.Sprintf("user-%d", i)
		l := laneOf(k, 10)
		if l != laneOf(k, 10) {
			t.Fatal("not stable")
		}
		counts[l]++
	}
	for l, n := range counts {
		if n < 800 || n > 1200 {
			t.Errorf("lane %d got %d of 10,000 keys, want about 1,000", l, n)
		}
	}
	// The lane function is fixed across versions (a run goes on from
	// another's lanes), whoever writes the hash out.
	for _, k := range []string{"", "user-1", "ünïcode", "a longer partition key, as a producer may choose one"} {
		for _, factor := range []int{2, 4, 7, 10} {
			if laneOf(k, factor) != int(hashOf(k)%uint32(factor)) {
				t.Errorf("laneOf(%q, %d) is not the FNV-1a hash of the key modulo the factor", k, factor)
			}
		}
	}
}

func TestAhead_SettledUpToSettledToExceptAPendingLanesTail(t *testing.T) {
	k0, k1 := "", ""
	for i := 0; k0 == "" || k1 == ""; i++ {
		k := fmt.Sprint("k", i)
		switch laneOf(k, 2) {
		case 0:
			k0 = k
		case 1:
			k1 = k
		}
	}
	a := aheadOf(State{SettledTo: "50", Factor: 2, Lanes: []LaneState{{Pending: "30"}, {}}})
	for _, tc := range []struct {
		seq, key string
		want     bool
	}{
		{"29", k0, true}, {"30", k0, false}, {"45", k0, false}, {"45", k1, true}, {"50", k1, true}, {"51", k1, false},
	} {
		if got := a.settled(tc.seq, tc.key); got != tc.want {
			t.Errorf("settled(%s, lane %d) = %v, want %v", tc.seq, laneOf(tc.key, 2), got, tc.want)
		}
	}
	if aheadOf(State{SettledTo: "50", Factor: 3, Lanes: []LaneState{{}}}).settled("1", k0) {
		t.Error("lanes that do not match the factor were trusted")
	}
}

func TestReadGate_PipelinesABacklogButReadsAtTheTipOnlyForAnIdleLane(t *testing.T) {
	const budget = DefaultReadAheadBytes
	for _, tc := range []struct {
		name string
		g    readGate
		want bool
	}{
		{"first read", readGate{last: readNone, budget: budget}, true},
		{"backlog, lanes busy, nothing queued", readGate{last: readBacklog, limit: 100, starving: true, budget: budget}, true},
		{"backlog, a lane starving", readGate{last: readBacklog, limit: 2000, starving: true, queued: 1500, budget: budget}, true},
		{"backlog, no lane starving", readGate{last: readBacklog, limit: 2000, queued: 1500, budget: budget}, false},
		{"backlog, a read's worth queued", readGate{last: readBacklog, limit: 100, starving: true, queued: 100, budget: budget}, false},
		{"backlog, every lane retrying", readGate{last: readBacklog, limit: 100, queued: 0, budget: budget}, false},
		{"tip, every lane busy", readGate{last: readTip, limit: 100, starving: true, budget: budget}, false},
		{"tip, a lane idle", readGate{last: readTip, limit: 100, idleLane: true, budget: budget}, true},
		{"empty, every lane busy", readGate{last: readEmpty, starving: true, budget: budget}, false},
		{"empty, a lane idle", readGate{last: readEmpty, idleLane: true, budget: budget}, true},
		{"held at the bound", readGate{last: readBacklog, limit: 100, starving: true, heldRecords: MaxAheadRecords, budget: budget}, false},
		{"unsettled data at the budget", readGate{last: readEmpty, idleLane: true, heldBytes: budget, budget: budget}, false},
		{"backlog, unsettled data at the budget", readGate{last: readBacklog, limit: 100, starving: true, heldBytes: budget, budget: budget}, false},
	} {
		if got := tc.g.open(); got != tc.want {
			t.Errorf("%s: open = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A read is not a batch: it asks for as many records as five reads a
// second need to carry the shard's 2 MiB (1,000 to 10,000), and no more
// than fit in what is left of the read-ahead budget.
func TestReadSize_FeedsTheLanesWithinTheShardsLimitsAndTheBudget(t *testing.T) {
	const room = DefaultReadAheadBytes
	for _, c := range []struct {
		name       string
		avg        float64
		room       int
		catchingUp bool
		want       int
	}{
		{"nothing read yet", 0, room, false, MinReadLimit},
		{"100-byte records: 2 MiB a second in 5 reads", 107, room, false, 3920},
		{"1 KB records: at least 1,000", 1024, room, false, MinReadLimit},
		{"tiny records: at most 10,000", 10, room, false, MaxBatchSize},
		{"100 KB records: what fits in the budget", 100 << 10, room, false, 81},
		{"the budget used up: one", 1024, 0, false, 1},
		{"catching up: as many as a read gives", 107, room, true, MaxBatchSize},
		{"catching up within the budget", 1024, 1 << 20, true, 1024},
	} {
		if got := readSize(c.avg, c.room, c.catchingUp); got != c.want {
			t.Errorf("%s: readSize(%v, %d, %v) = %d, want %d", c.name, c.avg, c.room, c.catchingUp, got, c.want)
		}
	}
}

func TestCursor_ReopensAfterTheLastRecordReadNeverAtLatest(t *testing.T) {
	row := lease.Lease{Stream: "s", ShardID: "shardId-1"}
	for _, tc := range []struct {
		name string
		c    cursor
		want Opening
	}{
		{"after the last record read", cursor{lastRead: "9", after: "5", firstSeq: "3", row: row},
			Opening{Type: types.ShardIteratorTypeAfterSequenceNumber, Seq: "9"}},
		{"after the checkpoint", cursor{after: "5", firstSeq: "3", row: row},
			Opening{Type: types.ShardIteratorTypeAfterSequenceNumber, Seq: "5"}},
		{"at the first record read", cursor{firstSeq: "3", row: row},
			Opening{Type: types.ShardIteratorTypeAtSequenceNumber, Seq: "3"}},
		{"by the row: its start", cursor{row: lease.Lease{Stream: "s", ShardID: "shardId-1", Start: "horizon"}},
			Opening{Type: types.ShardIteratorTypeTrimHorizon}},
	} {
		got, err := tc.c.position()
		if err != nil || got.Type != tc.want.Type || got.Seq != tc.want.Seq {
			t.Errorf("%s: position = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

// expiring fails the n-th GetRecords with an expired iterator.
type expiring struct {
	KinesisAPI
	mu    sync.Mutex
	n, at int
	opens []types.ShardIteratorType
}

// DescribeStreamSummary passes on.
func (e *expiring) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	return e.KinesisAPI.DescribeStreamSummary(ctx, in, optFns...)
}

func (e *expiring) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, fns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	e.mu.Lock()
	e.n++
	n := e.n
	e.mu.Unlock()
	if n == e.at {
		return nil, &types.ExpiredIteratorException{Message: aws.String("Iterator expired")}
	}
	return e.KinesisAPI.GetRecords(ctx, in, fns...)
}

func (e *expiring) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, fns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	e.mu.Lock()
	e.opens = append(e.opens, in.ShardIteratorType)
	e.mu.Unlock()
	return e.KinesisAPI.GetShardIterator(ctx, in, fns...)
}

// TestRun_AnIteratorExpiringWhileReadingAheadSkipsAndRepeatsNothing: the
// cursor reads ahead of a slow lane; when its iterator expires it reopens
// after the last record it read, not after the checkpoint (behind the
// records in flight), so each record is delivered once, in order.
func TestRun_AnIteratorExpiringWhileReadingAheadSkipsAndRepeatsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		m.put(t, keys(5), 2500)
		m.close(t)
		k := &expiring{KinesisAPI: m.k, at: 2} // the read ahead of the first (reads ask for 1,000 and more)
		tgt := newKeyedTarget(t)
		tgt.took = func(Batch) time.Duration { return 300 * time.Millisecond }
		o := Options{Kinesis: k, Store: m.store, Target: tgt, Mapping: Mapping{BatchSize: 50}, RunLength: time.Minute}
		st := runLoop(t, o, m.state("A"), 5, nil)
		if st.Reason != ReasonShardEnd || len(tgt.seen) != 2500 || tgt.disorder != 0 {
			t.Fatalf("ended %q with %d records, %d out of order", st.Reason, len(tgt.seen), tgt.disorder)
		}
		for d, n := range tgt.seen {
			if n != 1 {
				t.Fatalf("%s delivered %d times", d, n)
			}
		}
		if !slices.Equal(k.opens, []types.ShardIteratorType{types.ShardIteratorTypeTrimHorizon, types.ShardIteratorTypeAfterSequenceNumber}) {
			t.Errorf("opened with %v", k.opens)
		}
	})
}

// TestLane_BisectionDeliversHalvesFromAQueueOfWork follows the failure
// policy's queue: a batch of 8 with a bad record at index 5, bisection on,
// one retry. The halves go first half first; only the bad record is
// retried and given up.
func TestLane_BisectionDeliversHalvesFromAQueueOfWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		m.put(t, keys(1), 8)
		m.close(t)
		var mu sync.Mutex
		var spans []string
		bad := m.seqs[5]
		tgt := FuncTarget(func(_ context.Context, b Batch) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			first := slices.Index(m.seqs, aws.ToString(b.Records[0].SequenceNumber))
			spans = append(spans, fmt.Sprintf("%d-%d", first, first+len(b.Records)))
			for _, r := range b.Records {
				if aws.ToString(r.SequenceNumber) == bad {
					return 0, errors.New("function error")
				}
			}
			return len(b.Records), nil
		})
		var gave []string
		o := Options{Kinesis: m.k, Store: m.store, Target: tgt, Mapping: Mapping{
			BatchSize:                  8,
			BisectBatchOnFunctionError: true,
			MaximumRetryAttempts:       RetryAttempts(1),
			OnFailure: DestinationFunc(func(_ context.Context, fr FailureRecord) error {
				gave = append(gave, fr.KinesisBatchInfo.StartSequenceNumber)
				return nil
			}),
		}}
		if st := runLoop(t, o, m.state("A"), 5, nil); st.Reason != ReasonShardEnd {
			t.Fatalf("ended %q", st.Reason)
		}
		want := []string{"0-8", "0-4", "4-8", "4-6", "4-5", "5-6", "5-6", "6-8"}
		if !slices.Equal(spans, want) || !slices.Equal(gave, []string{bad}) {
			t.Errorf("deliveries %v, given up %v; want %v and the record at 5 alone", spans, gave, want)
		}
	})
}

// slowBigAnswers times out every GetRecords whose answer would be larger
// than max bytes, after the attempt timeout, as a client whose answer
// cannot arrive in time does (the SDK's operation error around awsconf's
// TimeoutError); smaller answers come at once. It records the limits asked.
type slowBigAnswers struct {
	KinesisAPI KinesisAPI
	max        int
	mu         sync.Mutex
	limits     []int32
}

// DescribeStreamSummary passes on.
func (s *slowBigAnswers) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	return s.KinesisAPI.DescribeStreamSummary(ctx, in, optFns...)
}

func (s *slowBigAnswers) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, fns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	s.mu.Lock()
	s.limits = append(s.limits, aws.ToInt32(in.Limit))
	s.mu.Unlock()
	out, err := s.KinesisAPI.GetRecords(ctx, in, fns...)
	if err != nil || size(out.Records) <= s.max {
		return out, err
	}
	after := awsconf.Kinesis.AttemptTimeout
	time.Sleep(after)
	return nil, &smithy.OperationError{ServiceID: "Kinesis", OperationName: "GetRecords",
		Err: &awsconf.TimeoutError{Service: "Kinesis", Operation: "GetRecords", Endpoint: "https://kinesis.local", After: after}}
}

func (s *slowBigAnswers) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return s.KinesisAPI.GetShardIterator(ctx, in, optFns...)
}

// A read whose answer is too big to arrive within the attempt timeout is
// tried again with a smaller Limit, not the same one: the run delivers the
// backlog rather than failing the same read until it gives up.
func TestRun_AReadThatTimesOutIsRetriedWithASmallerLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		data := strings.Repeat("x", 9<<10) // 9 KB records: 1,000 of them are a 9 MB answer
		var in []types.PutRecordsRequestEntry
		for i := range 1200 {
			in = append(in, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprint("k", i%10)), Data: []byte(data)})
			if len(in) == 100 {
				if _, err := m.k.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String(m.stream), Records: in}); err != nil {
					t.Fatal(err)
				}
				in = nil
			}
		}
		k := &slowBigAnswers{KinesisAPI: m.k, max: 3 << 20} // answers over 3 MB time out
		var delivered atomic.Int64
		tgt := FuncTarget(func(_ context.Context, b Batch) (int, error) {
			delivered.Add(int64(len(b.Records)))
			return len(b.Records), nil
		})
		st, err := Run(t.Context(), Options{Kinesis: k, Store: m.store, Target: tgt}, m.state("A")) // batches of 1,000
		if err != nil {
			t.Fatal(err)
		}
		k.mu.Lock()
		limits := slices.Clone(k.limits)
		k.mu.Unlock()
		t.Logf("limits asked: %v; ended %q with %d delivered", limits, st.Reason, delivered.Load())
		if st.Reason != ReasonContinue || delivered.Load() != 1200 {
			t.Fatalf("the run ended %q with %d of 1,200 records delivered, want it to go on with every record delivered", st.Reason, delivered.Load())
		}
		if len(limits) < 3 || limits[1] >= limits[0] || limits[2] >= limits[1] {
			t.Errorf("limits asked %v: want each read after a timeout to ask for fewer records", limits)
		}
	})
}
