package main

import (
	"strings"
	"testing"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

func TestPrintStatus_ShowsOwnerExpiryAndCheckpoint(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	rows := []lease.Lease{
		{ShardID: "shardId-000000000000", Checkpoint: lease.ShardEnd},
		{ShardID: "shardId-000000000001", Owner: "o1", Expiry: now.Add(7 * time.Second), Checkpoint: "42"},
		{ShardID: "shardId-000000000002", Owner: "o2", Expiry: now.Add(-3 * time.Second), ParentShardIDs: []string{"shardId-000000000000"}},
	}
	var b strings.Builder
	printStatus(&b, rows, now)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("got %d lines, want a header and 3 rows:\n%s", len(lines), b.String())
	}
	for i, want := range [][]string{
		{"SHARD", "PARENTS", "OWNER", "EXPIRY", "CHECKPOINT"},
		{"shardId-000000000000", "-", "SHARD_END"},
		{"shardId-000000000001", "o1", "in 7s", "42"},
		{"shardId-000000000002", "shardId-000000000000", "o2", "expired 3s ago", "-"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}
}
