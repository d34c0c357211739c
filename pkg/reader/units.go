package reader

import (
	"bytes"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// kplMagic starts every record the Kinesis Producer Library aggregated.
var kplMagic = []byte{0xF3, 0x89, 0x9A, 0xC2}

// IsAggregated reports whether data is a KPL-aggregated record.
func IsAggregated(data []byte) bool { return bytes.HasPrefix(data, kplMagic) }

// unit is what settles as one: a Kinesis record, or every user record of a
// de-aggregated one. Checkpoints, lanes, bisection and giving up work on
// units.
type unit struct {
	kin  types.Record   // the Kinesis record
	recs []types.Record // what the target gets
	subs []Sub          // nil for a plain record
	ckpt string         // the checkpoint once this unit (and all before it) settled
	n    int            // Kinesis records it stands for: itself and the aggregated records passed after it
	idx  int            // its entry in the run's ledger
}

func (u unit) seq() string { return aws.ToString(u.kin.SequenceNumber) }

func (u unit) key() string { return aws.ToString(u.kin.PartitionKey) }

// size is what a unit weighs against the read limits: data and partition
// key, as Kinesis counts it.
func (u unit) size() int { return recordSize(u.kin) }

func recordSize(r types.Record) int { return len(r.Data) + len(aws.ToString(r.PartitionKey)) }

// units turns what one read returned into units. Records that are not
// delivered (matching none of the filters; aggregated with de-aggregation
// off, or corrupt: reported) are passed: ckpt of the unit before the next
// deliverable one covers them. It also returns how many leading records no
// unit covers, before the first unit.
func (r *run) units(records []types.Record) (us []unit, lead int) {
	us = make([]unit, 0, len(records))
	for i, rec := range records {
		seq := aws.ToString(rec.SequenceNumber)
		switch {
		case !IsAggregated(rec.Data):
			if !r.passes(rec) {
				r.filteredOut(1) // consumed: passed like a skipped record
				break
			}
			us = append(us, unit{kin: rec, recs: records[i : i+1 : i+1]})
		case r.o.Deaggregate:
			urs, err := Deaggregate(rec.Data)
			if err != nil {
				r.aggregated(seq, err)
				break
			}
			if len(urs) == 0 {
				break // an empty aggregate: nothing to deliver
			}
			u := unit{kin: rec, recs: make([]types.Record, len(urs)), subs: make([]Sub, len(urs))}
			for j, ur := range urs {
				u.recs[j] = types.Record{
					Data: ur.Data, PartitionKey: aws.String(ur.PartitionKey), SequenceNumber: rec.SequenceNumber,
					ApproximateArrivalTimestamp: rec.ApproximateArrivalTimestamp, EncryptionType: rec.EncryptionType,
				}
				u.subs[j] = Sub{Aggregated: true, SubSequenceNumber: int64(j), ExplicitHashKey: ur.ExplicitHashKey}
			}
			if u = r.filterSubs(u); len(u.recs) == 0 {
				break // every user record filtered out
			}
			us = append(us, u)
		default:
			r.aggregated(seq, nil)
		}
		if len(us) == 0 {
			lead++
			continue
		}
		us[len(us)-1].ckpt = seq
		us[len(us)-1].n++
	}
	return us, lead
}

func (r *run) aggregated(seq string, err error) {
	e := &AggregatedRecordError{Stream: r.in.Stream, ShardID: r.in.ShardID, Seq: seq, Err: err}
	r.log.Error("aggregated record skipped; checkpoint moves past it", "seq", seq, "err", e)
	r.o.Hooks.AggregatedRecord(e)
}

// batch is what the target gets for us.
func (r *run) batch(us []unit) Batch {
	b := Batch{Stream: r.in.Stream, StreamARN: r.in.StreamARN, ShardID: r.in.ShardID}
	n := 0
	for _, u := range us {
		n += len(u.recs)
	}
	if n > 0 {
		b.Records = make([]types.Record, 0, n) // made once, not grown unit by unit
	}
	subs := false
	for _, u := range us {
		b.Records = append(b.Records, u.recs...)
		subs = subs || u.subs != nil
	}
	if subs {
		b.Subs = make([]Sub, 0, len(b.Records))
		for _, u := range us {
			if u.subs != nil {
				b.Subs = append(b.Subs, u.subs...)
			} else {
				b.Subs = append(b.Subs, Sub{})
			}
		}
	}
	return b
}

// settledUnits is how many leading units n settled records cover whole, and
// how many records they hold.
func settledUnits(us []unit, n int) (units, records int) {
	for _, u := range us {
		if records+len(u.recs) > n {
			break
		}
		records += len(u.recs)
		units++
	}
	return units, records
}
