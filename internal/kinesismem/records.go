package kinesismem

import (
	"context"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/middleware"
)

// entry is one record to put, checked.
type entry struct {
	key  string
	data []byte
	hash hashKey
	size int // data plus partition key, what the limits count
}

func (c *Client) checkEntry(key string, data []byte, explicit *string) (entry, error) {
	if n := utf8.RuneCountInString(key); n < 1 || n > 256 {
		return entry{}, invalid("Partition key must be between 1 and 256 in length, got %d", n)
	}
	e := entry{key: key, data: data, size: len(data) + len(key)}
	if e.size > MaxRecordSize {
		return entry{}, invalid("Record size %d (data and partition key) exceeds the stream's max record size of %d bytes", e.size, MaxRecordSize)
	}
	if explicit != nil {
		h, ok := parseHashKey(*explicit)
		if !ok {
			return entry{}, invalid("ExplicitHashKey %q is not valid: want a decimal from 0 to 2^128-1", *explicit)
		}
		e.hash = h
	} else {
		e.hash = c.partitionHash(key)
	}
	return e, nil
}

// maxHashCache bounds the partition keys whose hashes a Client keeps.
const maxHashCache = 1 << 16

// partitionHash is partitionHash(key), kept for the first maxHashCache
// keys: producers mostly write a set of keys over and over, and every
// record put hashes its key. The caller holds c.mu.
func (c *Client) partitionHash(key string) hashKey {
	if h, ok := c.hashes[key]; ok {
		return h
	}
	h := partitionHash(key)
	if len(c.hashes) < maxHashCache {
		if c.hashes == nil {
			c.hashes = map[string]hashKey{}
		}
		c.hashes[key] = h
	}
	return h
}

// writable returns a stream that takes writes: ACTIVE or UPDATING.
func (c *Client) writable(name, arn *string) (*stream, error) {
	st, err := c.stream(name, arn)
	if err != nil {
		return nil, err
	}
	if st.status != types.StreamStatusActive && st.status != types.StreamStatusUpdating {
		return nil, inUse("Stream %s is not currently ACTIVE or UPDATING.", st.arn)
	}
	return st, nil
}

// put appends e to its shard, or reports the shard throttled.
func (c *Client) put(st *stream, e entry, now time.Time) (*shard, string, bool) {
	sh := st.route(e.hash)
	if !c.opts.NoWriteLimits {
		if !sh.writeRecords.available(now, WriteRecordsPerSecond, 1) || !sh.writeSize.available(now, WriteBytesPerSecond, 0) {
			return sh, "", false
		}
		sh.writeRecords.take(1)
		sh.writeSize.take(float64(e.size))
	}
	st.trim(sh, now)
	n := st.next()
	seq := st.seq(sh, n)
	sh.recs = append(sh.recs, record{n: n, arrival: millis(now), key: e.key, data: append([]byte(nil), e.data...), seq: seq})
	return sh, seq, true
}

func (c *Client) throttledWrite(st *stream, sh *shard) string {
	return "Rate exceeded for shard " + sh.id + " in stream " + st.name + " under account " + c.opts.Account + "."
}

// PutRecord writes one record to the open shard whose hash key range holds
// its ExplicitHashKey or the MD5 of its partition key. Beyond a shard's
// write limit it fails with *types.ProvisionedThroughputExceededException.
// SequenceNumberForOrdering is checked and needs nothing more: every
// sequence number is greater than all earlier ones of the stream.
func (c *Client) PutRecord(ctx context.Context, in *kinesis.PutRecordInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordOutput, error) {
	if in == nil {
		in = &kinesis.PutRecordInput{}
	}
	out := &kinesis.PutRecordOutput{}
	err := c.do(ctx, "PutRecord", func(now time.Time) (*middleware.Metadata, error) {
		st, err := c.writable(in.StreamName, in.StreamARN)
		if err != nil {
			return nil, err
		}
		if s := in.SequenceNumberForOrdering; s != nil && !isDecimal(*s) {
			return nil, invalid("SequenceNumberForOrdering %q is not valid: want a decimal", *s)
		}
		e, err := c.checkEntry(aws.ToString(in.PartitionKey), in.Data, in.ExplicitHashKey)
		if err != nil {
			return nil, err
		}
		sh, seq, ok := c.put(st, e, now)
		if !ok {
			return nil, throttled("%s", c.throttledWrite(st, sh))
		}
		out.ShardId, out.SequenceNumber, out.EncryptionType = aws.String(sh.id), aws.String(seq), types.EncryptionTypeNone
		return &out.ResultMetadata, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PutRecords writes 1 to 500 records (at most 10 MiB with their partition
// keys) in request order. A record beyond its shard's write limit fails
// alone, with ErrorCode ProvisionedThroughputExceededException, and the
// records after it are still tried, as on Kinesis.
func (c *Client) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	if in == nil {
		in = &kinesis.PutRecordsInput{}
	}
	out := &kinesis.PutRecordsOutput{}
	err := c.do(ctx, "PutRecords", func(now time.Time) (*middleware.Metadata, error) {
		st, err := c.writable(in.StreamName, in.StreamARN)
		if err != nil {
			return nil, err
		}
		if n := len(in.Records); n < 1 || n > MaxPutRecordsEntries {
			return nil, invalid("Records has %d entries: want 1 to %d", n, MaxPutRecordsEntries)
		}
		es := make([]entry, len(in.Records))
		total := 0
		for i, r := range in.Records {
			if es[i], err = c.checkEntry(aws.ToString(r.PartitionKey), r.Data, r.ExplicitHashKey); err != nil {
				return nil, err
			}
			total += es[i].size
		}
		if total > MaxPutRecordsSize {
			return nil, invalid("Records total %d bytes with their partition keys: want at most %d", total, MaxPutRecordsSize)
		}
		out.Records = make([]types.PutRecordsResultEntry, len(es))
		ids := make([]string, 2*len(es)) // each entry's ShardId and SequenceNumber, in one allocation
		failed := int32(0)
		for i, e := range es {
			sh, seq, ok := c.put(st, e, now)
			if !ok {
				failed++
				out.Records[i] = types.PutRecordsResultEntry{
					ErrorCode:    aws.String("ProvisionedThroughputExceededException"),
					ErrorMessage: aws.String(c.throttledWrite(st, sh)),
				}
				continue
			}
			ids[2*i], ids[2*i+1] = sh.id, seq
			out.Records[i] = types.PutRecordsResultEntry{ShardId: &ids[2*i], SequenceNumber: &ids[2*i+1]}
		}
		out.FailedRecordCount, out.EncryptionType = aws.Int32(failed), types.EncryptionTypeNone
		return &out.ResultMetadata, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetShardIterator places an iterator on a shard (open or closed) for one
// of the five iterator types. AT_TIMESTAMP finds the first record whose
// ApproximateArrivalTimestamp is at or after Timestamp (on the millisecond
// grain); a Timestamp later than the server's clock is refused, as Kinesis
// refuses it. Beyond 5 calls a second on a shard it fails with
// *types.ProvisionedThroughputExceededException.
func (c *Client) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	if in == nil {
		in = &kinesis.GetShardIteratorInput{}
	}
	out := &kinesis.GetShardIteratorOutput{}
	err := c.do(ctx, "GetShardIterator", func(now time.Time) (*middleware.Metadata, error) {
		it, err := c.getShardIterator(now, in)
		if err != nil {
			return nil, err
		}
		out.ShardIterator = aws.String(it.encode())
		return &out.ResultMetadata, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *Client) getShardIterator(now time.Time, in *kinesis.GetShardIteratorInput) (iterator, error) {
	if in.DryRun != nil && *in.DryRun {
		return iterator{}, invalid("DryRun is not modelled")
	}
	st, err := c.stream(in.StreamName, in.StreamARN)
	if err != nil {
		return iterator{}, err
	}
	typ := in.ShardIteratorType
	seq := in.StartingSequenceNumber
	switch typ {
	case types.ShardIteratorTypeAtSequenceNumber, types.ShardIteratorTypeAfterSequenceNumber:
		if seq == nil {
			return iterator{}, invalid("Must either specify (1) AT_SEQUENCE_NUMBER or AFTER_SEQUENCE_NUMBER and StartingSequenceNumber or (2) TRIM_HORIZON or LATEST and no StartingSequenceNumber. Request specified %s and no StartingSequenceNumber.", typ)
		}
	case types.ShardIteratorTypeTrimHorizon, types.ShardIteratorTypeLatest, types.ShardIteratorTypeAtTimestamp:
		if seq != nil {
			return iterator{}, invalid("Must either specify (1) AT_SEQUENCE_NUMBER or AFTER_SEQUENCE_NUMBER and StartingSequenceNumber or (2) TRIM_HORIZON or LATEST and no StartingSequenceNumber. Request specified %s and also a StartingSequenceNumber.", typ)
		}
		if typ == types.ShardIteratorTypeAtTimestamp && in.Timestamp == nil {
			return iterator{}, invalid("Must specify timestampInMillis parameter for iterator of type AT_TIMESTAMP. Current request has no timestamp parameter.")
		}
	default:
		return iterator{}, invalid("ShardIteratorType %q is not valid: want AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER, TRIM_HORIZON, LATEST or AT_TIMESTAMP", typ)
	}
	id := aws.ToString(in.ShardId)
	sh, err := c.lookupShard(st, id, now)
	if err != nil {
		return iterator{}, err
	}
	if !c.opts.NoReadLimits && !sh.getIterator.allow(now, GetShardIteratorPerSecond) {
		return iterator{}, throttled("Rate exceeded for shard %s in stream %s under account %s.", sh.id, st.name, c.opts.Account)
	}
	st.trim(sh, now)
	it := iterator{stream: st.id, shard: sh.index, issued: now}
	switch typ {
	case types.ShardIteratorTypeTrimHorizon:
		it.after = sh.start
	case types.ShardIteratorTypeLatest:
		it.after = st.counter
	case types.ShardIteratorTypeAtTimestamp:
		ts, nowMs := millis(*in.Timestamp), millis(now)
		if ts.After(nowMs) {
			return iterator{}, invalid("The timestampInMillis parameter cannot be greater than the currentTimestampInMillis. timestampInMillis: %d, currentTimestampInMillis: %d", ts.UnixMilli(), nowMs.UnixMilli())
		}
		i := sort.Search(len(sh.recs), func(i int) bool { return !sh.recs[i].arrival.Before(ts) })
		if i < len(sh.recs) {
			it.after = sh.recs[i].n - 1
		} else {
			it.after = st.counter
		}
	default:
		n, err := c.checkSeq(st, sh, *seq)
		if err != nil {
			return iterator{}, err
		}
		it.after = n
		if typ == types.ShardIteratorTypeAtSequenceNumber {
			it.after = n - 1
		}
	}
	return it, nil
}

// checkSeq returns the counter of a sequence number given for shard sh.
func (c *Client) checkSeq(st *stream, sh *shard, s string) (uint64, error) {
	if !isDecimal(s) || len(s) > 129 {
		return 0, invalid("StartingSequenceNumber %s used in GetShardIterator on shard %s in stream %s under account %s is invalid.", s, sh.id, st.name, c.opts.Account)
	}
	sq, ok := parseSeq(s)
	switch {
	case !ok || sq.stream != st.id || sq.n > st.counter:
		return 0, invalid("StartingSequenceNumber %s used in GetShardIterator on shard %s in stream %s under account %s is invalid because it did not come from this stream.", s, sh.id, st.name, c.opts.Account)
	case sq.shard != sh.index:
		return 0, invalid("Invalid StartingSequenceNumber. It encodes %s, while it was used in a call to a shard with %s", shardID(sq.shard), sh.id)
	case sq.n < sh.start || (sh.closed && sq.n > sh.end):
		return 0, invalid("StartingSequenceNumber %s used in GetShardIterator on shard %s in stream %s under account %s is invalid: it is outside the shard's sequence number range.", s, sh.id, st.name, c.opts.Account)
	}
	return sq.n, nil
}

// GetRecords reads from an iterator: up to Limit records (1 to 10,000,
// default 10,000) and at most 10 MiB of data, though always the next
// record if there is one. At the end of a closed shard NextShardIterator is
// nil and ChildShards names its children, in the same answer as its last
// records. MillisBehindLatest is the arrival time of the shard's newest
// record less that of the last record returned, 0 when none are left (as
// kinesis-local computes it).
//
// Errors: *types.ExpiredIteratorException for an iterator issued more than
// 5 minutes ago; *types.ProvisionedThroughputExceededException beyond 5
// calls a second on a shard or when the shard's 2 MiB/s of reads is spent
// (a 10 MiB answer blocks the next reads for about 4 s);
// *types.InvalidArgumentException for an iterator this Client did not
// issue; *types.ResourceNotFoundException once its stream or shard is gone.
func (c *Client) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	if in == nil {
		in = &kinesis.GetRecordsInput{}
	}
	out := &kinesis.GetRecordsOutput{}
	err := c.do(ctx, "GetRecords", func(now time.Time) (*middleware.Metadata, error) {
		return &out.ResultMetadata, c.getRecords(now, in, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *Client) getRecords(now time.Time, in *kinesis.GetRecordsInput, out *kinesis.GetRecordsOutput) error {
	if in.DryRun != nil && *in.DryRun {
		return invalid("DryRun is not modelled")
	}
	limit := MaxGetRecordsLimit
	if in.Limit != nil {
		limit = int(*in.Limit)
	}
	if limit < 1 || limit > MaxGetRecordsLimit {
		return invalid("Limit must be between 1 and %d, got %d", MaxGetRecordsLimit, limit)
	}
	it, ok := decodeIterator(aws.ToString(in.ShardIterator))
	if !ok {
		return invalid("Invalid ShardIterator.")
	}
	st := c.byID[it.stream]
	if in.StreamARN != nil {
		named, err := c.stream(nil, in.StreamARN)
		if err != nil {
			return err
		}
		if named != st {
			return invalid("ShardIterator is not of stream %s", *in.StreamARN)
		}
	}
	if st == nil {
		return notFound("The stream of this ShardIterator no longer exists.")
	}
	if it.shard >= len(st.shards) {
		return invalid("Invalid ShardIterator.")
	}
	sh := st.shards[it.shard]
	if st.expired(sh, now) {
		return notFound("Shard %s in stream %s under account %s does not exist", sh.id, st.name, c.opts.Account)
	}
	if now.Sub(it.issued) > IteratorLifetime {
		return &types.ExpiredIteratorException{Message: msg("Iterator expired. The iterator was created at time %s while right now it is %s which is further in the future than the tolerated delay of %d milliseconds.",
			it.issued.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano), IteratorLifetime.Milliseconds())}
	}
	if !c.opts.NoReadLimits {
		if !sh.readBytes.available(now, ReadBytesPerSecond, 0) || !sh.getRecords.allow(now, GetRecordsPerSecond) {
			return throttled("Rate exceeded for Shard - %s in stream %s under account %s.", sh.id, st.name, c.opts.Account)
		}
	}
	st.trim(sh, now)
	i := sort.Search(len(sh.recs), func(i int) bool { return sh.recs[i].n > it.after })
	j, size := i, 0
	for j < len(sh.recs) && j-i < limit && (j == i || size+len(sh.recs[j].data) <= MaxGetRecordsSize) {
		size += len(sh.recs[j].data)
		j++
	}
	if !c.opts.NoReadLimits {
		sh.readBytes.take(float64(size))
	}
	out.Records = make([]types.Record, j-i)
	// The answer's copies of the records' data, keys, sequence numbers and
	// arrival times are made in one allocation of each kind, not four a
	// record: a reader's every poll comes here. Each record's Data is capped
	// at its own end, so an append to it cannot write over the next one's.
	data := make([]byte, 0, size)
	strs := make([]string, 2*(j-i))
	times := make([]time.Time, j-i)
	for k, r := range sh.recs[i:j] {
		var d []byte // nil for empty data, as a copy of it was
		if len(r.data) > 0 {
			data = append(data, r.data...)
			d = data[len(data)-len(r.data) : len(data) : len(data)]
		}
		strs[2*k], strs[2*k+1], times[k] = r.key, r.seq, r.arrival
		out.Records[k] = types.Record{
			Data:                        d,
			PartitionKey:                &strs[2*k],
			SequenceNumber:              &strs[2*k+1],
			ApproximateArrivalTimestamp: &times[k],
			EncryptionType:              types.EncryptionTypeNone,
		}
	}
	after := it.after
	behind := int64(0)
	if j > i {
		last := sh.recs[j-1]
		after = last.n
		if j < len(sh.recs) {
			behind = sh.recs[len(sh.recs)-1].arrival.Sub(last.arrival).Milliseconds()
		}
	}
	out.MillisBehindLatest = aws.Int64(behind)
	if sh.closed && j == len(sh.recs) {
		for _, ci := range sh.children {
			ch := st.shards[ci]
			out.ChildShards = append(out.ChildShards, types.ChildShard{
				ShardId:      aws.String(ch.id),
				ParentShards: append([]string(nil), ch.parents...),
				HashKeyRange: &types.HashKeyRange{StartingHashKey: aws.String(ch.loKey), EndingHashKey: aws.String(ch.hiKey)},
			})
		}
		return nil
	}
	out.NextShardIterator = aws.String(iterator{stream: st.id, shard: sh.index, after: after, issued: now}.encode())
	return nil
}
