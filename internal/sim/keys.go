package sim

import (
	"bytes"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"time"
)

// What the function sees, per partition key, over every invocation (the
// first deliveries and the re-deliveries alike), checked at the end of the
// world (keyChecks) and, for record content, as it is delivered (content):
//
//   - no two invocations carrying one key overlap in time, whoever made
//     them (two loops, two runs of one loop, two lanes of one run): the
//     spans are the function's own, which runs each invocation to its end
//     whatever its caller does;
//   - the key's records come in order: within an invocation strictly
//     ascending; from one invocation to the next, a record before the last
//     one seen may come only first (the start of a replay), and a replay
//     then goes on in order, skipping none it had seen but those filtered
//     out, given up, or owed by no start of the generation it reads under
//     (a newer start past them overrides the checkpoint: a redeploy at
//     latest or a later timestamp ends the replay in progress);
//   - each record's content (data, partition key, sequence number, arrival
//     time, and the event's fields) is what was written.
//
// The deployments of a world share the lease table's rows (two
// configurations of one consumer, an old deploy and a new one): a key's
// invocations are judged across them.

// depKey is one key as the function sees it.
type depKey struct {
	keyKey
}

// keyDeliv is one invocation as one key's records in it.
type keyDeliv struct {
	owner      string
	start, end time.Time
	ev         uint64 // the invocation's order among those starting together
	order      int64  // the generation its run reads under
	reopening  bool   // order is older than the row's own (runTake.reopening)
	ns         []int  // the key's record numbers, in the invocation's order
	shard      *shardState
}

// keyDelivery notes, under mu, the records of each key an invocation
// carried (all of them: settled or not, the function saw them).
func (c *checker) keyDelivery(dep, owner string, seqs []string, start, end time.Time, order int64, reopening bool) {
	if c.byKey == nil {
		c.byKey = map[depKey][]keyDeliv{}
	}
	c.ev++
	ev := c.ev
	// The invocation's entry of each key it carries: a key's slice in
	// byKey grows only when its entry is made, so the pointer holds for
	// this invocation. The map is the checker's, emptied for each.
	if c.kdIdx == nil {
		c.kdIdx = map[keyKey]*keyDeliv{}
	}
	idx := c.kdIdx
	clear(idx)
	for _, seq := range seqs {
		x := c.bySeq[seq]
		if x == nil {
			continue
		}
		dk := depKey{keyKey{x.inc, x.key}}
		d, ok := idx[dk.keyKey]
		if !ok {
			ds := append(c.byKey[dk], keyDeliv{owner: owner, start: start, end: end, ev: ev, order: order, reopening: reopening, shard: x.shard})
			c.byKey[dk] = ds
			d = &ds[len(ds)-1]
			idx[dk.keyKey] = d
		}
		d.ns = append(d.ns, x.n)
	}
}

// keyChecks runs the per-key checks over every invocation; the caller
// holds mu. Each key is reported once at most, for each check.
func (c *checker) keyChecks() {
	keys := slices.SortedFunc(func(yield func(depKey) bool) {
		for k := range c.byKey {
			if !yield(k) {
				return
			}
		}
	}, func(a, b depKey) int {
		if a.inc != b.inc {
			return a.inc - b.inc
		}
		return a.key - b.key
	})
	for _, dk := range keys {
		ds := c.byKey[dk]
		slices.SortStableFunc(ds, func(a, b keyDeliv) int {
			if c := a.start.Compare(b.start); c != 0 {
				return c
			}
			return int(a.ev) - int(b.ev)
		})
		c.keyOverlap(dk, ds)
		c.keyOrder(dk, ds)
	}
}

// keyOverlap: no two invocations carrying the key overlap in time.
func (c *checker) keyOverlap(dk depKey, ds []keyDeliv) {
	var last *keyDeliv
	for i := range ds {
		d := &ds[i]
		if last != nil && d.start.Before(last.end) {
			c.failBug(d.shard.key, either(genBug(d, last), either(d.shard.bug, last.shard.bug)), "key %d: %s's invocation from %s overlaps %s's, which ran from %s until %s",
				dk.key, c.tr.nameLocked(d.owner), fmtTime(d.start), c.tr.nameLocked(last.owner), fmtTime(last.start), fmtTime(last.end))
			return
		}
		if last == nil || d.end.After(last.end) {
			last = d
		}
	}
}

// keyOrder: the key's records come in order over every invocation, a
// replay starting only at an invocation's first record of the key and
// then going on in order.
func (c *checker) keyOrder(dk depKey, ds []keyDeliv) {
	xs := c.keys[dk.keyKey]
	hi, next := -1, 0    // the highest record seen; the one expected next
	var newest *keyDeliv // of the latest generation seen
	for i := range ds {
		d := &ds[i]
		if newest != nil && d.order < newest.order && !d.reopening {
			c.failBug(d.shard.key, staleGeneration, "key %d: %s delivered records #%d… under generation %d from %s, after %s had begun delivering them under generation %d",
				dk.key, c.tr.nameLocked(d.owner), d.ns[0], d.order, fmtTime(d.start), c.tr.nameLocked(newest.owner), newest.order)
			return
		}
		if newest == nil || d.order > newest.order {
			newest = d
		}
		for j, m := range d.ns {
			switch {
			case m < next && j > 0:
				c.failBug(d.shard.key, d.shard.bug, "key %d: %s delivered record #%d after #%d in one invocation", dk.key, c.tr.nameLocked(d.owner), m, next-1)
				return
			case m > next:
				// Records skipped that the function had seen (a replay
				// in progress) must be ones it is not owed again: under
				// the generation d reads under, as firstDelivery judges.
				for y := next; y < min(m, hi+1); y++ {
					if y < len(xs) && !exempt(xs[y]) && c.ruleAt(xs[y].shard, d.order).owes(xs[y]) {
						c.failBug(d.shard.key, either(d.shard.bug, xs[y].shard.bug), "key %d: %s's replay went from record #%d to #%d, skipping #%d (%s), which it had delivered before",
							dk.key, c.tr.nameLocked(d.owner), next-1, m, y, short(xs[y].seq))
						return
					}
				}
			}
			hi, next = max(hi, m), m+1
		}
	}
}

// staleGeneration was the known bug of a loop of a superseded generation
// that still delivers (its invocations run on, or it has not yet heard of
// its revocation) while a loop of the new one replays the same keys, on
// another shard of the key (a parent the new start re-opened while the
// child's old holder still reads). It is fixed (a re-opened shard waits
// until its descendants' revoked leases and fences have passed: see
// shards.WaitingOnDescendant); the name stays so that a regression says
// which bug came back.
const staleGeneration = "B6"

// genBug is staleGeneration when two invocations ran under different
// generations, else "".
func genBug(a, b *keyDeliv) string {
	if a.order != b.order {
		return staleGeneration
	}
	return ""
}

// exempt reports whether a replay may skip x: it matches no filter, or was
// given up (under the policy, to the destination).
func exempt(x *rec) bool {
	if x.filtered {
		return true
	}
	for _, st := range x.settles {
		if st.givenUp {
			return true
		}
	}
	return false
}

// seenRecord is one record as the function saw it.
type seenRecord struct {
	seq, pk   string
	data      []byte
	arrivalMs int64
}

// content checks that each record the function saw is the record written
// under its sequence number: its data, partition key and arrival time.
func (c *checker) content(dep, shardID string, rs []seenRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range rs {
		x := c.bySeq[r.seq]
		if x == nil {
			continue // the delivery's own check reports it
		}
		var what string
		switch {
		case r.pk != "k"+strconv.Itoa(x.key):
			what = "partition key " + strconv.Quote(r.pk)
		case !bytes.Equal(r.data, c.recordData(x)):
			what = "data " + strconv.Quote(string(r.data))
		case r.arrivalMs != x.arrival.UnixMilli():
			what = "arrival " + fmtTime(time.UnixMilli(r.arrivalMs))
		default:
			continue
		}
		c.fail(x.shard.key, "%s: the function got record %s (key %d #%d) with %s, not as written", dep, short(r.seq), x.key, x.n, what)
		return
	}
}

// recordData is the data of x as written, in c.want (valid until the
// next call, under mu).
func (c *checker) recordData(x *rec) []byte {
	c.want = appendRecordData(c.want[:0], x.key, x.n, c.quotedPad)
	return c.want
}

// The fields of a Kinesis event for Lambda that the function reads, each
// as the prefix its values follow and the bytes that end them (see
// valuesAfter), in the order of eventFields.
const (
	fSeq = iota
	fPK
	fData
	fID
	fARN
	fArrival
	fFixed // the first of the fields of fixedValues
)

var eventFields = []scanField{
	fSeq:       {`"sequenceNumber":"`, `"`},
	fPK:        {`"partitionKey":"`, `"`},
	fData:      {`"data":"`, `"`},
	fID:        {`"eventID":"`, `"`},
	fARN:       {`"eventSourceARN":"`, `"`},
	fArrival:   {`"approximateArrivalTimestamp":`, ",}"},
	fFixed:     {`"eventSource":"`, `"`},
	fFixed + 1: {`"eventVersion":"`, `"`},
	fFixed + 2: {`"eventName":"`, `"`},
	fFixed + 3: {`"kinesisSchemaVersion":"`, `"`},
	fFixed + 4: {`"awsRegion":"`, `"`},
}

// fixedValues is the one value each field from fFixed on has in every
// record.
var fixedValues = []string{"aws:kinesis", "1.0", "aws:kinesis:record", "1.0", "us-east-1"}

// scanEvent reads the fields of eventFields from a Kinesis event for
// Lambda, in one walk of it: each value as the bytes of payload it is.
// Every record of the event has one eventID.
func scanEvent(payload []byte) [][][]byte {
	return eventScanner.spans(payload, bytes.Count(payload, []byte(eventFields[fID].prefix)))
}

var eventScanner = newScanner(eventFields...)

// eventRecords reads the records of a Kinesis event for Lambda (as
// reader.LambdaTarget writes it) and checks its per-record fields; bad
// names the first field that is wrong ("" when none).
func eventRecords(payload []byte, shardID, stream string) (rs []seenRecord, bad string) {
	fs := scanEvent(payload)
	seqs := make([]string, len(fs[fSeq]))
	for i, v := range fs[fSeq] {
		seqs[i] = string(v)
	}
	return checkEvent(fs, seqs, shardID, stream)
}

// checkEvent is eventRecords on the fields scanEvent read, seqs those of
// fSeq as strings.
func checkEvent(fs [][][]byte, seqs []string, shardID, stream string) (rs []seenRecord, bad string) {
	pks, data, ids, arns := fs[fPK], fs[fData], fs[fID], fs[fARN]
	n := len(seqs)
	if len(pks) != n || len(data) != n || len(ids) != n || len(arns) != n || len(fs[fArrival]) != n {
		return nil, "a field missing from some records"
	}
	for i, want := range fixedValues {
		f := fFixed + i
		vs := fs[f]
		if len(vs) != n {
			return nil, eventFields[f].prefix + " missing"
		}
		for _, v := range vs {
			if string(v) != want {
				return nil, eventFields[f].prefix + string(v)
			}
		}
	}
	arnEnd := []byte(":stream/" + stream)
	rs = make([]seenRecord, n)
	for i := range n {
		d := make([]byte, base64.StdEncoding.DecodedLen(len(data[i])))
		m, err := base64.StdEncoding.Decode(d, data[i])
		switch id := ids[i]; {
		case err != nil:
			return nil, "data not base64: " + string(data[i])
		case len(id) != len(shardID)+1+len(seqs[i]) || string(id[:len(shardID)]) != shardID || id[len(shardID)] != ':' || string(id[len(shardID)+1:]) != seqs[i]:
			// id is not shardID + ":" + seqs[i]
			return nil, "eventID " + string(id)
		case !bytes.HasSuffix(arns[i], arnEnd):
			return nil, "eventSourceARN " + string(arns[i])
		}
		rs[i] = seenRecord{seq: seqs[i], pk: string(pks[i]), data: d[:m], arrivalMs: secondsToMs(string(fs[fArrival][i]))}
	}
	return rs, ""
}

func secondsToMs(s string) int64 {
	whole, frac, _ := strings.Cut(s, ".")
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || len(frac) > 3 {
		return -1
	}
	ms := int64(0)
	if frac != "" {
		f, err := strconv.ParseInt((frac + "00")[:3], 10, 64)
		if err != nil {
			return -1
		}
		ms = f
	}
	return sec*1000 + ms
}
