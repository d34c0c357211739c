package kinesismem

import (
	"fmt"
	"strconv"
)

// A sequence number is 56 decimal digits, the length of Kinesis's own:
// "49", then the stream's sequence counter (24 digits), the stream's id in
// this Client (15) and the shard's index (15). The counter comes first, so
// comparing two numbers as integers (or as strings: they have one length)
// orders them by arrival across the whole stream; the shard is encoded so a
// number used on another shard is refused, as Kinesis refuses it.
const (
	seqPrefix    = "49"
	seqCounterW  = 24
	seqStreamW   = 15
	seqShardW    = 15
	seqLen       = len(seqPrefix) + seqCounterW + seqStreamW + seqShardW
	seqFormatStr = seqPrefix + "%024d%015d%015d"
)

type seqNum struct {
	n      uint64 // the stream's counter
	stream uint64
	shard  int
}

func formatSeq(n, stream uint64, shard int) string {
	// As fmt.Sprintf(seqFormatStr, ...), without fmt: a read formats every
	// record it returns.
	var b [seqLen]byte
	copy(b[:], seqPrefix)
	putDigits(b[len(seqPrefix):len(seqPrefix)+seqCounterW], n)
	putDigits(b[len(seqPrefix)+seqCounterW:len(seqPrefix)+seqCounterW+seqStreamW], stream)
	putDigits(b[len(seqPrefix)+seqCounterW+seqStreamW:], uint64(shard))
	return string(b[:])
}

// putDigits writes v in decimal into b, right-aligned and zero-padded.
func putDigits(b []byte, v uint64) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
}

// parseSeq decodes a sequence number this package issued. ok is false for
// anything else, including well-formed decimals of another shape.
func parseSeq(s string) (seqNum, bool) {
	if len(s) != seqLen || s[:len(seqPrefix)] != seqPrefix || !isDecimal(s) {
		return seqNum{}, false
	}
	i := len(seqPrefix)
	n, err1 := strconv.ParseUint(s[i:i+seqCounterW], 10, 64)
	i += seqCounterW
	st, err2 := strconv.ParseUint(s[i:i+seqStreamW], 10, 64)
	i += seqStreamW
	sh, err3 := strconv.ParseUint(s[i:], 10, 31)
	if err1 != nil || err2 != nil || err3 != nil {
		return seqNum{}, false
	}
	return seqNum{n: n, stream: st, shard: int(sh)}, true
}

func shardID(index int) string { return fmt.Sprintf("shardId-%012d", index) }
