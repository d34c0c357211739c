package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/awsconf"
	"github.com/shardloop/shardloop/internal/emulators"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/runner"
	"github.com/shardloop/shardloop/pkg/shards"
)

// demoTimeline is when the demo does what, from its start.
type demoTimeline struct {
	split, kill, merge, stopProducing, deadline time.Duration
}

var defaultTimeline = demoTimeline{
	split:         6 * time.Second,
	kill:          12 * time.Second,
	merge:         24 * time.Second,
	stopProducing: 42 * time.Second,
	deadline:      70 * time.Second,
}

func demoCmd(ctx context.Context, args []string, w io.Writer) error {
	fs := newFlags("demo", "shardloop demo [--keys N] [--rate N] [-v] [--log-format text|json]")
	keys := fs.Int("keys", 16, "partition keys the producer writes")
	rate := fs.Int("rate", 40, "records produced per second")
	format, verbose := addLogFlags(fs, "errors only")
	if err := fs.parse(args); err != nil {
		return err
	}
	level := slog.LevelError
	if *verbose {
		level = slog.LevelInfo
	}
	log := newLogger(os.Stderr, format.value, level)
	d := &demo{w: w, log: log, keys: *keys, rate: *rate, tl: defaultTimeline, begin: time.Now()}
	return d.run(ctx)
}

type demo struct {
	w     io.Writer
	log   *slog.Logger
	keys  int
	rate  int
	tl    demoTimeline
	begin time.Time

	kc     *kinesis.Client
	stream string
	runner *runner.Runner

	mu        sync.Mutex
	produced  int
	seen      map[string]int // "key:n" -> deliveries
	next      map[string]int // key -> next counter expected first
	dups      int
	orderBad  map[string]bool
	killShard string // armed: kill the loop of this shard in its next batch
	killed    string
	events    []string
}

func (d *demo) say(format string, a ...any) {
	fmt.Fprintf(d.w, "demo %5.1fs  %s\n", time.Since(d.begin).Seconds(), fmt.Sprintf(format, a...))
}

func (d *demo) run(parent context.Context) error {
	d.say("starting kinesis-local and dynalite on loopback")
	kin, err := emulators.Start(parent, emulators.Kinesis, emulators.Options{})
	if err != nil {
		return err
	}
	defer kin.Stop()
	ddb, err := emulators.Start(parent, emulators.DynamoDB, emulators.Options{})
	if err != nil {
		return err
	}
	defer ddb.Stop()

	cfg := func(endpoint string) aws.Config {
		return aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
			Credentials: credentials.NewStaticCredentialsProvider("demo", "demo", "")}
	}
	d.kc = awsconf.NewKinesis(cfg(kin.Endpoint))
	dc := awsconf.NewDynamoDB(cfg(ddb.Endpoint))
	d.stream = "shardloop-demo"
	if _, err := shards.CreateIfMissing(parent, d.kc, d.stream, 2); err != nil {
		return err
	}
	if err := lease.CreateTable(parent, dc, "shardloop-leases"); err != nil {
		return err
	}
	store, err := lease.NewDynamoStore(dc, "shardloop-leases")
	if err != nil {
		return err
	}
	d.seen, d.next, d.orderBad = map[string]int{}, map[string]int{}, map[string]bool{}
	d.runner, err = runner.New(runner.Options{
		Subscriptions: []coordinator.Subscription{{Stream: d.stream, Start: "horizon"}},
		Store:         store,
		Kinesis:       d.kc,
		Reader: reader.Options{
			Target:       reader.FuncTarget(d.handle),
			Mapping:      reader.Mapping{BatchSize: 100},
			PollInterval: 250 * time.Millisecond,
			RunLength:    15 * time.Second,
			Logger:       d.log,
		},
		Logger: d.log,
	})
	if err != nil {
		return err
	}
	d.say("stream %s with 2 shards, lease table on dynalite; producing %d records/s over %d keys", d.stream, d.rate, d.keys)

	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var wg sync.WaitGroup
	runErr := make(chan error, 1)
	wg.Go(func() { runErr <- d.runner.Run(ctx) })
	prodCtx, stopProd := context.WithCancel(ctx)
	defer stopProd()
	wg.Go(func() { d.produce(prodCtx) })

	err = d.script(ctx, stopProd)
	cancel()
	wg.Wait()
	if rerr := <-runErr; err == nil {
		err = rerr
	}
	kin.Stop()
	ddb.Stop()
	d.say("emulators stopped")
	return errors.Join(err, d.verdict())
}

// script runs the timeline and prints progress every 3 s.
func (d *demo) script(ctx context.Context, stopProducing func()) error {
	tick := time.NewTicker(3 * time.Second)
	defer tick.Stop()
	step := 0
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			d.progress()
		case <-time.After(100 * time.Millisecond):
		}
		el := time.Since(d.begin)
		switch {
		case step == 0 && el >= d.tl.split:
			step++
			if err := d.split(ctx); err != nil {
				return err
			}
		case step == 1 && el >= d.tl.kill:
			step++
			d.mu.Lock()
			d.killShard = "shardId-000000000001"
			d.mu.Unlock()
			d.say("arming a crash: the loop of shardId-000000000001 dies in the middle of its next batch")
		case step == 2 && el >= d.tl.merge:
			step++
			if err := d.merge(ctx); err != nil {
				return err
			}
		case step == 3 && el >= d.tl.stopProducing:
			step++
			stopProducing()
			d.say("producer stopped; waiting for every record to be delivered")
		case step == 4 && (d.drained() || el >= d.tl.deadline):
			d.progress()
			return nil
		}
	}
}

func (d *demo) drained() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.seen) >= d.produced
}

func (d *demo) progress() {
	d.mu.Lock()
	produced, unique, dups := d.produced, len(d.seen), d.dups
	d.mu.Unlock()
	var open, closed int
	if ls, err := shards.List(context.Background(), d.kc, d.stream); err == nil {
		for _, s := range ls {
			if s.Closed() {
				closed++
			} else {
				open++
			}
		}
	}
	var loops []string
	for _, l := range d.runner.Loops() {
		if !l.Done {
			loops = append(loops, fmt.Sprintf("%s→%s", strings.TrimPrefix(l.ShardID, "shardId-0000000000"), l.Owner[len(l.Owner)-6:]))
		}
	}
	d.say("produced %d, delivered %d unique (%d dup) | shards %d open, %d closed | loops %s",
		produced, unique, dups, open, closed, strings.Join(loops, " "))
}

// produce writes keyed records, each key at most once per request, waiting
// for every answer, so that each key's records are in the stream in the
// order of their counter.
func (d *demo) produce(ctx context.Context) {
	counters := make([]int, d.keys)
	per := max(1, d.rate/5) // five requests a second
	k := 0
	for ctx.Err() == nil {
		var entries []ktypes.PutRecordsRequestEntry
		for range min(per, d.keys) {
			key := fmt.Sprintf("key-%02d", k)
			entries = append(entries, ktypes.PutRecordsRequestEntry{
				PartitionKey: aws.String(key),
				Data:         []byte(fmt.Sprintf("%s:%06d", key, counters[k])),
			})
			counters[k]++
			k = (k + 1) % d.keys
		}
		out, err := d.kc.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(d.stream), Records: entries})
		if err != nil || aws.ToInt32(out.FailedRecordCount) > 0 {
			// Nothing of a failed request counts as produced; roll back the
			// counters so that each key stays contiguous.
			for range entries {
				k = (k - 1 + d.keys) % d.keys
				counters[k]--
			}
			if ctx.Err() == nil {
				d.log.Warn("put failed; retrying", "err", err)
			}
		} else {
			d.mu.Lock()
			d.produced += len(entries)
			d.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// handle is the sample target: it records what it receives and checks each
// key's order. When a crash is armed for its shard, it records half the batch
// and then kills its own loop, as a process dying mid-batch would.
func (d *demo) handle(_ context.Context, b reader.Batch) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(b.Records)
	crash := d.killShard != "" && b.ShardID == d.killShard && n >= 2
	if crash {
		n /= 2
	}
	for _, r := range b.Records[:n] {
		key, ctr, ok := parseDemo(r.Data)
		if !ok {
			continue
		}
		id := key + ":" + strconv.Itoa(ctr)
		d.seen[id]++
		if d.seen[id] > 1 {
			d.dups++
			continue
		}
		if ctr != d.next[key] {
			d.orderBad[key] = true
		}
		d.next[key] = ctr + 1
	}
	if crash {
		d.killShard = ""
		owner := d.runner.Kill(d.stream, b.ShardID)
		d.killed = owner
		d.say("killed loop %s of %s after delivering %d of %d records; its lease expires in 10 s and a new owner takes over after the checkpoint",
			owner, b.ShardID, n, len(b.Records))
		return n, errors.New("killed")
	}
	return n, nil
}

func parseDemo(data []byte) (string, int, bool) {
	key, num, ok := strings.Cut(string(data), ":")
	if !ok {
		return "", 0, false
	}
	n, err := strconv.Atoi(num)
	return key, n, err == nil
}

func (d *demo) split(ctx context.Context) error {
	ls, err := shards.List(ctx, d.kc, d.stream)
	if err != nil {
		return err
	}
	s := ls[0]
	lo, _ := new(big.Int).SetString(s.HashKeyStart, 10)
	hi, _ := new(big.Int).SetString(s.HashKeyEnd, 10)
	mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
	if _, err := d.kc.SplitShard(ctx, &kinesis.SplitShardInput{
		StreamName: aws.String(d.stream), ShardToSplit: aws.String(s.ID), NewStartingHashKey: aws.String(mid.String()),
	}); err != nil {
		return fmt.Errorf("split %s: %w", s.ID, err)
	}
	d.say("split %s: its children open once it is read to SHARD_END", s.ID)
	return nil
}

func (d *demo) merge(ctx context.Context) error {
	ls, err := shards.List(ctx, d.kc, d.stream)
	if err != nil {
		return err
	}
	var kids []shards.Shard
	for _, s := range ls {
		if !s.Closed() && s.ParentID != "" && s.AdjacentParentID == "" {
			kids = append(kids, s)
		}
	}
	if len(kids) != 2 {
		return fmt.Errorf("merge: found %d open children of the split, want 2", len(kids))
	}
	if _, err := d.kc.MergeShards(ctx, &kinesis.MergeShardsInput{
		StreamName: aws.String(d.stream), ShardToMerge: aws.String(kids[0].ID), AdjacentShardToMerge: aws.String(kids[1].ID),
	}); err != nil {
		return fmt.Errorf("merge %s and %s: %w", kids[0].ID, kids[1].ID, err)
	}
	d.say("merged %s and %s: their child opens once both are read to SHARD_END", kids[0].ID, kids[1].ID)
	return nil
}

// verdict prints the last line, computed from what the handler received.
func (d *demo) verdict() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	lost := d.produced - len(d.seen)
	order := "ok"
	if len(d.orderBad) > 0 {
		order = fmt.Sprintf("BROKEN for %d keys", len(d.orderBad))
	}
	fmt.Fprintf(d.w, "demo: produced %d, delivered %d unique (%d duplicates), lost %d, per-key order %s\n",
		d.produced, len(d.seen), d.dups, lost, order)
	if lost != 0 || len(d.orderBad) > 0 {
		return errors.New("the demo found lost or reordered records")
	}
	return nil
}
