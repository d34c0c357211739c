package runner_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/runner"
	"github.com/shardloop/shardloop/pkg/shards"
)

func TestMain(m *testing.M) { os.Exit(testaws.Main(m)) }

// sink records what the target received, by record data.
type sink struct {
	mu    sync.Mutex
	seen  map[string]int
	order []string
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// TestRunner_KilledLoopIsTakenOverWithoutLoss kills a loop in the middle of a
// batch and checks that a new owner resumes after the last checkpoint: every
// record delivered at least once, each key in order.
func TestRunner_KilledLoopIsTakenOverWithoutLoss(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := testaws.Name(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if _, err := shards.CreateIfMissing(ctx, kc, stream, 2); err != nil {
		t.Fatal(err)
	}
	const leaseFor = 2 * time.Second
	store, err := lease.NewMemoryStore(func(o *lease.Options) { o.Duration = leaseFor })
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{seen: map[string]int{}}
	var r *runner.Runner
	var killOnce sync.Once
	var killedOwner string
	target := reader.FuncTarget(func(ctx context.Context, b reader.Batch) (int, error) {
		s.mu.Lock()
		n := len(b.Records)
		crash := false
		if b.ShardID == "shardId-000000000001" && n >= 2 && len(s.seen) > 40 {
			killOnce.Do(func() { crash = true })
		}
		if crash {
			n /= 2
		}
		for _, rec := range b.Records[:n] {
			s.seen[string(rec.Data)]++
			s.order = append(s.order, string(rec.Data))
		}
		s.mu.Unlock()
		if crash {
			killedOwner = r.Kill(stream, b.ShardID)
			return n, fmt.Errorf("killed")
		}
		return n, nil
	})
	r, err = runner.New(runner.Options{
		Subscriptions:  []coordinator.Subscription{{Stream: stream, Start: "horizon"}},
		Store:          store,
		Kinesis:        kc,
		RelistInterval: 300 * time.Millisecond,
		Reader: reader.Options{
			Target: target, Mapping: reader.Mapping{BatchSize: 10}, PollInterval: 100 * time.Millisecond, RunLength: 2 * time.Second,
			RenewInterval: 500 * time.Millisecond, LeaseDuration: leaseFor,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()

	const keys, perKey = 10, 15
	for i := range perKey {
		var entries []ktypes.PutRecordsRequestEntry
		for k := range keys {
			entries = append(entries, ktypes.PutRecordsRequestEntry{
				PartitionKey: aws.String(fmt.Sprintf("k%d", k)), Data: fmt.Appendf(nil, "k%d:%03d", k, i)})
		}
		if _, err := kc.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for s.count() < keys*perKey && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	<-done

	if killedOwner == "" {
		t.Fatal("no loop was killed: the test did not exercise a takeover")
	}
	if got := s.count(); got != keys*perKey {
		t.Fatalf("delivered %d unique records, want %d", got, keys*perKey)
	}
	var takeover bool
	for _, l := range r.Loops() {
		if l.ShardID == "shardId-000000000001" && l.Owner != killedOwner {
			takeover = true
		}
	}
	if !takeover {
		t.Fatalf("no new owner took over shardId-000000000001 from %s: %+v", killedOwner, r.Loops())
	}
	// Per key, first deliveries come in counter order.
	next := map[string]int{}
	firsts := map[string]bool{}
	dups := 0
	for _, d := range s.order {
		if firsts[d] {
			dups++
			continue
		}
		firsts[d] = true
		key, num, _ := strings.Cut(d, ":")
		n, _ := strconv.Atoi(num)
		if n != next[key] {
			t.Fatalf("key %s: first delivery of %d after %d", key, n, next[key]-1)
		}
		next[key] = n + 1
	}
	t.Logf("takeover of shardId-000000000001 from %s; %d duplicates", killedOwner, dups)
}

// TestRunner_RestartWithoutAStartDeliversWhatArrivedWhileStopped is the
// black-box bug of `shardloop run --start horizon`, stopped, records put,
// then `shardloop run` without --start: the default "latest" was recorded as
// a new start over every checkpoint, and the records written while the
// runner was down were never delivered.
func TestRunner_RestartWithoutAStartDeliversWhatArrivedWhileStopped(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := testaws.Name(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if _, err := shards.CreateIfMissing(ctx, kc, stream, 2); err != nil {
		t.Fatal(err)
	}
	dc := testaws.Dynamo(t)
	table := testaws.Name(t)
	if err := lease.CreateTable(ctx, dc, table); err != nil {
		t.Fatal(err)
	}
	store, err := lease.NewDynamoStore(dc, table)
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{seen: map[string]int{}}
	target := reader.FuncTarget(func(_ context.Context, b reader.Batch) (int, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, rec := range b.Records {
			s.seen[string(rec.Data)]++
		}
		return len(b.Records), nil
	})
	put := func(prefix string, n int) {
		var entries []ktypes.PutRecordsRequestEntry
		for i := range n {
			entries = append(entries, ktypes.PutRecordsRequestEntry{PartitionKey: aws.String(strconv.Itoa(i)), Data: fmt.Appendf(nil, "%s-%d", prefix, i)})
		}
		if _, err := kc.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries}); err != nil {
			t.Fatal(err)
		}
	}
	run := func(start string, want int) {
		t.Helper()
		r, err := runner.New(runner.Options{
			Subscriptions:  []coordinator.Subscription{{Stream: stream, Start: start}},
			Store:          store,
			Kinesis:        kc,
			RelistInterval: 200 * time.Millisecond,
			Reader:         reader.Options{Target: target, PollInterval: 100 * time.Millisecond, RunLength: time.Second},
		})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _ = r.Run(runCtx); close(done) }()
		defer func() { stop(); <-done }()
		for s.count() < want {
			if ctx.Err() != nil {
				t.Fatalf("delivered %d of %d records", s.count(), want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	put("before", 50)
	run("horizon", 50)
	put("while-stopped", 100)
	run("", 150) // no --start: the checkpoints decide
	for i := range 100 {
		if s.seen[fmt.Sprintf("while-stopped-%d", i)] == 0 {
			t.Fatalf("while-stopped-%d never delivered", i)
		}
	}
}

// Runners on one DynamoDB lease table (dynalite) over kinesis-local share
// 12 shards: 4 runners 3 each, 3 runners 4 each when one stops (Ctrl-C), 2
// runners 6 each when another stops, and 3 runners 4 each again when a new
// one joins, delivering every record with each key in order.
func TestRunner_RunnersShareAStreamOnTheEmulators(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := testaws.Name(t)
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	if _, err := shards.CreateIfMissing(ctx, kc, stream, 12); err != nil {
		t.Fatal(err)
	}
	dc := testaws.Dynamo(t)
	table := testaws.Name(t)
	if err := lease.CreateTable(ctx, dc, table); err != nil {
		t.Fatal(err)
	}
	const leaseFor = 2 * time.Second
	store, err := lease.NewDynamoStore(dc, table, func(o *lease.Options) { o.Duration = leaseFor })
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{seen: map[string]int{}}
	target := reader.FuncTarget(func(_ context.Context, b reader.Batch) (int, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, rec := range b.Records {
			s.seen[string(rec.Data)]++
			s.order = append(s.order, string(rec.Data))
		}
		return len(b.Records), nil
	})
	type running struct {
		stop context.CancelFunc
		done chan struct{}
	}
	runners := map[string]running{}
	start := func(id string) {
		r, err := runner.New(runner.Options{
			Subscriptions:  []coordinator.Subscription{{Stream: stream, Start: "horizon"}},
			Store:          store,
			Kinesis:        kc,
			RelistInterval: 2 * time.Second,
			Reader: reader.Options{Target: target, Mapping: reader.Mapping{BatchSize: 50}, PollInterval: 500 * time.Millisecond, RunLength: 3 * time.Second,
				RenewInterval: 500 * time.Millisecond, LeaseDuration: leaseFor},
			Balance: &runner.Balance{ID: id},
		})
		if err != nil {
			t.Fatal(err)
		}
		rc, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _ = r.Run(rc); close(done) }()
		runners[id] = running{stop, done}
	}
	leave := func(id string) {
		runners[id].stop()
		<-runners[id].done
		delete(runners, id)
	}
	defer func() {
		for id := range runners {
			leave(id)
		}
	}()
	settle := func(want map[string]int) {
		t.Helper()
		began := time.Now()
		for {
			rows, err := store.List(ctx, stream)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, r := range rows {
				if r.Owner != "" {
					got[lease.OwnerRunner(r.Owner)]++
				}
			}
			if fmt.Sprint(got) == fmt.Sprint(want) {
				t.Logf("%v after %s", got, time.Since(began).Round(10*time.Millisecond))
				return
			}
			// Bounds a failing test only: a busy machine delays renewals of
			// 2 s leases, and the shares then take a few rounds to settle.
			if ctx.Err() != nil || time.Since(began) > 90*time.Second {
				t.Fatalf("shares %v, want %v", got, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	put := func(round int) {
		var entries []ktypes.PutRecordsRequestEntry
		for k := range 24 {
			entries = append(entries, ktypes.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprintf("k%d", k)), Data: fmt.Appendf(nil, "k%d:%03d", k, round)})
		}
		if _, err := kc.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries}); err != nil {
			t.Fatal(err)
		}
	}
	round := 0
	produce := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); round++ {
			put(round)
			time.Sleep(150 * time.Millisecond)
		}
	}

	start("a")
	start("b")
	start("c")
	start("d")
	settle(map[string]int{"a": 3, "b": 3, "c": 3, "d": 3})
	produce(2 * time.Second)
	leave("b")
	settle(map[string]int{"a": 4, "c": 4, "d": 4})
	produce(time.Second)
	leave("c")
	settle(map[string]int{"a": 6, "d": 6})
	produce(time.Second)
	start("e")
	settle(map[string]int{"a": 4, "d": 4, "e": 4})
	produce(time.Second)
	want := 24 * round
	for s.count() < want && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	if got := s.count(); got != want {
		t.Fatalf("delivered %d unique records, want %d", got, want)
	}
	next := map[string]int{}
	firsts := map[string]bool{}
	for _, d := range s.order {
		if firsts[d] {
			continue
		}
		firsts[d] = true
		key, num, _ := strings.Cut(d, ":")
		n, _ := strconv.Atoi(num)
		if n != next[key] {
			t.Fatalf("key %s: first delivery of %d after %d", key, n, next[key]-1)
		}
		next[key] = n + 1
	}
}
