package kinesismem

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"time"
)

// iterator is what a shard iterator string carries: the position after
// which the next GetRecords reads, and when the iterator was issued. The
// string is opaque to callers, like Kinesis's, and carries a checksum so a
// damaged or invented one is refused rather than misread.
type iterator struct {
	stream uint64
	shard  int
	after  uint64 // read records whose counter is greater than this
	issued time.Time
}

const (
	iteratorVersion = 1
	iteratorLen     = 1 + 8 + 4 + 8 + 8
)

func checksum(b []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("kinesismem"))
	_, _ = h.Write(b)
	return h.Sum64()
}

func (it iterator) encode() string {
	b := make([]byte, iteratorLen, iteratorLen+8)
	b[0] = iteratorVersion
	binary.BigEndian.PutUint64(b[1:], it.stream)
	binary.BigEndian.PutUint32(b[9:], uint32(it.shard))
	binary.BigEndian.PutUint64(b[13:], it.after)
	binary.BigEndian.PutUint64(b[21:], uint64(it.issued.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, checksum(b))
	// As base64.StdEncoding.EncodeToString(b), encoded on the stack: every
	// GetRecords answer carries a new iterator.
	var enc [(iteratorLen + 8 + 2) / 3 * 4]byte // StdEncoding.EncodedLen(len(b))
	base64.StdEncoding.Encode(enc[:], b)
	return string(enc[:])
}

func decodeIterator(s string) (iterator, bool) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != iteratorLen+8 || b[0] != iteratorVersion ||
		binary.BigEndian.Uint64(b[iteratorLen:]) != checksum(b[:iteratorLen]) {
		return iterator{}, false
	}
	return iterator{
		stream: binary.BigEndian.Uint64(b[1:]),
		shard:  int(binary.BigEndian.Uint32(b[9:])),
		after:  binary.BigEndian.Uint64(b[13:]),
		issued: time.Unix(0, int64(binary.BigEndian.Uint64(b[21:]))).UTC(),
	}, true
}

// listToken is what a ListShards NextToken carries: the listing to resume
// (stream, filter) and where, and when it was issued (tokens expire after
// 300 s, as Kinesis's do).
type listToken struct {
	Stream     uint64    `json:"s"`
	After      string    `json:"a"` // last shard id returned
	FilterType string    `json:"f,omitempty"`
	FilterID   string    `json:"i,omitempty"`
	FilterTime time.Time `json:"t,omitzero"`
	Issued     time.Time `json:"at"`
}

func (t listToken) encode() string {
	b, _ := json.Marshal(t) // a struct of strings and times always marshals
	b = binary.BigEndian.AppendUint64(b, checksum(b))
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeListToken(s string) (listToken, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 9 {
		return listToken{}, false
	}
	body := b[:len(b)-8]
	if binary.BigEndian.Uint64(b[len(b)-8:]) != checksum(body) {
		return listToken{}, false
	}
	var t listToken
	if json.Unmarshal(body, &t) != nil {
		return listToken{}, false
	}
	return t, true
}
