package sim

import (
	"math/big"
	"slices"
	"strings"

	"github.com/shardloop/shardloop/pkg/shards"
)

// midHashKey is the middle of a hash key range (decimal strings), for a
// split.
func midHashKey(lo, hi string) string {
	a, _ := new(big.Int).SetString(lo, 10)
	b, _ := new(big.Int).SetString(hi, 10)
	m := new(big.Int).Add(a, b)
	return m.Rsh(m, 1).Add(m, big.NewInt(1)).String()
}

// sortByHash orders shards by the start of their hash key range.
func sortByHash(ss []shards.Shard) {
	slices.SortFunc(ss, func(x, y shards.Shard) int {
		a, _ := new(big.Int).SetString(x.HashKeyStart, 10)
		b, _ := new(big.Int).SetString(y.HashKeyStart, 10)
		return a.Cmp(b)
	})
}

// sortRecs orders records by sequence number (the model's have one length).
func sortRecs(rs []*rec) {
	slices.SortFunc(rs, func(a, b *rec) int { return strings.Compare(a.seq, b.seq) })
}
