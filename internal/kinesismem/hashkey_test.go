package kinesismem

import (
	"math/big"
	"testing"
	"time"
)

func TestParseHashKey_AcceptsKinesisDecimalsOnly(t *testing.T) {
	for s, ok := range map[string]bool{
		"0": true, "1": true, "340282366920938463463374607431768211455": true,
		"340282366920938463463374607431768211456": false, "": false, "01": false, "-1": false, "+1": false,
		"1e3": false, " 1": false, "1_000": false,
	} {
		h, got := parseHashKey(s)
		if got != ok {
			t.Errorf("parseHashKey(%q) ok = %v, want %v", s, got, ok)
		}
		if ok && h.String() != s {
			t.Errorf("parseHashKey(%q) = %s", s, h)
		}
	}
}

func TestUniformRanges_CoverTheSpaceLikeCreateStream(t *testing.T) {
	for n := 1; n <= 9; n++ {
		rs := uniformRanges(n)
		width := new(big.Int).Div(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(int64(n)))
		for i, r := range rs {
			if want := new(big.Int).Mul(width, big.NewInt(int64(i))); r[0].big().Cmp(want) != 0 {
				t.Errorf("n=%d range %d starts at %s, want %s", n, i, r[0], want)
			}
			if i > 0 && rs[i-1][1].next() != r[0] {
				t.Errorf("n=%d: gap between ranges %d and %d", n, i-1, i)
			}
		}
		if rs[n-1][1] != maxHashKey || rs[0][0] != (hashKey{}) {
			t.Errorf("n=%d: ranges span %s..%s", n, rs[0][0], rs[n-1][1])
		}
	}
}

func TestPartitionHash_IsTheMD5AsABigEndianInteger(t *testing.T) {
	// md5("a") = 0cc175b9c0f1b6a831c399e269772661
	want, _ := new(big.Int).SetString("0cc175b9c0f1b6a831c399e269772661", 16)
	if got := partitionHash("a").big(); got.Cmp(want) != 0 {
		t.Errorf("partitionHash(a) = %s, want %s", got, want)
	}
}

func TestSeq_RoundTripsAndRefusesOtherShapes(t *testing.T) {
	s := formatSeq(123456789, 7, 42)
	if len(s) != 56 {
		t.Fatalf("len %d", len(s))
	}
	if got, ok := parseSeq(s); !ok || got != (seqNum{n: 123456789, stream: 7, shard: 42}) {
		t.Errorf("parseSeq(%s) = %+v %v", s, got, ok)
	}
	for _, bad := range []string{"49680733265160311871623896521311608789572726207872499714"[:55], "9223372036854775807", "12x", ""} {
		if _, ok := parseSeq(bad); ok {
			t.Errorf("parseSeq(%q) accepted", bad)
		}
	}
}

func TestTokens_RoundTripAndRefuseDamage(t *testing.T) {
	it := iterator{stream: 3, shard: 9, after: 1 << 40, issued: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	s := it.encode()
	if got, ok := decodeIterator(s); !ok || got != it {
		t.Errorf("decodeIterator = %+v %v, want %+v", got, ok, it)
	}
	damaged := []byte(s)
	damaged[10] ^= 1
	for _, bad := range []string{string(damaged), "AAAA", "", s[:len(s)-4]} {
		if _, ok := decodeIterator(bad); ok {
			t.Errorf("decodeIterator(%q) accepted", bad)
		}
	}
	tok := listToken{Stream: 2, After: "shardId-000000000004", FilterType: "AT_TIMESTAMP", FilterTime: it.issued, Issued: it.issued}
	if got, ok := decodeListToken(tok.encode()); !ok || got != tok {
		t.Errorf("decodeListToken = %+v %v", got, ok)
	}
	if _, ok := decodeListToken("not-a-token"); ok {
		t.Error("decodeListToken accepted a made-up token")
	}
}

func TestCheckSeq_RefusesNumbersOutsideTheShardsRange(t *testing.T) {
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := &stream{id: 1, name: "s", counter: 10}
	sh := &shard{index: 0, start: 3, end: 8, closed: true}
	for n, ok := range map[uint64]bool{2: false, 3: true, 8: true, 9: false, 0: false} {
		if _, err := c.checkSeq(st, sh, formatSeq(n, 1, 0)); (err == nil) != ok {
			t.Errorf("counter %d: err = %v, want ok %v", n, err, ok)
		}
	}
	if _, err := c.checkSeq(st, sh, formatSeq(11, 1, 0)); err == nil {
		t.Error("a number not issued yet was accepted")
	}
}
