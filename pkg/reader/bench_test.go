package reader

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/pkg/lease"
)

// latency records how long the injected waits really took, so the ideal
// is computed from the same run's latencies (timer overshoot is not the
// reader's doing).
type latency struct {
	mu    sync.Mutex
	total time.Duration
	n     int
}

func (l *latency) wait(d time.Duration) {
	t0 := time.Now()
	time.Sleep(d)
	l.mu.Lock()
	l.total += time.Since(t0)
	l.n++
	l.mu.Unlock()
}

func (l *latency) mean() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		return 0
	}
	return l.total / time.Duration(l.n)
}

// memKinesis is an in-process closed shard of n records with AWS-like
// read latency. Its iterators are "it-<offset>".
type memKinesis struct {
	data    []byte
	n       int
	read    time.Duration
	lat     latency
	calls   atomic.Int64
	arrival time.Time
}

func (m *memKinesis) GetShardIterator(_ context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	m.calls.Add(1)
	m.lat.wait(m.read)
	off := 0
	switch in.ShardIteratorType {
	case types.ShardIteratorTypeAfterSequenceNumber:
		off, _ = strconv.Atoi(aws.ToString(in.StartingSequenceNumber))
		off++
	case types.ShardIteratorTypeAtSequenceNumber:
		off, _ = strconv.Atoi(aws.ToString(in.StartingSequenceNumber))
	case types.ShardIteratorTypeLatest:
		off = m.n
	}
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String("it-" + strconv.Itoa(off))}, nil
}

func (m *memKinesis) GetRecords(_ context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	m.calls.Add(1)
	m.lat.wait(m.read)
	off, err := strconv.Atoi(strings.TrimPrefix(aws.ToString(in.ShardIterator), "it-"))
	if err != nil {
		return nil, &types.InvalidArgumentException{Message: aws.String("bad iterator")}
	}
	end := min(off+int(aws.ToInt32(in.Limit)), m.n)
	out := &kinesis.GetRecordsOutput{MillisBehindLatest: aws.Int64(0)}
	for i := off; i < end; i++ {
		out.Records = append(out.Records, types.Record{
			Data: m.data, PartitionKey: aws.String("k"), SequenceNumber: aws.String(fmt.Sprintf("%020d", i)),
			ApproximateArrivalTimestamp: &m.arrival,
		})
	}
	if end < m.n || len(out.Records) > 0 {
		out.NextShardIterator = aws.String("it-" + strconv.Itoa(end))
	}
	return out, nil
}

// slowStore adds a write latency to a MemoryStore.
type slowStore struct {
	lease.Store
	write time.Duration
	lat   latency
	ckpt  latency
	calls atomic.Int64
}

func (s *slowStore) Take(ctx context.Context, stream, shard, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	s.calls.Add(1)
	s.lat.wait(s.write)
	return s.Store.Take(ctx, stream, shard, owner, opts...)
}

func (s *slowStore) Renew(ctx context.Context, stream, shard, owner string) (lease.Lease, error) {
	s.calls.Add(1)
	s.lat.wait(s.write)
	return s.Store.Renew(ctx, stream, shard, owner)
}

func (s *slowStore) Checkpoint(ctx context.Context, stream, shard, owner, seq string) (lease.Lease, error) {
	s.calls.Add(1)
	s.ckpt.wait(s.write)
	return s.Store.Checkpoint(ctx, stream, shard, owner, seq)
}

func (s *slowStore) Release(ctx context.Context, stream, shard, owner string) error {
	s.calls.Add(1)
	s.lat.wait(s.write)
	return s.Store.Release(ctx, stream, shard, owner)
}

// BenchmarkReaderThroughput measures the reader's own overhead, pipelined:
// 100,000 records of 1 KB through one shard (one lane, the default) with
// GetRecords at 20 ms (1,000 records), the target at 30 ms a batch and each
// lease write at 5 ms. The in-process Kinesis has no read limits (the
// pacing is off): the figures are the reader's, not the shard's 2 MB/s.
//
// reader_pipelined_ratio compares records per second with a strictly
// sequential loop's ideal, batch / (GetRecords + target + checkpoint); the
// pipelined ideal is batch / target (the reads and checkpoints overlap the
// deliveries), 55/30 = 1.83 times the sequential one.
// reader_throughput_ratio compares with that pipelined ideal. Both use the
// mean latencies measured in the same run.
func BenchmarkReaderThroughput(b *testing.B) {
	const (
		records = 100_000
		batch   = 1000
	)
	for b.Loop() {
		mem, err := lease.NewMemoryStore()
		if err != nil {
			b.Fatal(err)
		}
		store := &slowStore{Store: mem, write: 5 * time.Millisecond}
		kin := &memKinesis{data: make([]byte, 1024), n: records, read: 20 * time.Millisecond, arrival: time.Now()}
		var target latency
		var delivered, batches atomic.Int64
		tgt := FuncTarget(func(ctx context.Context, bt Batch) (int, error) {
			target.wait(30 * time.Millisecond)
			delivered.Add(int64(len(bt.Records)))
			batches.Add(1)
			return len(bt.Records), nil
		})
		if _, err := mem.SetStart(context.Background(), "bench", "shardId-000000000000", lease.Start{Position: "horizon", Generation: "g1", Order: 1}); err != nil {
			b.Fatal(err)
		}
		st := State{Stream: "bench", ShardID: "shardId-000000000000", Owner: "bench-owner"}
		opts := Options{Kinesis: kin, Store: store, Target: tgt, BatchSize: batch, RunLength: MaxRunLength, NoReadPacing: true}
		start := time.Now()
		for {
			st, err = Run(context.Background(), opts, st)
			if err != nil {
				b.Fatal(err)
			}
			if !st.Continue {
				break
			}
		}
		elapsed := time.Since(start)
		if st.Reason != ReasonShardEnd || delivered.Load() != records {
			b.Fatalf("ended %q after %d records", st.Reason, delivered.Load())
		}
		rate := float64(delivered.Load()) / elapsed.Seconds()
		sequential := float64(batch) / (kin.lat.mean() + target.mean() + store.ckpt.mean()).Seconds()
		pipelined := float64(batch) / max(kin.lat.mean(), target.mean(), store.ckpt.mean()).Seconds()
		requests := float64(kin.calls.Load()+store.calls.Load()) / float64(batches.Load())
		b.ReportMetric(rate/sequential, "ratio")
		b.ReportMetric(rate, "records/s")
		fmt.Printf("bench reader_pipelined_ratio %.3f x (against the sequential ideal; the pipelined ideal is %.2f x)\n", rate/sequential, pipelined/sequential)
		fmt.Printf("bench reader_throughput_ratio %.3f x (against the pipelined ideal, batch / target)\n", rate/pipelined)
		fmt.Printf("bench reader_requests_per_batch %.2f requests\n", requests)
		fmt.Printf("bench reader_records_per_second %.0f records/s (sequential ideal %.0f, pipelined ideal %.0f; measured latencies get %s target %s checkpoint %s)\n",
			rate, sequential, pipelined, kin.lat.mean().Round(10*time.Microsecond), target.mean().Round(10*time.Microsecond), store.ckpt.mean().Round(10*time.Microsecond))
	}
}
