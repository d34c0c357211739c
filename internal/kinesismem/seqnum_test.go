package kinesismem

import (
	"fmt"
	"math"
	"testing"
)

func TestFormatSeq_IsTheDocumentedPatternAndParsesBack(t *testing.T) {
	for _, c := range []struct {
		n, stream uint64
		shard     int
	}{{0, 0, 0}, {1, 1, 0}, {1234567, 3, 12}, {math.MaxUint64, 999999999999999, 1<<31 - 1}} {
		got := formatSeq(c.n, c.stream, c.shard)
		if want := fmt.Sprintf(seqFormatStr, c.n, c.stream, c.shard); got != want {
			t.Errorf("formatSeq(%d, %d, %d) = %s, want %s", c.n, c.stream, c.shard, got, want)
		}
		if p, ok := parseSeq(got); !ok || p.n != c.n || p.stream != c.stream || p.shard != c.shard {
			t.Errorf("parseSeq(%s) = %+v, %v", got, p, ok)
		}
	}
}
