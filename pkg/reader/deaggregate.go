package reader

import (
	"bytes"
	"crypto/md5"
	"errors"
	"fmt"
)

// UserRecord is one user record of a KPL-aggregated Kinesis record.
type UserRecord struct {
	PartitionKey    string
	ExplicitHashKey string // empty when the record has none
	Data            []byte
}

// Deaggregate decodes a KPL-aggregated record: the magic F3 89 9A C2, a
// protobuf AggregatedRecord, and the MD5 of the protobuf bytes. It returns
// the user records in order (their index is their sub-sequence number). An
// error (a bad checksum, a malformed message, a key index out of range)
// matches ErrAggregatedRecord.
//
// The format (amazon-kinesis-producer's aggregation-format.md):
//
//	message AggregatedRecord {
//	  repeated string partition_key_table     = 1;
//	  repeated string explicit_hash_key_table = 2;
//	  repeated Record records                 = 3;
//	}
//	message Record {
//	  required uint64 partition_key_index     = 1;
//	  optional uint64 explicit_hash_key_index = 2;
//	  required bytes  data                    = 3;
//	  repeated Tag    tags                    = 4;
//	}
func Deaggregate(data []byte) ([]UserRecord, error) {
	if !IsAggregated(data) {
		return nil, aggErr("no KPL magic prefix")
	}
	if len(data) < len(kplMagic)+md5.Size {
		return nil, aggErr("shorter than its magic and checksum")
	}
	msg, sum := data[len(kplMagic):len(data)-md5.Size], data[len(data)-md5.Size:]
	if got := md5.Sum(msg); !bytes.Equal(got[:], sum) {
		return nil, aggErr("MD5 checksum does not match")
	}
	var pks, ehks []string
	type raw struct {
		pk, ehk uint64
		hasPK   bool
		hasEHK  bool
		data    []byte
		hasData bool
	}
	var recs []raw
	err := fields(msg, func(num int, v uint64, b []byte) error {
		switch num {
		case 1:
			pks = append(pks, string(b))
		case 2:
			ehks = append(ehks, string(b))
		case 3:
			var r raw
			if err := fields(b, func(num int, v uint64, b []byte) error {
				switch num {
				case 1:
					r.pk, r.hasPK = v, true
				case 2:
					r.ehk, r.hasEHK = v, true
				case 3:
					r.data, r.hasData = b, true
				}
				return nil
			}); err != nil {
				return err
			}
			recs = append(recs, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]UserRecord, len(recs))
	for i, r := range recs {
		if !r.hasPK || !r.hasData {
			return nil, aggErr(fmt.Sprintf("user record %d lacks its partition key index or data", i))
		}
		if r.pk >= uint64(len(pks)) {
			return nil, aggErr(fmt.Sprintf("user record %d: partition key index %d out of %d", i, r.pk, len(pks)))
		}
		out[i] = UserRecord{PartitionKey: pks[r.pk], Data: r.data}
		if r.hasEHK {
			if r.ehk >= uint64(len(ehks)) {
				return nil, aggErr(fmt.Sprintf("user record %d: explicit hash key index %d out of %d", i, r.ehk, len(ehks)))
			}
			out[i].ExplicitHashKey = ehks[r.ehk]
		}
	}
	return out, nil
}

func aggErr(why string) error {
	return fmt.Errorf("reader: corrupt KPL aggregate: %s: %w", why, ErrAggregatedRecord)
}

var errTruncated = errors.New("truncated")

// fields walks the protobuf fields of msg, calling f with the field number
// and either the varint value (wire type 0) or the bytes (wire type 2);
// fixed-width fields are skipped.
func fields(msg []byte, f func(num int, v uint64, b []byte) error) error {
	for len(msg) > 0 {
		key, n := uvarint(msg)
		if n <= 0 {
			return aggErr("bad field key")
		}
		msg = msg[n:]
		num, wire := int(key>>3), key&7
		if num <= 0 {
			return aggErr("bad field number")
		}
		var v uint64
		var b []byte
		switch wire {
		case 0:
			if v, n = uvarint(msg); n <= 0 {
				return aggErr("bad varint")
			}
			msg = msg[n:]
		case 1, 5:
			w := 8
			if wire == 5 {
				w = 4
			}
			if len(msg) < w {
				return aggErr(errTruncated.Error())
			}
			msg = msg[w:]
			continue
		case 2:
			l, n := uvarint(msg)
			if n <= 0 || l > uint64(len(msg)-n) {
				return aggErr("bad length")
			}
			b, msg = msg[n:n+int(l)], msg[n+int(l):]
		default:
			return aggErr(fmt.Sprintf("unsupported wire type %d", wire))
		}
		if err := f(num, v, b); err != nil {
			return err
		}
	}
	return nil
}

// uvarint decodes a protobuf varint; n <= 0 when it is malformed.
func uvarint(b []byte) (v uint64, n int) {
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}
