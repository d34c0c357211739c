package main

import (
	"strings"
	"testing"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

func TestPrintStatus_ShowsOwnerExpiryCheckpointLagAndPendingStart(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	rows := []lease.Lease{
		{ShardID: "shardId-000000000000", Checkpoint: lease.ShardEnd},
		{ShardID: "shardId-000000000001", Owner: "o1", Expiry: now.Add(7 * time.Second), Checkpoint: "42", MillisBehind: 1234, LagAt: now.Add(-time.Second)},
		{ShardID: "shardId-000000000002", Owner: "o2", Expiry: now.Add(-3 * time.Second), ParentShardIDs: []string{"shardId-000000000000"}},
		{ShardID: "shardId-000000000003", Checkpoint: "7", MillisBehind: 3_723_456, LagAt: now.Add(-5 * time.Minute), Start: "horizon", StartApplied: false},
	}
	var b strings.Builder
	printStatus(&b, rows, now)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("got %d lines, want a header and 4 rows:\n%s", len(lines), b.String())
	}
	for i, want := range [][]string{
		{"SHARD", "PARENTS", "OWNER", "EXPIRY", "CHECKPOINT", "LAG", "OPENS AT"},
		{"shardId-000000000000", "-", "SHARD_END"},
		{"shardId-000000000001", "o1", "in 7s", "42", "1.2s"},
		{"shardId-000000000002", "shardId-000000000000", "o2", "expired 3s ago", "-"},
		{"shardId-000000000003", "7", "1h2m3s (5m0s ago)", "horizon"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}
}

func TestPrintStatus_UnknownLagIsADash(t *testing.T) {
	var b strings.Builder
	printStatus(&b, []lease.Lease{{ShardID: "s0", Checkpoint: "1"}}, time.Now())
	if got := column(strings.Split(strings.TrimSpace(b.String()), "\n"), "LAG"); got != "-" {
		t.Fatalf("LAG of a row without a recorded lag = %q, want -", got)
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
