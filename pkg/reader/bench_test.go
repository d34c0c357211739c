package reader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/kinesismem"
	"github.com/shardloop/shardloop/internal/quiet"
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

// DescribeStreamSummary answers without a creation time: the stand-in has
// one stream, never created again.
func (k *memKinesis) DescribeStreamSummary(context.Context, *kinesis.DescribeStreamSummaryInput, ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	return &kinesis.DescribeStreamSummaryOutput{}, nil
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
	Store Store
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

func (s *slowStore) Renew(ctx context.Context, stream, shard, owner string, rn lease.Renewal) (lease.Lease, error) {
	s.calls.Add(1)
	s.lat.wait(s.write)
	return s.Store.Renew(ctx, stream, shard, owner, rn)
}

func (s *slowStore) Checkpoint(ctx context.Context, stream, shard, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	s.calls.Add(1)
	s.ckpt.wait(s.write)
	return s.Store.Checkpoint(ctx, stream, shard, owner, seq, opts...)
}

func (s *slowStore) Release(ctx context.Context, stream, shard, owner string, ho lease.Handover) error {
	s.calls.Add(1)
	s.lat.wait(s.write)
	return s.Store.Release(ctx, stream, shard, owner, ho)
}

// The calls slowStore passes on as they are.

func (s *slowStore) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w lease.Window) error {
	return s.Store.CheckpointWindow(ctx, stream, shardID, owner, w)
}

func (s *slowStore) Pin(ctx context.Context, stream, shardID, owner, start string) (lease.Lease, error) {
	return s.Store.Pin(ctx, stream, shardID, owner, start)
}

func (s *slowStore) Get(ctx context.Context, stream, shardID string) (lease.Lease, error) {
	return s.Store.Get(ctx, stream, shardID)
}

func (s *slowStore) GetWindow(ctx context.Context, stream, shardID string) (lease.Window, error) {
	return s.Store.GetWindow(ctx, stream, shardID)
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
	guard := quiet.Begin(b, "reader_pipelined_ratio", "reader_throughput_ratio", "reader_records_per_second")
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
		if _, err := mem.Take(context.Background(), "bench", "shardId-000000000000", "bench-owner"); err != nil { // the coordinator's take for the loop
			b.Fatal(err)
		}
		st := State{Stream: "bench", ShardID: "shardId-000000000000", Owner: "bench-owner"}
		opts := Options{Kinesis: kin, Store: store, Target: tgt, Mapping: Mapping{BatchSize: batch}, RunLength: MaxRunLength, noReadPacing: true}
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
		writeBenchData(b, "reader", map[string]float64{"rate": rate, "sequential": sequential, "pipelined": pipelined})
		b.ReportMetric(rate/sequential, "ratio")
		b.ReportMetric(rate, "records/s")
		guard.Check(b)
		fmt.Printf("bench reader_pipelined_ratio %.3f x (against the sequential ideal; the pipelined ideal is %.2f x)\n", rate/sequential, pipelined/sequential)
		fmt.Printf("bench reader_throughput_ratio %.3f x (against the pipelined ideal, batch / target)\n", rate/pipelined)
		fmt.Printf("bench reader_requests_per_batch %.2f requests\n", requests)
		fmt.Printf("bench reader_records_per_second %.0f records/s (sequential ideal %.0f, pipelined ideal %.0f; measured latencies get %s target %s checkpoint %s)\n",
			rate, sequential, pipelined, kin.lat.mean().Round(10*time.Microsecond), target.mean().Round(10*time.Microsecond), store.ckpt.mean().Round(10*time.Microsecond))
	}
}

// drainResult is one drain of a backlog.
type drainResult struct {
	rate      float64 // records a second, steady: from 10 % to 90 % of the records delivered
	reads     int
	throttled int
	took      time.Duration
}

// drain reads a backlog of n records (size bytes of data each, on 1,000
// keys spread evenly) from one closed shard of the in-memory Kinesis, with
// its read limits on (5 GetRecords calls and 2 MiB a second, throttling
// beyond them as Kinesis does), through factor lanes into a target taking
// took per invocation, and returns the rate it delivered at. Runs are as
// long as they may be, unless defaults: then every option not given here is
// left at its default.
func drain(b *testing.B, n, batch, factor int, took time.Duration, size int, defaults bool) drainResult {
	ctx := context.Background()
	k, err := kinesismem.New(kinesismem.Options{NoWriteLimits: true})
	if err != nil {
		b.Fatal(err)
	}
	const stream, shard = "drain", "shardId-000000000000"
	if _, err := k.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(1)}); err != nil {
		b.Fatal(err)
	}
	data := make([]byte, size)
	for i := 0; i < n; i += 500 {
		var in []types.PutRecordsRequestEntry
		for j := i; j < min(i+500, n); j++ {
			in = append(in, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprint("key-", j%1000)), Data: data})
		}
		if _, err := k.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: in}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := k.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String(stream), ShardToSplit: aws.String(shard),
		NewStartingHashKey: aws.String("170141183460469231731687303715884105728")}); err != nil {
		b.Fatal(err)
	}
	store, err := lease.NewMemoryStore()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := store.SetStart(ctx, stream, shard, lease.Start{Position: "horizon", Generation: "g1", Order: 1}); err != nil {
		b.Fatal(err)
	}
	if _, err := store.Take(ctx, stream, shard, "drain"); err != nil { // the coordinator's take for the loop
		b.Fatal(err)
	}
	var delivered atomic.Int64
	var mu sync.Mutex
	var last, at10, at90 time.Time // the last delivery, and when 10 % and 90 % of the records were in
	tgt := FuncTarget(func(ctx context.Context, bt Batch) (int, error) {
		time.Sleep(took)
		d := delivered.Add(int64(len(bt.Records)))
		mu.Lock()
		last = time.Now()
		if at10.IsZero() && d >= int64(n/10) {
			at10 = last
		}
		if at90.IsZero() && d >= int64(n*9/10) {
			at90 = last
		}
		mu.Unlock()
		return len(bt.Records), nil
	})
	rc := &benchReads{KinesisAPI: k}
	opts := Options{Kinesis: rc, Store: store, Target: tgt, Mapping: Mapping{BatchSize: int32(batch), ParallelizationFactor: factor}, RunLength: MaxRunLength}
	if defaults {
		opts.RunLength = 0
	}
	st := State{Stream: stream, ShardID: shard, Owner: "drain"}
	start := time.Now()
	for {
		if st, err = Run(ctx, opts, st); err != nil {
			b.Fatal(err)
		}
		if !st.Continue {
			break
		}
	}
	if st.Reason != ReasonShardEnd || delivered.Load() != int64(n) {
		b.Fatalf("factor %d: ended %q after %d of %d records", factor, st.Reason, delivered.Load(), n)
	}
	mu.Lock()
	defer mu.Unlock()
	// The steady rate, from 10 % to 90 % of the records: without the start
	// (a shard's byte budget starts full, a second's worth) and the tail.
	steady := float64(n*9/10-n/10) / at90.Sub(at10).Seconds()
	return drainResult{rate: steady, reads: int(rc.reads.Load()), throttled: int(rc.throttled.Load()), took: last.Sub(start)}
}

// benchReads counts GetRecords calls and the throttled ones.
type benchReads struct {
	KinesisAPI       KinesisAPI
	reads, throttled atomic.Int64
}

// DescribeStreamSummary passes on.
func (c *benchReads) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	return c.KinesisAPI.DescribeStreamSummary(ctx, in, optFns...)
}

func (c *benchReads) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, fns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	c.reads.Add(1)
	out, err := c.KinesisAPI.GetRecords(ctx, in, fns...)
	var pe *types.ProvisionedThroughputExceededException
	if errors.As(err, &pe) {
		c.throttled.Add(1)
	}
	return out, err
}

func (c *benchReads) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return c.KinesisAPI.GetShardIterator(ctx, in, optFns...)
}

// BenchmarkDrain drains a 100,000-record backlog of one shard on the
// in-memory Kinesis with its read limits on, four ways at once (each has
// its own Kinesis; they wait, mostly): batches of 100 records of 100 bytes
// into a target taking 200 ms an invocation at factor 1 and at factor 10
// (the shard's read limit, 20,000 such records a second, is not what
// limits either); batches of 100 records of 1 KB into a 5 ms target at
// factor 10, which the shard's 2 MB/s limits; and 100-byte records into a
// 5 ms target with every setting at the default a deployment and `shardloop
// run` have (batches of 100, factor 1). Rates are steady ones, from 10 % to
// 90 % of the backlog delivered. drain_pf10_over_pf1 is the ratio of the
// first two (the ideal is about 10); drain_vs_read_cap is the third as a
// fraction of 2 MB/s of 1 KB records, 2,048 a second (Kinesis counts the
// partition keys too: 2,033 records of 1 KB and a 7-byte key fit);
// drain_defaults_vs_write_cap is the fourth against the 1,000 records a
// second a shard accepts: a shard written at its cap must drain faster.
func BenchmarkDrain(b *testing.B) {
	const n = 100_000
	guard := quiet.Begin(b, "drain_pf10_over_pf1", "drain_vs_read_cap", "drain_defaults_records_per_second", "drain_defaults_vs_write_cap")
	for b.Loop() {
		var pf1, pf10, capped, defaults drainResult
		var wg sync.WaitGroup
		wg.Go(func() { pf1 = drain(b, n, 100, 1, 200*time.Millisecond, 100, false) })
		wg.Go(func() { pf10 = drain(b, n, 100, 10, 200*time.Millisecond, 100, false) })
		wg.Go(func() { capped = drain(b, n, 100, 10, 5*time.Millisecond, 1024, false) })
		wg.Go(func() { defaults = drain(b, n, 100, 1, 5*time.Millisecond, 100, true) })
		wg.Wait()
		guard.Check(b)
		ratio := pf10.rate / pf1.rate
		readCap := float64(ShardReadBytes) / 1024
		const writeCap = 1000 // records a second a shard accepts
		writeBenchData(b, "drain", map[string]any{"pf1": pf1.data(), "pf10": pf10.data(), "readCap": capped.data(), "readCapRate": readCap,
			"defaults": defaults.data()})
		b.ReportMetric(ratio, "pf10/pf1")
		b.ReportMetric(capped.rate/readCap, "of-read-cap")
		fmt.Printf("bench drain_pf10_over_pf1 %.2f x (factor 10 %.0f records/s in %s, %d reads, %d throttled; factor 1 %.0f records/s in %s, %d reads, %d throttled)\n",
			ratio, pf10.rate, pf10.took.Round(100*time.Millisecond), pf10.reads, pf10.throttled, pf1.rate, pf1.took.Round(100*time.Millisecond), pf1.reads, pf1.throttled)
		fmt.Printf("bench drain_vs_read_cap %.3f x (%.0f records/s of 1 KB against %.0f; %d reads in %s, %d throttled)\n",
			capped.rate/readCap, capped.rate, readCap, capped.reads, capped.took.Round(100*time.Millisecond), capped.throttled)
		fmt.Printf("bench drain_defaults_records_per_second %.0f records/s (one shard, 100-byte records, every default: batches of 100, factor 1; a 5 ms target; %d reads in %s, %d throttled)\n",
			defaults.rate, defaults.reads, defaults.took.Round(100*time.Millisecond), defaults.throttled)
		fmt.Printf("bench drain_defaults_vs_write_cap %.2f x (against the %d records a second a shard accepts)\n", defaults.rate/writeCap, writeCap)
	}
}

func (d drainResult) data() map[string]any {
	return map[string]any{"rate": d.rate, "reads": d.reads, "throttled": d.throttled, "seconds": d.took.Seconds()}
}

// writeBenchData saves a benchmark's figures for the plot generator
// (go run ./chaos/cmd/benchplots) under build/bench-data, or
// $SHARDLOOP_BENCH_DATA.
func writeBenchData(b *testing.B, name string, v any) {
	b.Helper()
	dir := os.Getenv("SHARDLOOP_BENCH_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "build", "bench-data")
	}
	data, err := json.MarshalIndent(v, "", " ")
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".json"), data, 0o644)
	}
	if err != nil {
		b.Logf("bench data: %v", err)
	}
}
