package reader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/shardloop/shardloop/pkg/lease"
)

func TestRun_OnFailure_PoisonRecordAfterTwoRetriesLandsInTheDestinationAndTheShardMovesOn(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqs", "sns"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, 1)
			seqs := e.putN(t, "a", 10)
			e.setStart(t, e.shards[0], "horizon")
			poison := seqs[3]
			var mu sync.Mutex
			var got []string
			calls := 0
			// A Lambda handler that fails on the poison record: with a
			// function error when the batch starts with it, else with
			// batchItemFailures naming it.
			lt := newLambdaTarget(t, handler(t, func(ev events.KinesisEvent) (*lambda.InvokeOutput, error) {
				mu.Lock()
				defer mu.Unlock()
				for i, r := range ev.Records {
					if r.Kinesis.SequenceNumber == poison {
						calls++
						if i == 0 {
							return ok(`{"errorMessage":"cannot parse record","errorType":"ParseError"}`), nil
						}
						return ok(fmt.Sprintf(`{"batchItemFailures":[{"itemIdentifier":%q}]}`, poison)), nil
					}
					got = append(got, string(r.Kinesis.Data))
				}
				return ok(`{}`), nil
			}))
			var arn, url string
			if kind == "sqs" {
				arn, url = newQueue(t)
			} else {
				arn, url = newTopic(t)
			}
			h := &gaveUp{}
			o := e.opts(lt)
			o.BatchSize, o.MaximumRetryAttempts, o.OnFailure, o.Hooks = 5, RetryAttempts(2), destination(t, arn), h
			st := runUntil(t, o, e.state(e.shards[0], "A"), func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(got) >= 8
			})

			mu.Lock()
			want := slices.Concat(values("a", 10)[:3], values("a", 10)[5:])
			if !slices.Equal(got, want) || calls != 3 {
				t.Errorf("delivered %v with %d deliveries of the poison; want %v and 3 (1 + 2 retries)", got, calls, want)
			}
			mu.Unlock()
			frs := received(t, url)
			if len(frs) != 1 {
				t.Fatalf("destination got %d records, want 1: %+v", len(frs), frs)
			}
			fr := frs[0]
			bi := fr.KinesisBatchInfo
			if bi.ShardID != e.shards[0] || bi.StartSequenceNumber != seqs[3] || bi.EndSequenceNumber != seqs[4] || bi.BatchSize != 2 {
				t.Errorf("batch info %+v, want shard %s, %s to %s, 2 records", bi, e.shards[0], seqs[3], seqs[4])
			}
			if bi.ApproximateArrivalOfFirstRecord == "" || bi.ApproximateArrivalOfLastRecord == "" {
				t.Errorf("batch info %+v lacks arrival times", bi)
			}
			rc := fr.RequestContext
			if rc.Condition != ConditionRetryAttemptsExhausted || rc.ApproximateInvokeCount != 3 || rc.FunctionARN != "target-fn" || rc.RequestID == "" {
				t.Errorf("request context %+v", rc)
			}
			if fr.ResponseContext != (FailureResponse{StatusCode: 200, ExecutedVersion: "$LATEST", FunctionError: "Unhandled"}) {
				t.Errorf("response context %+v", fr.ResponseContext)
			}
			if fr.Version != "1.0" || fr.Shardloop.Stream != e.stream || fr.Shardloop.Attempts != 3 || !strings.Contains(fr.Shardloop.Error, "cannot parse record") {
				t.Errorf("record %+v", fr)
			}
			if _, err := time.Parse(time.RFC3339, fr.Timestamp); err != nil {
				t.Errorf("timestamp %q: %v", fr.Timestamp, err)
			}
			if st.Checkpoint != seqs[9] || e.row(t, e.shards[0]).Checkpoint != seqs[9] {
				t.Errorf("checkpoint %s, want past every record (%s)", st.Checkpoint, seqs[9])
			}
			if g := h.all(); !slices.Equal(g, []string{"2 RetryAttemptsExhausted"}) || st.GivenUp != 2 {
				t.Errorf("BatchGivenUp %v, state givenUp %d", g, st.GivenUp)
			}
		})
	}
}

func TestRun_OnFailure_DestinationDownCheckpointsNothingUntilTheSendSucceeds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	seqs := e.putN(t, "a", 3)
	e.setStart(t, e.shards[0], "horizon")
	s := &sink{fail: func(b Batch) (int, error) { return 0, errors.New("always fails") }}
	var sends atomic.Int32
	var sent []FailureRecord
	up := make(chan struct{})
	dest := DestinationFunc(func(ctx context.Context, fr FailureRecord) error {
		sends.Add(1)
		select {
		case <-up:
			sent = append(sent, fr)
			return nil
		default:
			return errors.New("queue unreachable")
		}
	})
	spy := &spyStore{Store: e.store}
	o := e.opts(s)
	o.MaximumRetryAttempts, o.OnFailure, o.Store = RetryAttempts(0), dest, spy
	st := e.state(e.shards[0], "A")
	for sends.Load() < 4 {
		next, err := Run(t.Context(), o, st)
		if err != nil || !next.Continue {
			t.Fatalf("Run = %+v, %v", next, err)
		}
		st = next
	}
	for _, op := range spy.ops() {
		if strings.HasPrefix(op, "checkpoint") {
			t.Fatalf("%s while the destination refused the record", op)
		}
	}
	close(up)
	runUntil(t, o, st, func() bool { return len(sent) > 0 && e.checkpointed(t, e.shards[0], seqs[2]) })
	if row := e.row(t, e.shards[0]); row.Checkpoint != seqs[2] || len(sent) != 1 || sent[0].KinesisBatchInfo.BatchSize != 3 {
		t.Fatalf("checkpoint %s, sent %+v", row.Checkpoint, sent)
	}
}

func TestRun_OnFailure_NoDestinationLogsAtErrorLevelAndCallsBatchGivenUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	seqs := e.putN(t, "a", 4)
	e.setStart(t, e.shards[0], "horizon")
	s := &sink{fail: func(b Batch) (int, error) {
		if string(b.Records[0].Data) == "a-00001" {
			return 0, errors.New("bad record")
		}
		return 1, nil // one at a time
	}}
	logs := &logBuffer{}
	h := &gaveUp{}
	o := e.opts(s)
	o.MaximumRetryAttempts, o.Hooks = RetryAttempts(1), h
	o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	runUntil(t, o, e.state(e.shards[0], "A"), func() bool { return len(h.all()) > 0 })
	// Without bisect, a-00001 is given up with what follows it in its batch.
	if g := h.all(); len(g) != 1 || !strings.HasSuffix(g[0], " RetryAttemptsExhausted") {
		t.Fatalf("BatchGivenUp %v", g)
	}
	var found bool
	for _, l := range logs.lines(t, "ERROR") {
		if strings.Contains(l["msg"].(string), "given up") {
			found = true
			if l["stream"] != e.stream || l["shard_id"] != e.shards[0] || l["first_seq"] != seqs[1] || l["last_seq"] != seqs[3] ||
				l["records"] != float64(3) || l["attempts"] != float64(2) || !strings.Contains(fmt.Sprint(l["err"]), "bad record") {
				t.Errorf("give-up log %v", l)
			}
		}
	}
	if !found {
		t.Errorf("no error-level log of the given-up batch in %v", logs.lines(t, "ERROR"))
	}
	if got := s.data(); !slices.Equal(got, []string{"a-00000"}) {
		t.Errorf("delivered %v", got)
	}
}

func TestRun_RetryAttemptsUnlimitedBlocksTheShardKeepsTheLeaseAndLosesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	seqs := e.putN(t, "a", 6)
	e.setStart(t, e.shards[0], "horizon")
	var healed atomic.Bool
	var poisonCalls atomic.Int32
	s := &sink{fail: func(b Batch) (int, error) {
		for i, r := range b.Records {
			if string(r.Data) == "a-00002" && !healed.Load() {
				poisonCalls.Add(1)
				return i, errors.New("poison")
			}
		}
		return len(b.Records), nil
	}}
	var sends atomic.Int32
	o := e.opts(s)
	o.OnFailure = DestinationFunc(func(context.Context, FailureRecord) error { sends.Add(1); return nil })
	o.RunLength = 400 * time.Millisecond
	st := e.state(e.shards[0], "A")
	// Runs until the poison has failed many times over at least two runs:
	// a condition, not a number of short runs a slow machine fills with less.
	// A run that delivered nothing (a busy machine) makes the next longer.
	deadline := time.Now().Add(2 * time.Minute)
	for runs := 0; runs < 2 || poisonCalls.Load() < 10; runs++ {
		if time.Now().After(deadline) {
			t.Fatalf("%d runs, %d deliveries of the poison within two minutes", runs, poisonCalls.Load())
		}
		before := poisonCalls.Load()
		next, err := Run(t.Context(), o, st)
		if err != nil || !next.Continue {
			t.Fatalf("Run = %+v, %v", next, err)
		}
		st = next
		if row := e.row(t, e.shards[0]); lease.LoopOwner(row.Owner) != "A" || (row.Checkpoint != seqs[1] && row.Checkpoint != "") {
			t.Fatalf("row %+v: want owner A and the checkpoint no further than before the poison (%s)", row, seqs[1])
		}
		if poisonCalls.Load() == before {
			o.RunLength = min(2*o.RunLength, maxAdaptiveRun)
		}
	}
	if row := e.row(t, e.shards[0]); row.Checkpoint != seqs[1] {
		t.Fatalf("row %+v: want the checkpoint right before the poison (%s)", row, seqs[1])
	}
	if n := poisonCalls.Load(); n < 10 || st.FailingSeq != seqs[2] || st.FailedAttempts < int(n)-1 || !strings.Contains(st.FailedError, "poison") {
		t.Errorf("%d deliveries of the poison, state failing %s × %d: want many, carried across runs", n, st.FailingSeq, st.FailedAttempts)
	}
	healed.Store(true)
	st = runUntil(t, o, st, func() bool { return s.len() >= 6 })
	if got := s.data(); !slices.Equal(got, values("a", 6)) || sends.Load() != 0 || st.GivenUp != 0 {
		t.Errorf("delivered %v, %d on-failure sends, given up %d: want everything, none", got, sends.Load(), st.GivenUp)
	}
	if st.FailingSeq != "" || st.FailedAttempts != 0 || st.FailedError != "" {
		t.Errorf("state still carries failing %s × %d (%s)", st.FailingSeq, st.FailedAttempts, st.FailedError)
	}
}

func TestRun_Bisect_IsolatesOneBadRecordInABatchOf100(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	seqs := e.putN(t, "a", 100)
	e.setStart(t, e.shards[0], "horizon")
	bad := "a-00037"
	s, deliveries, _ := badRecordSink(bad)
	var sent []FailureRecord
	var mu sync.Mutex
	o := e.opts(s)
	o.BatchSize, o.BisectBatchOnFunctionError, o.MaximumRetryAttempts = 100, true, RetryAttempts(1)
	o.OnFailure = DestinationFunc(func(_ context.Context, fr FailureRecord) error {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, fr)
		return nil
	})
	o.RunLength = 3 * time.Second
	st := runUntil(t, o, e.state(e.shards[0], "A"), func() bool { return s.len() >= 99 && e.checkpointed(t, e.shards[0], seqs[99]) })
	want := slices.DeleteFunc(values("a", 100), func(v string) bool { return v == bad })
	if got := s.data(); !slices.Equal(got, want) {
		t.Fatalf("delivered %d records %v, want the 99 good ones in order", len(got), got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 1 || sent[0].KinesisBatchInfo.StartSequenceNumber != seqs[37] || sent[0].KinesisBatchInfo.EndSequenceNumber != seqs[37] ||
		sent[0].KinesisBatchInfo.BatchSize != 1 || sent[0].RequestContext.ApproximateInvokeCount != 2 {
		t.Fatalf("on-failure records %+v, want one for %s alone after 2 deliveries", sent, seqs[37])
	}
	if row := e.row(t, e.shards[0]); row.Checkpoint != seqs[99] {
		t.Errorf("checkpoint %s, want %s (state %+v)", row.Checkpoint, seqs[99], st)
	}
	t.Logf("%d deliveries to isolate one bad record in 100", deliveries.Load())
}

func TestRun_RecordAge_OlderRecordsAreGivenUpWithoutDelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	seqs := e.putN(t, "old", 5)
	e.setStart(t, e.shards[0], "horizon")
	clock := &offsetClock{}
	clock.set(2 * time.Minute) // the records are two minutes old
	s := &sink{}
	var sent []FailureRecord
	h := &gaveUp{}
	o := e.opts(s)
	o.Clock, o.MaximumRecordAge, o.Hooks = clock.now, time.Minute, h
	o.OnFailure = DestinationFunc(func(_ context.Context, fr FailureRecord) error { sent = append(sent, fr); return nil })
	st := runUntil(t, o, e.state(e.shards[0], "A"), func() bool { return len(sent) > 0 && e.checkpointed(t, e.shards[0], seqs[4]) })
	if s.len() != 0 || len(sent) != 1 {
		t.Fatalf("delivered %v, sent %+v", s.data(), sent)
	}
	fr := sent[0]
	if fr.RequestContext.Condition != ConditionRecordAgeExceeded || fr.RequestContext.ApproximateInvokeCount != 0 ||
		fr.KinesisBatchInfo.StartSequenceNumber != seqs[0] || fr.KinesisBatchInfo.EndSequenceNumber != seqs[4] || fr.KinesisBatchInfo.BatchSize != 5 {
		t.Errorf("on-failure record %+v", fr)
	}
	if g, row := h.all(), e.row(t, e.shards[0]); !slices.Equal(g, []string{"5 RecordAgeExceeded"}) || row.Checkpoint != seqs[4] {
		t.Errorf("BatchGivenUp %v, checkpoint %s", g, row.Checkpoint)
	}
	clock.set(0)
	e.putN(t, "new", 3)
	runUntil(t, o, st, func() bool { return s.len() >= 3 })
	if got := s.data(); !slices.Equal(got, values("new", 3)) || len(sent) != 1 {
		t.Errorf("delivered %v, %d on-failure records", got, len(sent))
	}
}

func TestRun_BatchingWindow_FillsFewerFullerBatchesNoLaterThanTheWindow(t *testing.T) {
	t.Parallel()
	// Reads are paced at 5 a second, so without a window a trickle is
	// already gathered every 200 ms: a window of a second makes the
	// difference plain.
	const n, window = 24, time.Second
	type batch struct {
		size    int
		latency time.Duration // delivery time less the first record's arrival
	}
	run := func(t *testing.T, w time.Duration) []batch {
		e := newEnv(t, 1)
		e.setStart(t, e.shards[0], "horizon")
		var mu sync.Mutex
		var batches []batch
		total := 0
		o := e.opts(FuncTarget(func(_ context.Context, b Batch) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			batches = append(batches, batch{len(b.Records), time.Since(*b.Records[0].ApproximateArrivalTimestamp)})
			total += len(b.Records)
			return len(b.Records), nil
		}))
		o.BatchSize, o.MaximumBatchingWindow, o.PollInterval = 100, w, 30*time.Millisecond
		o.RunLength = 3 * time.Second // a run's end closes a window early
		go func() {
			for i := range n {
				e.put(t, []string{"k"}, []string{fmt.Sprintf("r-%02d", i)})
				time.Sleep(40 * time.Millisecond)
			}
		}()
		runUntil(t, o, e.state(e.shards[0], "A"), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return total >= n
		})
		mu.Lock()
		defer mu.Unlock()
		return batches
	}
	var with, without []batch
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); with = run(t, window) }()
	go func() { defer wg.Done(); without = run(t, 0) }()
	wg.Wait()
	if len(with) == 0 || len(without) < 2*len(with) {
		t.Fatalf("%d batches with a %s window, %d without: want fewer than half", len(with), window, len(without))
	}
	// A batch leaves at most one poll interval and two reads after the
	// window closes; the first record was read up to a poll after it
	// arrived. How long reads and deliveries take on this machine is
	// measured by the run without a window, beside it: its slowest batch is
	// the allowance for the machine, so a busy one does not fail the test.
	var slowest time.Duration
	for _, b := range without {
		slowest = max(slowest, b.latency)
	}
	for _, b := range with {
		if b.latency > window+500*time.Millisecond+slowest {
			t.Errorf("a batch of %d left %s after its first record arrived, window %s (the slowest batch without one: %s)", b.size, b.latency, window, slowest)
		}
	}
	t.Logf("with window: %v; without: %d batches", with, len(without))
}

func TestRun_Deaggregate_DeliversKPLUserRecordsInOrderWithTheirKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	agg1 := string(aggregate(kplRecord{"k1", "", "u-0"}, kplRecord{"k2", "340282366920938463463374607431768211455", "u-1"}, kplRecord{"k1", "", "u-2"}))
	agg2 := string(aggregate(kplRecord{"k3", "", "v-0"}, kplRecord{"k4", "", "v-1"}))
	corrupt := []byte(agg2)
	corrupt[len(corrupt)-1] ^= 0xff // the MD5 no longer matches
	seqs := e.put(t, []string{"outer"}, []string{"p-0", agg1, "p-1", string(corrupt), agg2})
	e.setStart(t, e.shards[0], "horizon")

	var mu sync.Mutex
	var batches []Batch
	failed := false
	h := &recHooks{}
	o := e.opts(FuncTarget(func(_ context.Context, b Batch) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		batches = append(batches, b)
		if !failed {
			failed = true
			return 3, errors.New("failed in the middle of the first aggregate")
		}
		return len(b.Records), nil
	}))
	o.Deaggregate, o.Hooks = true, h
	runUntil(t, o, e.state(e.shards[0], "A"), func() bool {
		mu.Lock()
		n := len(batches)
		mu.Unlock()
		return n >= 2 && e.checkpointed(t, e.shards[0], seqs[4])
	})
	mu.Lock()
	defer mu.Unlock()
	// First delivery: everything; "settled 3" ends inside agg1, so only p-0
	// settled and the second delivery starts at agg1's first user record.
	type rec struct{ data, key, seq string }
	flat := func(b Batch) (out []rec) {
		for _, r := range b.Records {
			out = append(out, rec{string(r.Data), aws.ToString(r.PartitionKey), aws.ToString(r.SequenceNumber)})
		}
		return out
	}
	want := []rec{{"u-0", "k1", seqs[1]}, {"u-1", "k2", seqs[1]}, {"u-2", "k1", seqs[1]}, {"p-1", "outer", seqs[2]}, {"v-0", "k3", seqs[4]}, {"v-1", "k4", seqs[4]}}
	if got := flat(batches[0]); !slices.Equal(got, append([]rec{{"p-0", "outer", seqs[0]}}, want...)) {
		t.Errorf("first delivery %v", got)
	}
	if got := flat(batches[1]); !slices.Equal(got, want) {
		t.Errorf("second delivery %v, want %v (agg1 redelivered whole)", got, want)
	}
	wantSubs := []Sub{{true, 0, ""}, {true, 1, "340282366920938463463374607431768211455"}, {true, 2, ""}, {}, {true, 0, ""}, {true, 1, ""}}
	if !slices.Equal(batches[1].Subs, wantSubs) {
		t.Errorf("subs %+v, want %+v", batches[1].Subs, wantSubs)
	}
	if row := e.row(t, e.shards[0]); !slices.Equal(h.aggregated, []string{seqs[3]}) || row.Checkpoint != seqs[4] {
		t.Errorf("aggregated-record errors %v (want the corrupt %s), checkpoint %s", h.aggregated, seqs[3], row.Checkpoint)
	}
}

func TestDeaggregate_RoundTripsAndRefusesCorruptAggregates(t *testing.T) {
	recs := []kplRecord{{"a", "", "one"}, {"b", "123", "two"}, {"a", "", ""}, {"c", "123", strings.Repeat("x", 300)}}
	got, err := Deaggregate(aggregate(recs...))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("%d user records, want %d", len(got), len(recs))
	}
	for i, r := range recs {
		if got[i].PartitionKey != r.key || got[i].ExplicitHashKey != r.ehk || string(got[i].Data) != r.data {
			t.Errorf("record %d = %+v, want %+v", i, got[i], r)
		}
	}
	good := aggregate(recs...)
	badSum := slices.Clone(good)
	badSum[len(badSum)-1]++
	// A body whose MD5 is right but whose protobuf is cut short.
	short := good[4 : len(good)-16]
	short = short[:len(short)-3]
	sum := md5sum(short)
	truncated := slices.Concat(kplMagic, short, sum)
	outOfRange := slices.Concat(kplMagic, appendBytesField(nil, 3, appendBytesField(appendVarintField(nil, 1, 5), 3, []byte("d"))))
	outOfRange = append(outOfRange, md5sum(outOfRange[4:])...)
	for name, data := range map[string][]byte{"bad md5": badSum, "truncated": truncated, "key index out of range": outOfRange, "too short": kplMagic} {
		if _, err := Deaggregate(data); !errors.Is(err, ErrAggregatedRecord) {
			t.Errorf("%s: err = %v, want ErrAggregatedRecord", name, err)
		}
	}
}

func TestLambdaTarget_Deaggregated_UserRecordsCarrySubSequenceNumbers(t *testing.T) {
	recs := records("shardId-000000000003", 3, 4)
	recs[2].SequenceNumber = recs[1].SequenceNumber // two user records of one aggregate
	b := batchOf(recs)
	b.Subs = []Sub{{}, {true, 0, ""}, {true, 1, "99"}}
	var calls int
	lt := newLambdaTarget(t, invokeFunc(func(_ context.Context, in *lambda.InvokeInput) (*lambda.InvokeOutput, error) {
		calls++
		body := string(in.Payload)
		for _, want := range []string{`"eventID":"shardId-000000000003:` + *recs[1].SequenceNumber + `:0"`, `"subSequenceNumber":1`, `"explicitHashKey":"99"`} {
			if !strings.Contains(body, want) {
				t.Errorf("payload lacks %s: %s", want, body)
			}
		}
		if strings.Count(body, `"subSequenceNumber"`) != 2 {
			t.Errorf("payload %s: want subSequenceNumber on the two user records only", body)
		}
		// A failure named by the aggregate's sequence number fails it whole.
		return ok(fmt.Sprintf(`{"batchItemFailures":[{"itemIdentifier":%q}]}`, *recs[1].SequenceNumber)), nil
	}))
	n, err := lt.Deliver(t.Context(), b)
	if n != 1 || err != nil || calls != 1 {
		t.Fatalf("Deliver = %d, %v", n, err)
	}
}

func TestOptions_FailurePolicyValidation(t *testing.T) {
	cases := map[string]func(*Options){
		"MaximumRetryAttempts":  func(o *Options) { o.MaximumRetryAttempts = RetryAttempts(10001) },
		"MaximumRecordAge":      func(o *Options) { o.MaximumRecordAge = -time.Second },
		"MaximumBatchingWindow": func(o *Options) { o.MaximumBatchingWindow = 301 * time.Second },
	}
	for field, set := range cases {
		o := Options{}
		o.setDefaults()
		set(&o)
		o.Kinesis, o.Store, o.Target = &faultKinesis{}, &spyStore{}, FuncTarget(nil)
		if err := o.validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: err = %v", field, err)
		}
	}
	if RetryAttempts(-1) != nil || *RetryAttempts(0) != 0 {
		t.Error("RetryAttempts: -1 is no limit, 0 is zero retries")
	}
	for _, arn := range []string{"", "arn:aws:sqs:us-east-1:123456789012", "arn:aws:lambda:us-east-1:123456789012:function:f", "arn:aws:sqs:us-east-1:123456789012:q/x", "https://sqs.us-east-1.amazonaws.com/1/q"} {
		if _, err := ParseDestinationARN(arn); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseDestinationARN(%q) = %v, want ErrInvalid", arn, err)
		}
	}
	if a, err := ParseDestinationARN("arn:aws:sns:eu-west-1:123456789012:failures"); err != nil || a.Service != "sns" || a.Resource != "failures" {
		t.Errorf("ParseDestinationARN = %+v, %v", a, err)
	}
}

// TestRun_RetryAttemptsCarriedAcrossRunsCoverOnlyTheRecordsThatFailed: a
// run that ends before giving a failing record up carries its count; the
// next run reads that record with more behind it and must give up only the
// record that failed, delivering the rest.
func TestRun_RetryAttemptsCarriedAcrossRunsCoverOnlyTheRecordsThatFailed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	e.putN(t, "p", 1) // the poison, alone in the first read
	e.setStart(t, e.shards[0], "horizon")
	s := &sink{fail: func(b Batch) (int, error) {
		for i, r := range b.Records {
			if string(r.Data) == "p-00000" {
				return i, errors.New("poison")
			}
		}
		return len(b.Records), nil
	}}
	var sent []FailureRecord
	var mu sync.Mutex
	o := e.opts(s)
	o.MaximumRetryAttempts = RetryAttempts(1)
	o.OnFailure = DestinationFunc(func(_ context.Context, fr FailureRecord) error {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, fr)
		return nil
	})
	// The run ends during the backoff after the first failure, before the
	// retry: the count (1) is carried in the state. The backoff outlasts the
	// run, so the run cannot end before the first failure however slow the
	// machine is.
	o.RunLength, o.RetryMin, o.RetryMax = 20*time.Second, time.Minute, time.Minute
	st, err := Run(t.Context(), o, e.state(e.shards[0], "A"))
	if err != nil {
		t.Fatal(err)
	}
	if st.FailedAttempts != 1 || st.FailingSeq == "" {
		t.Fatalf("state after the first run: failing %q × %d, want the poison once (state %+v)", st.FailingSeq, st.FailedAttempts, st)
	}
	e.putN(t, "a", 20) // read together with the poison by the next run
	o.RunLength, o.RetryMin = 2*time.Second, 50*time.Millisecond
	runUntil(t, o, st, func() bool { return s.len() >= 20 })
	if got := s.data(); !slices.Equal(got, values("a", 20)) {
		t.Fatalf("delivered %v, want the 20 records that never failed", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 1 || sent[0].KinesisBatchInfo.BatchSize != 1 {
		t.Fatalf("on-failure records %+v, want one, for the poison alone", sent)
	}
}

// TestRun_BisectionGoesOnWhereTheLastRunLeftIt: with bisection, each run
// here has room for one failed delivery (the wait after it outlasts the
// run). A run that halved the batch carries the half in hand, and the next
// run goes on from it: the bad record is isolated and given up within a
// few runs, instead of every run starting again from the whole batch and
// halving it once, for good.
func TestRun_BisectionGoesOnWhereTheLastRunLeftIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	seqs := e.putN(t, "a", 64)
	e.setStart(t, e.shards[0], "horizon")
	bad := "a-00037"
	s, deliveries, failures := badRecordSink(bad)
	var sent []FailureRecord
	var mu sync.Mutex
	given := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(sent)
	}
	o := e.opts(s)
	o.BatchSize, o.BisectBatchOnFunctionError, o.MaximumRetryAttempts = 100, true, RetryAttempts(0)
	o.OnFailure = DestinationFunc(func(_ context.Context, fr FailureRecord) error {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, fr)
		return nil
	})
	o.RunLength, o.RetryMin, o.RetryMax = time.Second, time.Minute, time.Minute
	st := e.state(e.shards[0], "A")
	for given() == 0 || s.len() < 63 {
		before := deliveries.Load()
		next, err := Run(t.Context(), o, st)
		if err != nil {
			t.Fatal(err)
		}
		st = next
		if deliveries.Load() == before {
			// A run too short on this machine to deliver: longer ones.
			o.RunLength = min(2*o.RunLength, maxAdaptiveRun)
		}
		// A run carries only the half in hand: once it settles, the next
		// run halves the rest again from its whole. Down from 64 records
		// that is at most 6+5+...+1 = 21 failed deliveries (the halves
		// that settle ride along), however fast the runs; without the
		// carry, never.
		if n := failures.Load(); n > 24 {
			t.Fatalf("%d deliveries failed and the bad record is not given up (state %+v)", n, st)
		}
	}
	want := slices.DeleteFunc(values("a", 64), func(v string) bool { return v == bad })
	if got := s.data(); !slices.Equal(got, want) {
		t.Fatalf("delivered %d records %v, want the 63 good ones in order", len(got), got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 1 || sent[0].KinesisBatchInfo.StartSequenceNumber != seqs[37] || sent[0].KinesisBatchInfo.BatchSize != 1 {
		t.Fatalf("on-failure records %+v, want one for %s alone", sent, seqs[37])
	}
}

// badRecordSink is a target whose delivery fails whole when it carries the
// record whose data is bad, counting its deliveries and its failures.
func badRecordSink(bad string) (s *sink, deliveries, failures *atomic.Int32) {
	deliveries, failures = new(atomic.Int32), new(atomic.Int32)
	s = &sink{fail: func(b Batch) (int, error) {
		deliveries.Add(1)
		for _, r := range b.Records {
			if string(r.Data) == bad {
				failures.Add(1)
				return 0, errors.New("function error") // the whole batch fails
			}
		}
		return len(b.Records), nil
	}}
	return s, deliveries, failures
}

// TestRun_ANewLoopGoesOnCountingWhereALostStateLeftIt: a loop's state is
// lost at every run (its execution failed, its runner died) and each new
// loop starts from a fresh one. The retry count lives on the row too, so
// the batch that always fails is still given up after MaximumRetryAttempts;
// counted in the state alone, it would be tried for good.
func TestRun_ANewLoopGoesOnCountingWhereALostStateLeftIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	e.putN(t, "a", 8)
	e.setStart(t, e.shards[0], "horizon")
	s, _, failures := badRecordSink("a-00003")
	var given atomic.Int32
	o := e.opts(s)
	o.BatchSize, o.MaximumRetryAttempts = 100, RetryAttempts(2)
	o.OnFailure = DestinationFunc(func(context.Context, FailureRecord) error {
		given.Add(1)
		return nil
	})
	// Room for one attempt a run: the retry waits past the run's end.
	o.RunLength, o.RetryMin, o.RetryMax = time.Second, time.Minute, time.Minute
	for given.Load() == 0 {
		before := failures.Load()
		st, err := Run(t.Context(), o, e.state(e.shards[0], "A"))
		if err != nil {
			t.Fatal(err)
		}
		if failures.Load() == before && st.Records == 0 {
			o.RunLength = min(2*o.RunLength, maxAdaptiveRun) // too short on this machine to deliver
		}
		if n := failures.Load(); n > 3 {
			t.Fatalf("%d deliveries failed and the batch is not given up: a new loop started its count again (state %+v)", n, st)
		}
	}
	if n := failures.Load(); n != 3 {
		t.Fatalf("given up after %d failed deliveries, want 3 (MaximumRetryAttempts 2)", n)
	}
}

// TestRun_ACarriedFailureSplitsTheBatchWhereItsRecordFalls: a new loop
// reads from the checkpoint, so the records its predecessor settled past
// it (while other lanes held it back) come again before the half a failure
// on the row names. The batch is split where that half begins: the
// records before it go first and alone, and the halving goes on from the
// half instead of from a whole batch again. The simulator's world
// 2,003,478: loops that died after each failed call halved from 64 every
// time, and the poisoned record was given up only once the checkpoint had
// crept up to it.
func TestRun_ACarriedFailureSplitsTheBatchWhereItsRecordFalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		m.put(t, []string{"a"}, 64)
		bad := m.seqs[40]
		var mu sync.Mutex
		var sizes []int
		tgt := FuncTarget(func(_ context.Context, b Batch) (int, error) {
			mu.Lock()
			sizes = append(sizes, len(b.Records))
			mu.Unlock()
			for _, r := range b.Records {
				if aws.ToString(r.SequenceNumber) == bad {
					return 0, errors.New("the function fails on this record (injected)")
				}
			}
			return len(b.Records), nil
		})
		o := Options{Kinesis: m.k, Store: m.store, Target: tgt, PollInterval: 200 * time.Millisecond, RunLength: 10 * time.Second,
			Mapping: Mapping{BatchSize: 100, BisectBatchOnFunctionError: true, MaximumRetryAttempts: RetryAttempts(2)}}
		st := m.state("A")
		st.Failure = Failure{FailingSeq: m.seqs[32], FailingLast: m.seqs[47]}
		if _, err := Run(t.Context(), o, st); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(sizes) < 2 || sizes[0] != 32 || sizes[1] != 16 {
			t.Fatalf("deliveries of %v records, want 32 (the records before the carried half) and then 16 (the half)", sizes)
		}
	})
}
