package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardloop/shardloop/internal/emulators"
	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/runner"
	"github.com/shardloop/shardloop/pkg/shards"
)

// startLocal starts a fresh kinesis-local (with env added) and dynalite for
// one benchmark and stops them when it ends.
func startLocal(b *testing.B, env ...string) (*kinesis.Client, *dynamodb.Client) {
	b.Helper()
	kin, err := emulators.Start(b.Context(), emulators.Kinesis, emulators.Options{Env: env,
		LogPath: filepath.Join(os.TempDir(), fmt.Sprintf("shardloop-bench-%s-kinesis-%d.log", b.Name(), os.Getpid()))})
	if err != nil {
		b.Fatalf("kinesis-local: %v", err)
	}
	b.Cleanup(kin.Stop)
	ddb, err := emulators.Start(b.Context(), emulators.DynamoDB, emulators.Options{})
	if err != nil {
		b.Fatalf("dynalite: %v", err)
	}
	b.Cleanup(ddb.Stop)
	return kinesis.NewFromConfig(testaws.Config(kin.Endpoint)), dynamodb.NewFromConfig(testaws.Config(ddb.Endpoint))
}

// startMoto starts moto_server for Kinesis and DynamoDB. A missing
// moto_server fails the benchmark (make bench must not pass without it).
func startMoto(b *testing.B) (*kinesis.Client, *dynamodb.Client) {
	b.Helper()
	p, err := emulators.Start(b.Context(), emulators.Moto, emulators.Options{
		LogPath: filepath.Join(os.TempDir(), fmt.Sprintf("shardloop-bench-moto-%d.log", os.Getpid()))})
	if err != nil {
		// make bench shows only lines that start with "bench " or FAIL.
		fmt.Printf("bench chaos_lost FAILED: the full-size chaos run needs moto_server: %v\n", err)
		b.Fatalf("the full-size chaos run needs moto_server (Kinesis and DynamoDB at volume): %v", err)
	}
	b.Cleanup(p.Stop)
	return kinesis.NewFromConfig(testaws.Config(p.Endpoint)), dynamodb.NewFromConfig(testaws.Config(p.Endpoint))
}

// quantile is the nearest-rank q-quantile of xs (0 for none).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var t float64
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// writeData saves a benchmark's raw samples for the plot generator
// (go run ./chaos/cmd/benchplots) under build/bench-data.
func writeData(b *testing.B, name string, v any) {
	b.Helper()
	dir := os.Getenv("SHARDLOOP_BENCH_DATA")
	if dir == "" {
		dir = filepath.Join("..", "build", "bench-data")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Logf("bench data: %v", err)
		return
	}
	data, err := json.MarshalIndent(v, "", " ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".json"), data, 0o644)
	}
	if err != nil {
		b.Logf("bench data: %v", err)
	}
}

// newStream creates a stream and a lease table and returns the shards.
func newStream(b *testing.B, kc *kinesis.Client, dc *dynamodb.Client, stream, table string, n int) []shards.Shard {
	b.Helper()
	ctx := b.Context()
	if _, err := shards.CreateIfMissing(ctx, kc, stream, n, func(o *shards.CreateOptions) { o.Timeout = 5 * time.Minute }); err != nil {
		b.Fatal(err)
	}
	if err := lease.CreateTable(ctx, dc, table); err != nil {
		b.Fatal(err)
	}
	ls, err := shards.List(ctx, kc, stream)
	if err != nil {
		b.Fatal(err)
	}
	return ls
}

// putTo writes one record to a shard (by its first hash key) with the send
// time as its data.
func putTo(ctx context.Context, kc *kinesis.Client, stream string, s shards.Shard) (time.Time, error) {
	sent := time.Now()
	_, err := kc.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"),
		ExplicitHashKey: aws.String(s.HashKeyStart), Data: []byte(strconv.FormatInt(sent.UnixNano(), 10))})
	return sent, err
}

// midHash is the middle of a shard's hash key range.
func midHash(s shards.Shard) string {
	lo, _ := new(big.Int).SetString(s.HashKeyStart, 10)
	hi, _ := new(big.Int).SetString(s.HashKeyEnd, 10)
	return new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1).String()
}

// events records, per shard, the lease writes and deliveries a benchmark
// times: the store tap and the target both feed it.
type events struct {
	mu         sync.Mutex
	deliveries map[string][]time.Time // by shard
	renewed    map[string]time.Time   // by owner: last successful take or renew
	takes      map[string][]ownerAt   // by shard: coordinator takes
	shardEnd   map[string]time.Time   // by shard
	// counts of store calls by method ("reader.Take", "coord.Take", ...)
	calls map[string]int
	// run starts (reader takes) by owner
	runs map[string][]time.Time
	// the coordinator's passes: when each began (passTimer) and when each
	// read its lease rows
	passBegins, passEnds []time.Time
	describes            []float64 // DescribeStreamSummary latencies, s
}

type ownerAt struct {
	owner string
	at    time.Time
}

func newEvents() *events {
	return &events{deliveries: map[string][]time.Time{}, renewed: map[string]time.Time{}, takes: map[string][]ownerAt{},
		shardEnd: map[string]time.Time{}, calls: map[string]int{}, runs: map[string][]time.Time{}}
}

func (e *events) target(extra func(reader.Batch, time.Time)) reader.Target {
	return reader.FuncTarget(func(_ context.Context, b reader.Batch) (int, error) {
		now := time.Now()
		e.mu.Lock()
		e.deliveries[b.ShardID] = append(e.deliveries[b.ShardID], now)
		e.mu.Unlock()
		if extra != nil {
			extra(b, now)
		}
		return len(b.Records), nil
	})
}

// firstDeliveryAfter returns the first delivery on shard at or after t.
func (e *events) firstDeliveryAfter(shard string, t time.Time) (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range e.deliveries[shard] {
		if !d.Before(t) {
			return d, true
		}
	}
	return time.Time{}, false
}

func (e *events) count(name string) {
	e.mu.Lock()
	e.calls[name]++
	e.mu.Unlock()
}

// eventStore taps a lease store for events.
type eventStore struct {
	Store runner.Store
	e     *events
}

func (s *eventStore) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	l, err := s.Store.Take(ctx, stream, shardID, owner, opts...)
	now := time.Now()
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	runOwner := strings.Contains(owner, lease.RunSeparator) // a reader run writes as "<loop>/<run>"
	owner = lease.LoopOwner(owner)
	if !runOwner { // the coordinator takes for the loop owner
		s.e.calls["coord.Take"]++
		if err == nil {
			s.e.takes[shardID] = append(s.e.takes[shardID], ownerAt{owner, now})
		}
	} else {
		s.e.calls["reader.Take"]++
		if err == nil {
			s.e.runs[owner] = append(s.e.runs[owner], now)
		}
	}
	if err == nil {
		s.e.renewed[owner] = now
	}
	return l, err
}

func (s *eventStore) Renew(ctx context.Context, stream, shardID, owner string, rn lease.Renewal) (lease.Lease, error) {
	l, err := s.Store.Renew(ctx, stream, shardID, owner, rn)
	s.e.mu.Lock()
	s.e.calls["reader.Renew"]++
	if err == nil {
		s.e.renewed[lease.LoopOwner(owner)] = time.Now()
	}
	s.e.mu.Unlock()
	return l, err
}

func (s *eventStore) Checkpoint(ctx context.Context, stream, shardID, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	l, err := s.Store.Checkpoint(ctx, stream, shardID, owner, seq, opts...)
	s.e.mu.Lock()
	s.e.calls["reader.Checkpoint"]++
	if err == nil && seq == lease.ShardEnd {
		s.e.shardEnd[shardID] = time.Now()
	}
	s.e.mu.Unlock()
	return l, err
}

func (s *eventStore) Release(ctx context.Context, stream, shardID, owner string, ho lease.Handover) error {
	s.e.count("reader.Release")
	return s.Store.Release(ctx, stream, shardID, owner, ho)
}

func (s *eventStore) GetMany(ctx context.Context, stream string, ids []string) (map[string]lease.Lease, error) {
	rows, err := s.Store.GetMany(ctx, stream, ids)
	s.e.mu.Lock()
	s.e.calls["coord.GetMany"]++
	s.e.calls["coord.GetMany.items"] += len(ids)
	s.e.passEnds = append(s.e.passEnds, time.Now())
	s.e.mu.Unlock()
	return rows, err
}

func (s *eventStore) GetGeneration(ctx context.Context, stream string) (lease.Generation, error) {
	s.e.count("coord.GetGeneration")
	return s.Store.GetGeneration(ctx, stream)
}

// The calls eventStore passes on as they are.

func (s *eventStore) List(ctx context.Context, stream string) ([]lease.Lease, error) {
	return s.Store.List(ctx, stream)
}

func (s *eventStore) SetStart(ctx context.Context, stream, shardID string, st lease.Start) (bool, error) {
	return s.Store.SetStart(ctx, stream, shardID, st)
}

func (s *eventStore) Delete(ctx context.Context, stream, shardID string, counter, incarnation int64) error {
	return s.Store.Delete(ctx, stream, shardID, counter, incarnation)
}

func (s *eventStore) PutGeneration(ctx context.Context, stream string, g lease.Generation, prevOrder int64) error {
	return s.Store.PutGeneration(ctx, stream, g, prevOrder)
}

func (s *eventStore) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w lease.Window) error {
	return s.Store.CheckpointWindow(ctx, stream, shardID, owner, w)
}

func (s *eventStore) Pin(ctx context.Context, stream, shardID, owner, start string) (lease.Lease, error) {
	return s.Store.Pin(ctx, stream, shardID, owner, start)
}

func (s *eventStore) Get(ctx context.Context, stream, shardID string) (lease.Lease, error) {
	return s.Store.Get(ctx, stream, shardID)
}

func (s *eventStore) GetWindow(ctx context.Context, stream, shardID string) (lease.Window, error) {
	return s.Store.GetWindow(ctx, stream, shardID)
}

func (s *eventStore) Beat(ctx context.Context, stream string, hb lease.Heartbeat) (lease.Heartbeat, error) {
	return s.Store.Beat(ctx, stream, hb)
}

func (s *eventStore) Runners(ctx context.Context, stream string) ([]lease.Heartbeat, error) {
	return s.Store.Runners(ctx, stream)
}

func (s *eventStore) Leave(ctx context.Context, stream, runner string, counter int64) error {
	return s.Store.Leave(ctx, stream, runner, counter)
}
