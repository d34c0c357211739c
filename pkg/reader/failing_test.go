package reader

import (
	"strings"
	"testing"

	"github.com/shardloop/shardloop/pkg/lease"
)

func TestMergeRowFailures(t *testing.T) {
	row := encodeFailures(map[string]Failure{
		"10": {FailingSeq: "10", FailingLast: "12", FailedAttempts: 3},
		"20": {FailingSeq: "20", FailingLast: "20", FailedAttempts: 1},
		"5":  {FailingSeq: "5", FailingLast: "6", FailedAttempts: 9},
	})
	cases := []struct {
		name    string
		carried map[string]Failure
		row     string
		eff     string
		want    map[string]int // attempts by FailingSeq
	}{
		{"a fresh loop takes the row's, after the checkpoint", map[string]Failure{}, row, "8",
			map[string]int{"10": 3, "20": 1}},
		{"nothing checkpointed: all of them", map[string]Failure{}, row, "",
			map[string]int{"5": 9, "10": 3, "20": 1}},
		{"the state counted more: it stays", map[string]Failure{"10": {FailingSeq: "10", FailedAttempts: 4}}, row, "8",
			map[string]int{"10": 4, "20": 1}},
		{"the row counted more: it wins", map[string]Failure{"20": {FailingSeq: "20", FailedAttempts: 0}}, row, "8",
			map[string]int{"10": 3, "20": 1}},
		{"SHARD_END: none", map[string]Failure{}, row, lease.ShardEnd, map[string]int{}},
		{"unreadable: none", map[string]Failure{}, "{not json", "", map[string]int{}},
		{"empty: none", map[string]Failure{}, "", "", map[string]int{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mergeRowFailures(c.carried, c.row, c.eff)
			got := map[string]int{}
			for seq, f := range c.carried {
				got[seq] = f.FailedAttempts
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for seq, n := range c.want {
				if got[seq] != n {
					t.Fatalf("got %v, want %v", got, c.want)
				}
			}
		})
	}
}

func TestEncodeFailures_FitsTheRow(t *testing.T) {
	by := map[string]Failure{}
	for i := range 40 {
		seq := strings.Repeat("1", 50) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		by[seq] = Failure{FailingSeq: seq, FailingLast: seq, FailedAttempts: i, FailedError: strings.Repeat("e", MaxFailedError)}
	}
	s := encodeFailures(by)
	if len(s) > lease.MaxFailing || len(s) == 0 {
		t.Fatalf("encoded %d bytes, want 1 to %d", len(s), lease.MaxFailing)
	}
	if fs := decodeFailures(s); len(fs) != 40 || fs[0].FailedError != "" {
		t.Fatalf("decoded %d failures (first error %q): want all 40, their errors left out", len(fs), fs[0].FailedError)
	}
	if encodeFailures(nil) != "" {
		t.Fatal("no failures: want the empty string")
	}
}
