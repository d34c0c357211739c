package reader

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// lateRead is a Kinesis whose reads after the first complete only once the
// run's context has ended: the answer of a read in flight at the hard cut,
// which the run never routes to its lanes.
type lateRead struct {
	KinesisAPI KinesisAPI
	reads      atomic.Int32
	before     func() // at the second read, before it
}

// DescribeStreamSummary passes on.
func (l *lateRead) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	return l.KinesisAPI.DescribeStreamSummary(ctx, in, optFns...)
}

func (l *lateRead) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	switch l.reads.Add(1) {
	case 1:
		return l.KinesisAPI.GetRecords(ctx, in, optFns...)
	case 2:
		l.before()
	}
	<-ctx.Done()
	time.Sleep(time.Millisecond) // the answer arrives just after the cut
	return l.KinesisAPI.GetRecords(context.Background(), in, optFns...)
}

func (l *lateRead) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return l.KinesisAPI.GetShardIterator(ctx, in, optFns...)
}

// TestRun_RecordsReadAtTheCutAreNotHandedOnAsSettled: with lanes apart (one
// failing), a run hands on which records past its checkpoint it settled
// (SettledTo). A read that completed at the run's hard cut was never routed
// to a lane: its records must not count as settled, or the next run skips
// them.
func TestRun_RecordsReadAtTheCutAreNotHandedOnAsSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		// Two keys in different lanes at factor 2.
		ka, kb := "a", ""
		for i := range 100 {
			if k := string(rune('b' + i)); laneOf(k, 2) != laneOf(ka, 2) {
				kb = k
				break
			}
		}
		m.put(t, []string{ka, kb}, 4)
		var mu sync.Mutex
		settled := map[string]bool{}
		failA := true
		tgt := FuncTarget(func(_ context.Context, b Batch) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			for i, r := range b.Records {
				if aws.ToString(r.PartitionKey) == ka && failA {
					return i, errors.New("key a is down")
				}
				settled[aws.ToString(r.SequenceNumber)] = true
			}
			return len(b.Records), nil
		})
		lk := &lateRead{KinesisAPI: m.k, before: func() { m.put(t, []string{ka, kb}, 4) }} // read by the late read
		o := Options{Kinesis: lk, Store: m.store, Target: tgt, Mapping: Mapping{BatchSize: 10, ParallelizationFactor: 2}, PollInterval: 100 * time.Millisecond, RunLength: 10 * time.Second, Margin: 2 * time.Second,
			RetryMin: 100 * time.Millisecond, RetryMax: 100 * time.Millisecond}
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		st, err := Run(ctx, o, m.state("A"))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		failA = false
		mu.Unlock()
		o.Kinesis = m.k
		for range 5 {
			if st, err = Run(t.Context(), o, st); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for i, seq := range m.seqs {
			if !settled[seq] {
				t.Errorf("record %d (key %s) never settled: handed on as settled by the run cut with its read unrouted (state settledTo %s)", i, m.keys[i], st.SettledTo)
			}
		}
	})
}
