package kinesismem

import (
	"crypto/md5"
	"encoding/binary"
	"math/big"
)

// hashKey is a 128-bit hash key, the space partition keys are mapped into.
type hashKey struct{ hi, lo uint64 }

var maxHashKey = hashKey{^uint64(0), ^uint64(0)}

func (a hashKey) cmp(b hashKey) int {
	switch {
	case a.hi < b.hi:
		return -1
	case a.hi > b.hi:
		return 1
	case a.lo < b.lo:
		return -1
	case a.lo > b.lo:
		return 1
	}
	return 0
}

// next returns a+1; callers never pass maxHashKey.
func (a hashKey) next() hashKey {
	if a.lo == ^uint64(0) {
		return hashKey{a.hi + 1, 0}
	}
	return hashKey{a.hi, a.lo + 1}
}

// prev returns a-1; callers never pass zero.
func (a hashKey) prev() hashKey {
	if a.lo == 0 {
		return hashKey{a.hi - 1, ^uint64(0)}
	}
	return hashKey{a.hi, a.lo - 1}
}

func (a hashKey) big() *big.Int {
	b := new(big.Int).SetUint64(a.hi)
	b.Lsh(b, 64)
	return b.Or(b, new(big.Int).SetUint64(a.lo))
}

func (a hashKey) String() string { return a.big().String() }

func fromBig(b *big.Int) hashKey {
	lo := new(big.Int).And(b, new(big.Int).SetUint64(^uint64(0)))
	return hashKey{new(big.Int).Rsh(b, 64).Uint64(), lo.Uint64()}
}

// parseHashKey reads a decimal hash key as Kinesis accepts it: digits
// without a sign or leading zeros, at most 2^128-1.
func parseHashKey(s string) (hashKey, bool) {
	if !isDecimal(s) || len(s) > 39 {
		return hashKey{}, false
	}
	b, ok := new(big.Int).SetString(s, 10)
	if !ok || b.BitLen() > 128 {
		return hashKey{}, false
	}
	return fromBig(b), true
}

// isDecimal matches Kinesis's pattern for hash keys and sequence numbers,
// 0|([1-9]\d*).
func isDecimal(s string) bool {
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// partitionHash maps a partition key to its hash key: the MD5 of its UTF-8
// bytes read as a big-endian 128-bit integer, as Kinesis does.
func partitionHash(key string) hashKey {
	sum := md5.Sum([]byte(key))
	return hashKey{binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:])}
}

// uniformRanges divides the hash key space into n ranges as CreateStream
// and UpdateShardCount do: range i starts at i*floor(2^128/n); the last one
// ends at 2^128-1.
func uniformRanges(n int) [][2]hashKey {
	space := new(big.Int).Lsh(big.NewInt(1), 128)
	width := new(big.Int).Div(space, big.NewInt(int64(n)))
	out := make([][2]hashKey, n)
	for i := range n {
		start := new(big.Int).Mul(width, big.NewInt(int64(i)))
		out[i][0] = fromBig(start)
		if i > 0 {
			out[i-1][1] = out[i][0].prev()
		}
	}
	out[n-1][1] = maxHashKey
	return out
}
