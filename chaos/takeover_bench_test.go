package chaos_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardloop/shardloop/internal/emulators"
	"github.com/shardloop/shardloop/internal/quiet"
	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/shards"
)

// crashSample is one shard of a runner killed with -9, taken over by a
// survivor: seconds from the kill to the survivor's first delivery.
type crashSample struct {
	Round     int     `json:"round"`
	Survivors int     `json:"survivors"`
	Shard     string  `json:"shard"`
	After     float64 `json:"after"`
}

// runnerProc is one `shardloop run` process and what it printed.
type runnerProc struct {
	cmd  *exec.Cmd
	done chan struct{}

	mu    sync.Mutex
	first map[string][]time.Time // shard -> when each delivery line was read
}

// deliveredAfter returns the first delivery of shard read at or after at.
func (p *runnerProc) deliveredAfter(shard string, at time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.first[shard] {
		if !t.Before(at) {
			return t, true
		}
	}
	return time.Time{}, false
}

// BenchmarkTakeoverCrash measures how soon a crashed runner's shards are
// read again while a producer writes: `shardloop run` processes at every
// default (10 s lease, 3 s renewals and heartbeats, looks every 500 ms, the
// print target) share a dynalite lease table over 12 kinesis-local shards,
// one record per shard a second flowing; once they have divided the shards
// and delivered for 10 s more, one of them is killed with SIGKILL (kill -9:
// nothing released, no heartbeat removed) at a random moment. Six rounds, each on a fresh stream
// and table: 2, 3 and 4 runners (1, 2 and 3 survivors), twice. A sample is
// one shard the killed runner held: from the kill to the first record of it
// a survivor printed (read from its stdout as it came).
// SHARDLOOP_BENCH_ROUNDS=1 runs the first round only; SHARDLOOP_BENCH_LOGS
// names a folder to keep the runners' logs in.
func BenchmarkTakeoverCrash(b *testing.B) {
	const nShards = 12
	guard := quiet.Begin(b, "takeover_crash_producing_p99_s")
	bin := buildShardloop(b)
	kinProc, ddbProc, kc, dc := startLocalEndpoints(b, "SHARD_LIMIT=1000")
	env := append(os.Environ(), "AWS_ENDPOINT_URL_KINESIS="+kinProc.Endpoint, "AWS_ENDPOINT_URL_DYNAMODB="+ddbProc.Endpoint,
		"AWS_REGION="+testaws.Region, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true")
	rng := rand.New(rand.NewPCG(defaultSeed, 20))
	var samples []crashSample
	rounds := []int{2, 3, 4, 2, 3, 4}
	if os.Getenv("SHARDLOOP_BENCH_ROUNDS") == "1" {
		rounds = rounds[:1]
	}
	for round, runners := range rounds {
		stream, table := fmt.Sprintf("crash-%d", round), fmt.Sprintf("crash-%d-leases", round)
		ss := newStream(b, kc, dc, stream, table, nShards)
		store, err := lease.NewDynamoStore(dc, table)
		if err != nil {
			b.Fatal(err)
		}
		ctx, stop := context.WithCancel(b.Context())
		go produceEvery(ctx, kc, stream, ss, time.Second)
		began := time.Now()
		var procs []*runnerProc
		for range runners {
			procs = append(procs, startRunnerProc(b, bin, env, stream, table))
		}
		// Settled: every shard held, the shares even, each shard printed.
		if !waitUntil(ctx, 90*time.Second, func() bool { return divided(ctx, store, stream, runners, nShards) && allPrinted(procs, ss, began) }) {
			b.Fatalf("round %d: %d runners did not divide and read the %d shards within 90 s", round, runners, nShards)
		}
		// In steady state (no handoff being pursued: a runner below its share
		// passes at every look for a while after a change), at any moment of
		// the renewals.
		time.Sleep(10*time.Second + time.Duration(rng.Int64N(int64(3*time.Second))))
		victim := procs[rng.IntN(len(procs))]
		held := heldByPID(ctx, b, store, stream, victim.cmd.Process.Pid)
		at := time.Now()
		if err := victim.cmd.Process.Kill(); err != nil { // SIGKILL
			b.Fatal(err)
		}
		<-victim.done
		for _, shard := range held {
			var first time.Time
			if !waitUntil(ctx, 90*time.Second, func() bool {
				first = time.Time{}
				for _, p := range procs {
					if p == victim {
						continue
					}
					if t, ok := p.deliveredAfter(shard, at); ok && (first.IsZero() || t.Before(first)) {
						first = t
					}
				}
				return !first.IsZero()
			}) {
				b.Errorf("round %d: %s of the killed runner not read by a survivor within 90 s", round, shard)
				continue
			}
			samples = append(samples, crashSample{Round: round, Survivors: runners - 1, Shard: shard, After: first.Sub(at).Seconds()})
		}
		b.Logf("round %d: %d runners, killed pid %d holding %d shards; taken over after %v", round, runners, victim.cmd.Process.Pid, len(held),
			afterOf(samples, round))
		for _, p := range procs {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		stop()
	}
	if len(samples) < 20 {
		b.Fatalf("only %d takeovers measured", len(samples))
	}
	var all []float64
	for _, s := range samples {
		all = append(all, s.After)
	}
	writeData(b, "takeover-crash", samples)
	guard.Check(b)
	fmt.Printf("bench takeover_crash_producing_p99_s %.2f s (%d shards of runners killed with -9 while records flowed, 1-3 survivors, 12 shards; p50 %.2f s, max %.2f s; 10 s lease)\n",
		quantile(all, 0.99), len(all), quantile(all, 0.5), quantile(all, 1))
	b.ReportMetric(quantile(all, 0.99), "p99_s")
}

func afterOf(ss []crashSample, round int) []string {
	var after []float64
	for _, s := range ss {
		if s.Round == round {
			after = append(after, s.After)
		}
	}
	slices.Sort(after)
	out := make([]string, len(after))
	for i, a := range after {
		out[i] = fmt.Sprintf("%.2fs", a)
	}
	return out
}

// divided reports whether every shard's row names one of the runners, at
// most one apart.
func divided(ctx context.Context, store *lease.DynamoStore, stream string, runners, nShards int) bool {
	rows, err := store.List(ctx, stream)
	if err != nil {
		return false
	}
	count := map[string]int{}
	for _, r := range rows {
		if r.Owner != "" {
			count[lease.OwnerRunner(r.Owner)]++
		}
	}
	lo, hi, total := nShards, 0, 0
	for _, n := range count {
		lo, hi, total = min(lo, n), max(hi, n), total+n
	}
	return len(count) == runners && total == nShards && hi-lo <= 1
}

// allPrinted reports whether some runner printed a record of every shard
// since began.
func allPrinted(procs []*runnerProc, ss []shards.Shard, began time.Time) bool {
	for _, s := range ss {
		ok := false
		for _, p := range procs {
			if _, d := p.deliveredAfter(s.ID, began); d {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// heldByPID lists the shards whose rows name the runner running as pid (by
// its heartbeat row).
func heldByPID(ctx context.Context, b *testing.B, store *lease.DynamoStore, stream string, pid int) []string {
	b.Helper()
	hs, err := store.Runners(ctx, stream)
	if err != nil {
		b.Fatal(err)
	}
	id := ""
	for _, h := range hs {
		if h.PID == pid {
			id = h.Runner
		}
	}
	if id == "" {
		b.Fatalf("no heartbeat row of pid %d", pid)
	}
	rows, err := store.List(ctx, stream)
	if err != nil {
		b.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		if lease.OwnerRunner(r.Owner) == id {
			out = append(out, r.ShardID)
		}
	}
	return out
}

// startRunnerProc starts `shardloop run` with the print target and reads
// its stdout: each line "<time> <shard id> <seq> key=… data=…" is one
// record delivered, timed as it is read.
func startRunnerProc(b *testing.B, bin string, env []string, stream, table string) *runnerProc {
	b.Helper()
	cmd := exec.Command(bin, "run", "--stream", stream, "--table", table, "--start", "horizon")
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	dir := os.Getenv("SHARDLOOP_BENCH_LOGS") // to keep the runners' logs
	if dir == "" {
		dir = b.TempDir()
	}
	logs, err := os.CreateTemp(dir, "runner-*.log")
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = logs
	p := &runnerProc{cmd: cmd, done: make(chan struct{}), first: map[string][]time.Time{}}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); <-p.done; logs.Close() })
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 3 || !strings.HasPrefix(f[1], "shardId-") {
				continue
			}
			now := time.Now()
			p.mu.Lock()
			if ts := p.first[f[1]]; len(ts) == 0 || now.Sub(ts[len(ts)-1]) > 100*time.Millisecond {
				p.first[f[1]] = append(ts, now) // one time per burst keeps the list short
			}
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
	}()
	return p
}

// buildShardloop builds cmd/shardloop once for the benchmark.
func buildShardloop(b *testing.B) string {
	b.Helper()
	out := filepath.Join(b.TempDir(), "shardloop")
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goCmd, "build", "-o", out, "./cmd/shardloop")
	cmd.Dir = ".."
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build shardloop: %v\n%s", err, msg)
	}
	return out
}

// startLocalEndpoints is startLocal that also returns the emulators, whose
// endpoints a process started by the benchmark is given.
func startLocalEndpoints(b *testing.B, env ...string) (kin, ddb *emulators.Process, kc *kinesis.Client, dc *dynamodb.Client) {
	b.Helper()
	kin, err := emulators.Start(b.Context(), emulators.Kinesis, emulators.Options{Env: env,
		LogPath: filepath.Join(os.TempDir(), fmt.Sprintf("shardloop-bench-%s-kinesis-%d.log", b.Name(), os.Getpid()))})
	if err != nil {
		b.Fatalf("kinesis-local: %v", err)
	}
	b.Cleanup(kin.Stop)
	ddb, err = emulators.Start(b.Context(), emulators.DynamoDB, emulators.Options{})
	if err != nil {
		b.Fatalf("dynalite: %v", err)
	}
	b.Cleanup(ddb.Stop)
	return kin, ddb, kinesis.NewFromConfig(testaws.Config(kin.Endpoint)), dynamodb.NewFromConfig(testaws.Config(ddb.Endpoint))
}
