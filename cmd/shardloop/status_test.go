package main

import (
	"context"
	"encoding/json"
	"io"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/shards"
)

// line returns the status line of a shard.
func line(t *testing.T, out, shardID string) string {
	t.Helper()
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, shardID+" ") {
			return l
		}
	}
	t.Fatalf("no line for %s in\n%s", shardID, out)
	return ""
}

func TestPrintStatus_ShowsOwnerExpiryCheckpointLagPendingStartAndState(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	listing := []shards.Shard{
		{ID: "shardId-000000000000", EndingSequence: "99"},
		{ID: "shardId-000000000001"},
		{ID: "shardId-000000000002", ParentID: "shardId-000000000000"},
		{ID: "shardId-000000000003"},
		{ID: "shardId-000000000004", EndingSequence: "99"},
		{ID: "shardId-000000000005", ParentID: "shardId-000000000004"},
		{ID: "shardId-000000000006"},
		{ID: "shardId-000000000007"},
	}
	rows := []lease.Lease{
		{ShardID: "shardId-000000000007", Owner: "o7", Expiry: now.Add(5 * time.Second), Revoked: true, Start: "horizon"},
		{ShardID: "shardId-000000000000", Checkpoint: lease.ShardEnd},
		{ShardID: "shardId-000000000001", Owner: "o1", Expiry: now.Add(7 * time.Second), Checkpoint: "42", MillisBehind: 1234, LagAt: now.Add(-time.Second)},
		{ShardID: "shardId-000000000002", Owner: "o2", Expiry: now.Add(-3 * time.Second), ParentShardIDs: []string{"shardId-000000000000"}},
		{ShardID: "shardId-000000000003", Checkpoint: "7", MillisBehind: 3_723_456, LagAt: now.Add(-5 * time.Minute), Start: "horizon"},
		{ShardID: "shardId-000000000004", Owner: "o4", Expiry: now.Add(5 * time.Second), Checkpoint: "12"},
		{ShardID: "shardId-000000000009", ParentShardIDs: []string{"shardId-000000000008"}}, // trimmed
	}
	var b strings.Builder
	printStatus(&b, statusViews(listing, rows, now), now)
	out := b.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 10 {
		t.Fatalf("got %d lines, want a header and 9 rows:\n%s", len(lines), out)
	}
	for _, h := range []string{"SHARD", "PARENTS", "OWNER", "EXPIRY", "CHECKPOINT", "LAG", "OPENS AT", "STATE"} {
		if !strings.Contains(lines[0], h) {
			t.Errorf("header %q lacks %s", lines[0], h)
		}
	}
	for shard, want := range map[string][]string{
		"shardId-000000000000": {"SHARD_END", "finished"},
		"shardId-000000000001": {"o1", "in 7s", "42", "1.2s", "reading"},
		"shardId-000000000002": {"shardId-000000000000", "o2", "expired 3s ago", "lease expired"},
		"shardId-000000000003": {"7", "1h2m3s (5m0s ago)", "horizon", "free"},
		"shardId-000000000005": {"shardId-000000000004", "waiting for parent shardId-000000000004", "read by o4, checkpoint 12"},
		"shardId-000000000006": {"not started"},
		"shardId-000000000007": {"o7", "horizon", "lease revoked"},
		"shardId-000000000009": {"shardId-000000000008", "gone from the stream"},
	} {
		l := line(t, out, shard)
		for _, w := range want {
			if !strings.Contains(l, w) {
				t.Errorf("%s: line %q lacks %q", shard, l, w)
			}
		}
	}
}

// With what the probe found after the checkpoint, an idle shard (nothing
// waits) and a stuck one (records wait, no checkpoint for minutes) read
// differently, though both recorded a lag of 0 with their last checkpoint.
func TestPrintStatus_IdleCaughtUpShardReadsDifferentlyFromAStuckOne(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	held := func(id string) lease.Lease {
		return lease.Lease{ShardID: id, Owner: "o-" + id, Expiry: now.Add(8 * time.Second), Checkpoint: "42", MillisBehind: 0, LagAt: now.Add(-10 * time.Minute)}
	}
	views := statusViews([]shards.Shard{{ID: "idle"}, {ID: "stuck"}, {ID: "busy"}}, []lease.Lease{held("idle"), held("stuck"), held("busy")}, now)
	views[0].Probe = &probe{CaughtUp: true}
	views[1].Probe = &probe{Oldest: now.Add(-9 * time.Minute)}
	views[2].Probe = &probe{Oldest: now.Add(-800 * time.Millisecond)}
	views[2].Row.LagAt = now.Add(-2 * time.Second)
	var b strings.Builder
	printStatus(&b, views, now)
	out := b.String()
	idle, stuck, busy := line(t, out, "idle"), line(t, out, "stuck"), line(t, out, "busy")
	for _, w := range []string{" 0s ", "caught up, idle", "last checkpoint 10m0s ago"} {
		if !strings.Contains(idle, w) {
			t.Errorf("idle line %q lacks %q", idle, w)
		}
	}
	for _, w := range []string{" 9m0s ", "behind", "last checkpoint 10m0s ago", "stuck?"} {
		if !strings.Contains(stuck, w) {
			t.Errorf("stuck line %q lacks %q", stuck, w)
		}
	}
	if !strings.Contains(busy, " 800ms ") || !strings.Contains(busy, "behind") || strings.Contains(busy, "stuck") {
		t.Errorf("a reader that checkpointed 2s ago reads %q, want behind by 800ms and not stuck", busy)
	}
}

// status against the emulators: an unknown stream or table is an error
// saying which; a child waiting on its parent says what the parent is
// doing; an idle caught-up shard and a stuck one read differently.
func TestStatus_UnknownStreamOrTableWaitingChildrenIdleAndStuckShards(t *testing.T) {
	kc, dc := testaws.Kinesis(t), testaws.Dynamo(t)
	stream, table := testaws.Name(t), testaws.Name(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	if _, err := shards.CreateIfMissing(ctx, kc, stream, 2); err != nil {
		t.Fatal(err)
	}
	if err := lease.CreateTable(ctx, dc, table); err != nil {
		t.Fatal(err)
	}
	emulatorEnv(t)

	missing := testaws.Name(t)
	err := statusCmd(ctx, []string{"--stream", missing, "--table", table}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--stream "+missing+": no such stream at http://127.0.0.1:") {
		t.Fatalf("status of a missing stream: err = %v, want one naming the stream and the endpoint", err)
	}
	err = statusCmd(ctx, []string{"--stream", stream, "--table", missing}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--table "+missing+": no such table at http://127.0.0.1:") {
		t.Fatalf("status of a missing table: err = %v, want one naming the table and the endpoint", err)
	}

	listing, err := shards.List(ctx, kc, stream)
	if err != nil || len(listing) != 2 {
		t.Fatalf("listing %v, %v", listing, err)
	}
	// Two records on each shard; then split shard 1, whose children wait.
	seqs := map[string][]string{}
	for _, s := range listing {
		for i := range 2 {
			out, err := kc.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"),
				ExplicitHashKey: aws.String(s.HashKeyStart), Data: []byte{byte('a' + i)}})
			if err != nil {
				t.Fatal(err)
			}
			if aws.ToString(out.ShardId) != s.ID {
				t.Fatalf("record went to %s, want %s", aws.ToString(out.ShardId), s.ID)
			}
			seqs[s.ID] = append(seqs[s.ID], aws.ToString(out.SequenceNumber))
		}
	}
	idle, parent := listing[0].ID, listing[1].ID
	lo, _ := new(big.Int).SetString(listing[1].HashKeyStart, 10)
	hi, _ := new(big.Int).SetString(listing[1].HashKeyEnd, 10)
	mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
	if _, err := kc.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String(stream), ShardToSplit: aws.String(parent), NewStartingHashKey: aws.String(mid.String())}); err != nil {
		t.Fatal(err)
	}
	for {
		if ls, err := shards.List(ctx, kc, stream); err == nil && len(ls) == 4 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the split's children never appeared")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The idle shard's reader checkpointed its last record, the stuck one
	// only its first; both 10 minutes ago, and both still hold their lease.
	now, err := lease.NewDynamoStore(dc, table, func(o *lease.Options) { o.Duration = 5 * time.Minute })
	if err != nil {
		t.Fatal(err)
	}
	past, err := lease.NewDynamoStore(dc, table, func(o *lease.Options) { o.Clock = func() time.Time { return time.Now().Add(-10 * time.Minute) } })
	if err != nil {
		t.Fatal(err)
	}
	for shard, ckpt := range map[string]string{idle: seqs[idle][1], parent: seqs[parent][0]} {
		if _, err := now.Take(ctx, stream, shard, "o-"+shard); err != nil {
			t.Fatal(err)
		}
		if _, err := past.Checkpoint(ctx, stream, shard, "o-"+shard, ckpt, lease.WithMillisBehind(0)); err != nil {
			t.Fatal(err)
		}
	}

	var b strings.Builder
	if err := statusCmd(ctx, []string{"--stream", stream, "--table", table}, &b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if l := line(t, out, idle); !strings.Contains(l, "caught up, idle") || !strings.Contains(l, " 0s ") {
		t.Errorf("idle shard: %q, want caught up and idle with a lag of 0s", l)
	}
	if l := line(t, out, parent); !strings.Contains(l, "behind") || !strings.Contains(l, "stuck?") {
		t.Errorf("stuck shard: %q, want behind and stuck", l)
	}
	children := 0
	for l := range strings.Lines(out) {
		if strings.Contains(l, "waiting for parent "+parent) {
			children++
			if !strings.Contains(l, "read by o-"+parent+", checkpoint") {
				t.Errorf("child line %q does not say what the parent is doing", l)
			}
		}
	}
	if children != 2 {
		t.Errorf("%d children wait for %s, want 2:\n%s", children, parent, out)
	}

	// The same facts for a script: -o json.
	var js strings.Builder
	if err := statusCmd(ctx, []string{"--stream", stream, "--table", table, "-o", "json"}, &js); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema int `json:"schema"`
		Shards []struct {
			ShardID    string `json:"shard_id"`
			State      string `json:"state"`
			WaitingFor string `json:"waiting_for"`
			CaughtUp   *bool  `json:"caught_up"`
			LagMillis  *int64 `json:"lag_ms"`
			Owner      string `json:"owner"`
			Checkpoint string `json:"checkpoint"`
		} `json:"shards"`
	}
	if err := json.Unmarshal([]byte(js.String()), &doc); err != nil || doc.Schema != StatusSchemaVersion {
		t.Fatalf("status -o json: %v, schema %d\n%s", err, doc.Schema, js.String())
	}
	waiting := 0
	for _, s := range doc.Shards {
		switch {
		case s.ShardID == idle:
			if s.State != stateReading || s.CaughtUp == nil || !*s.CaughtUp || s.LagMillis == nil || *s.LagMillis != 0 || s.Checkpoint != seqs[idle][1] || s.Owner != "o-"+idle {
				t.Errorf("idle shard in JSON: %+v", s)
			}
		case s.ShardID == parent:
			if s.State != stateReading || s.CaughtUp == nil || *s.CaughtUp || s.Checkpoint != seqs[parent][0] {
				t.Errorf("stuck shard in JSON: %+v", s)
			}
		case s.State == stateWaiting && s.WaitingFor == parent:
			waiting++
		}
	}
	if waiting != 2 {
		t.Errorf("%d children wait for %s in JSON, want 2:\n%s", waiting, parent, js.String())
	}
}

// column returns the first word under a header of a status table's first row.
func column(lines []string, header string) string {
	i := strings.Index(lines[0], header)
	if i < 0 || len(lines) < 2 || len(lines[1]) <= i {
		return ""
	}
	return strings.Fields(lines[1][i:])[0]
}

// The runners sharing the stream are listed with where they run, what the
// rows say they hold and when they last beat by their own clocks.
func TestPrintRunners_ListsEachRunnerWithItsLeasesAndLastBeat(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	hs := []lease.Heartbeat{
		{Runner: "web-1-42-aa", Host: "web-1", PID: 42, Leases: 2, Counter: 9, BeatAt: now.Add(-1200 * time.Millisecond)},
		{Runner: "web-2-43-bb", Host: "web-2", PID: 43, Leases: 1, Counter: 3, BeatAt: now.Add(30 * time.Second)},
		{Runner: "web-3-44-cc"},
	}
	rows := []lease.Lease{
		{ShardID: "s0", Owner: lease.RunnerOwner("s0-1", "web-1-42-aa") + "/run"},
		{ShardID: "s1", Owner: lease.RunnerOwner("s1-1", "web-1-42-aa")},
		{ShardID: "s2", Owner: lease.RunnerOwner("s2-1", "web-2-43-bb")},
		{ShardID: "s3"},
	}
	var b strings.Builder
	printRunners(&b, hs, rows, now)
	out := b.String()
	for runner, want := range map[string][]string{
		"web-1-42-aa": {"web-1", "42", "2 (2 at its last beat)", "1.2s ago by its clock"},
		"web-2-43-bb": {"web-2", "43", "1 (1 at its last beat)", "in 30s by its clock (clocks differ)"},
		"web-3-44-cc": {"0 (0 at its last beat)", "leaving or not yet beating"},
	} {
		l := line(t, out, runner)
		for _, w := range want {
			if !strings.Contains(l, w) {
				t.Errorf("%s: line %q lacks %q", runner, l, w)
			}
		}
	}
	b.Reset()
	printRunners(&b, nil, rows, now)
	if b.Len() != 0 {
		t.Errorf("without runners status prints %q, want nothing", b.String())
	}
}

// An expired or lapsing lease says who takes the shard over and when: the
// other runners about when a gone runner's lease lapses, the runner itself
// when it still beats, the next runner when none beats, and a deployment's
// coordinator by its watch or its scheduled passes.
func TestPrintStatus_SaysWhoTakesAShardOverAndWhen(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	owner := func(runner string) string { return lease.RunnerOwner("s-1", runner) + "/run" }
	hs := []lease.Heartbeat{
		{Runner: "alive", Counter: 9, BeatAt: now.Add(-time.Second)},
		{Runner: "alive2", Counter: 4, BeatAt: now.Add(-2 * time.Second)},
		{Runner: "silent", Counter: 7, BeatAt: now.Add(-8 * time.Second)},
	}
	listing := []shards.Shard{{ID: "lapsing"}, {ID: "expired"}, {ID: "own"}, {ID: "lambda"}, {ID: "free"}}
	rows := []lease.Lease{
		{ShardID: "lapsing", Owner: owner("silent"), Expiry: now.Add(2 * time.Second), Checkpoint: "5"},
		{ShardID: "expired", Owner: owner("gone"), Expiry: now.Add(-time.Second), Checkpoint: "5"},
		{ShardID: "own", Owner: owner("alive"), Expiry: now.Add(-time.Second), Checkpoint: "5"},
		{ShardID: "lambda", Owner: "loop-1/run", Expiry: now.Add(-time.Second), Checkpoint: "5"},
		{ShardID: "free", Checkpoint: "5"},
	}
	views := statusViews(listing, rows, now)
	for i := range views {
		if views[i].ID != "lambda" {
			views[i].Runners = hs
		}
	}
	var b strings.Builder
	printStatus(&b, views, now)
	out := b.String()
	for shard, want := range map[string][]string{
		"lapsing": {"reading", "its runner silent last beat 8s ago", "if it is gone, the 2 other runners on this table take the shard when its lease lapses, in about 2s"},
		"expired": {"lease expired", "its runner gone has no heartbeat row", "the 2 other runners on this table take the shard once they have seen its lease stand still", "about now"},
		"own":     {"its runner alive still beats and takes it again a lease after the loop's last renewal"},
		"lambda":  {"the coordinator takes the shard over", "within about a lease of the shard loop's execution failing", "second scheduled pass"},
		"free":    {"the 2 runners on this table take it at once"},
	} {
		l := line(t, out, shard)
		for _, w := range want {
			if !strings.Contains(l, w) {
				t.Errorf("%s: line %q lacks %q", shard, l, w)
			}
		}
	}
	// Nobody beating: the next runner.
	views = statusViews(listing[1:2], rows[1:2], now)
	views[0].Runners = []lease.Heartbeat{{Runner: "silent", Counter: 7, BeatAt: now.Add(-time.Minute)}}
	b.Reset()
	printStatus(&b, views, now)
	if l := line(t, b.String(), "expired"); !strings.Contains(l, "no other runner beats on this table: the next shardloop run to start takes the shard a lease after it starts") {
		t.Errorf("expired, nobody beating: %q", l)
	}
}

// A parent a new start re-opened, whose child's holder was revoked and still
// holds the lease by its own clock, is free but says what it waits for.
func TestState_ReopenedParentSaysItWaitsForTheRevokedChild(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	listing := []shards.Shard{{ID: "p", EndingSequence: "9"}, {ID: "c", ParentID: "p"}}
	rows := []lease.Lease{
		{ShardID: "p", Start: "horizon", Counter: 4},
		{ShardID: "c", Owner: "old", Revoked: true, Expiry: now.Add(5 * time.Second), Counter: 8, Start: "horizon"},
	}
	views := statusViews(listing, rows, now)
	kind, words := state(views[0], now)
	if kind != stateFree || !strings.Contains(words, "revoked holder of c") {
		t.Errorf("parent: %s, %q; want %s waiting for the revoked holder of c", kind, words, stateFree)
	}
	if kind, _ := state(views[1], now); kind != stateRevoked {
		t.Errorf("child: %s, want %s", kind, stateRevoked)
	}
}

// A parent a new start re-opened, whose child's holder released it with
// invocations that may still run (a fence), says so, not that it waits for
// a revoked holder.
func TestState_ReopenedParentSaysItWaitsForTheReleasedChildsFence(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	listing := []shards.Shard{{ID: "p", EndingSequence: "9"}, {ID: "c", ParentID: "p"}}
	rows := []lease.Lease{
		{ShardID: "p", Start: "horizon", Counter: 4},
		{ShardID: "c", Fence: 12 * time.Second, Counter: 8, Start: "horizon"},
	}
	views := statusViews(listing, rows, now)
	if views[0].Reason == nil || views[0].Reason.Kind != shards.WaitingOnDescendant {
		t.Fatalf("parent's reason %v, want it waiting on its descendant", views[0].Reason)
	}
	kind, words := state(views[0], now)
	if kind != stateFree || !strings.Contains(words, "the last holder of c") || strings.Contains(words, "revoked") {
		t.Errorf("parent: %s, %q; want %s waiting for the invocations c's last holder released with", kind, words, stateFree)
	}
}
