package kinesismem

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	smithy "github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/shardloop/shardloop/pkg/shards"
)

// Client is an in-memory Kinesis Data Streams service for one account in
// one region, with the methods of *kinesis.Client that shardloop calls. It
// is safe for concurrent use; every call runs under one lock, so calls are
// serialised in the order they take it.
type Client struct {
	opts Options

	mu      sync.Mutex
	last    time.Time          // latest time the clock gave
	streams map[string]*stream // by name
	byID    map[uint64]*stream
	nextID  uint64
	hashes  map[string]hashKey // partition keys' hashes (see partitionHash)
}

// New returns an empty Client.
func New(opts Options) (*Client, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Client{opts: opts, streams: map[string]*stream{}, byID: map[uint64]*stream{}}, nil
}

type stream struct {
	id        uint64
	name, arn string
	created   time.Time
	status    types.StreamStatus
	mode      types.StreamMode
	retention time.Duration
	counter   uint64   // the last sequence counter issued
	shards    []*shard // by index, including closed and expired ones
	open      []*shard // open shards by starting hash key
	pending   *change  // the status change under way
	scalings  []time.Time
}

// change is a status change that completes at due: apply runs on the first
// call at or after due, with due as its time.
type change struct {
	due   time.Time
	apply func(at time.Time)
}

type shard struct {
	index    int
	id       string
	parents  []string // ParentShardId, then AdjacentParentShardId
	lo, hi   hashKey
	start    uint64 // counter at creation: StartingSequenceNumber
	end      uint64 // counter at close: EndingSequenceNumber
	closed   bool
	created  time.Time
	closedAt time.Time
	children []int
	recs     []record

	// What ListShards answers of the shard, formatted once: its hash key
	// range in decimal and its first and (once closed) last sequence
	// numbers. The coordinators list every shard on every pass.
	loKey, hiKey     string
	startSeq, endSeq string

	getRecords, getIterator window
	readBytes               bucket
	writeRecords, writeSize bucket
}

type record struct {
	n       uint64
	arrival time.Time // whole milliseconds
	key     string
	data    []byte
	seq     string // st.seq(sh, n), formatted once: every read returns it
}

func (st *stream) next() uint64 {
	st.counter++
	return st.counter
}

func (st *stream) seq(sh *shard, n uint64) string { return formatSeq(n, st.id, sh.index) }

func (st *stream) addShard(at time.Time, lo, hi hashKey, parents ...*shard) *shard {
	sh := &shard{index: len(st.shards), lo: lo, hi: hi, start: st.next(), created: at}
	sh.id = shardID(sh.index)
	sh.loKey, sh.hiKey, sh.startSeq = lo.String(), hi.String(), st.seq(sh, sh.start)
	for _, p := range parents {
		sh.parents = append(sh.parents, p.id)
		p.children = append(p.children, sh.index)
	}
	st.shards = append(st.shards, sh)
	return sh
}

func (st *stream) closeShard(sh *shard, at time.Time) {
	sh.end = st.next()
	sh.endSeq = st.seq(sh, sh.end)
	sh.closed = true
	sh.closedAt = at
}

// reindex rebuilds the open shards' routing table after a reshard.
func (st *stream) reindex() {
	st.open = st.open[:0]
	for _, sh := range st.shards {
		if !sh.closed {
			st.open = append(st.open, sh)
		}
	}
	slices.SortFunc(st.open, func(a, b *shard) int { return a.lo.cmp(b.lo) })
}

// route returns the open shard whose hash key range holds h.
func (st *stream) route(h hashKey) *shard {
	i := sort.Search(len(st.open), func(i int) bool { return st.open[i].lo.cmp(h) > 0 })
	return st.open[i-1] // the open shards cover the whole space from 0
}

// expired reports whether a closed shard is past retention: gone from
// ListShards and from every call.
func (st *stream) expired(sh *shard, now time.Time) bool {
	return sh.closed && !now.Before(sh.closedAt.Add(st.retention))
}

// trim drops the records past retention.
func (st *stream) trim(sh *shard, now time.Time) {
	horizon := now.Add(-st.retention)
	if len(sh.recs) == 0 || sh.recs[0].arrival.After(horizon) {
		return // nothing past retention: every put and read asks
	}
	i := sort.Search(len(sh.recs), func(i int) bool { return sh.recs[i].arrival.After(horizon) })
	if i == 0 {
		return
	}
	clear(sh.recs[:i]) // let the trimmed data go
	sh.recs = sh.recs[i:]
	if cap(sh.recs) > 1024 && len(sh.recs) < cap(sh.recs)/4 {
		sh.recs = slices.Clone(sh.recs)
	}
}

// lookupShard returns a shard of st that is still listed.
func (c *Client) lookupShard(st *stream, id string, now time.Time) (*shard, error) {
	if n, ok := parseShardID(id); ok && n < len(st.shards) && !st.expired(st.shards[n], now) {
		return st.shards[n], nil
	}
	return nil, notFound("Shard %s in stream %s under account %s does not exist", id, st.name, c.opts.Account)
}

func parseShardID(id string) (int, bool) {
	s, ok := strings.CutPrefix(id, "shardId-")
	if !ok || len(s) != 12 {
		return 0, false
	}
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, false
		}
		n = n*10 + int(r-'0')
	}
	return n, true
}

// do runs one call: it checks ctx, takes the lock, reads the clock,
// completes due status changes, runs f and stamps the answer with the
// server's time. Errors come back as the SDK's do, inside a
// *smithy.OperationError.
func (c *Client) do(ctx context.Context, op string, f func(now time.Time) (*middleware.Metadata, error)) error {
	if err := ctx.Err(); err != nil {
		return opError(op, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Clock()
	if now.Before(c.last) {
		now = c.last
	}
	c.last = now
	c.settle(now)
	md, err := f(now)
	if err != nil {
		return opError(op, err)
	}
	shards.SetServerTime(md, now)
	return nil
}

// settle completes the status changes due by now.
func (c *Client) settle(now time.Time) {
	for _, st := range c.streams {
		if p := st.pending; p != nil && !now.Before(p.due) {
			st.pending = nil
			p.apply(p.due)
		}
	}
}

// stream finds a stream by StreamName and/or StreamARN, as Kinesis accepts
// either or both (both must then name the same stream).
func (c *Client) stream(name, arn *string) (*stream, error) {
	n, err := c.streamName(name, arn)
	if err != nil {
		return nil, err
	}
	st := c.streams[n]
	if st == nil {
		return nil, notFound("Stream %s under account %s not found.", n, c.opts.Account)
	}
	return st, nil
}

func (c *Client) streamName(name, arn *string) (string, error) {
	n, a := aws.ToString(name), aws.ToString(arn)
	if n == "" && a == "" {
		return "", invalid("StreamName or StreamARN is required")
	}
	if n != "" && !validStreamName(n) {
		return "", invalid("Stream Name '%s' is not valid: want 1 to 128 of a-z A-Z 0-9 _ . -", n)
	}
	if a == "" {
		return n, nil
	}
	fromARN, ok := c.parseARN(a)
	switch {
	case !ok:
		return "", invalid("StreamARN %s is not valid: want arn:aws:kinesis:<region>:<account>:stream/<name>", a)
	case fromARN == "":
		return "", notFound("Stream %s not found.", a)
	case n != "" && n != fromARN:
		return "", invalid("StreamName %s and StreamARN %s name different streams", n, a)
	}
	return fromARN, nil
}

// parseARN returns the stream name of a stream ARN; "" when the ARN is
// well formed but of another region or account.
func (c *Client) parseARN(a string) (string, bool) {
	parts := strings.SplitN(a, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[1] == "" || parts[2] != "kinesis" {
		return "", false
	}
	name, ok := strings.CutPrefix(parts[5], "stream/")
	if !ok || !validStreamName(name) {
		return "", false
	}
	if parts[3] != c.opts.Region || parts[4] != c.opts.Account {
		return "", true
	}
	return name, true
}

func (c *Client) arn(name string) string {
	return fmt.Sprintf("arn:aws:kinesis:%s:%s:stream/%s", c.opts.Region, c.opts.Account, name)
}

func validStreamName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
		default:
			return false
		}
	}
	return true
}

func (c *Client) openShards() int {
	n := 0
	for _, st := range c.streams {
		n += len(st.open)
	}
	return n
}

func opError(op string, err error) error {
	return &smithy.OperationError{ServiceID: "Kinesis", OperationName: op, Err: err}
}

func msg(format string, args ...any) *string { return aws.String(fmt.Sprintf(format, args...)) }

func invalid(format string, args ...any) error {
	return &types.InvalidArgumentException{Message: msg(format, args...)}
}

func notFound(format string, args ...any) error {
	return &types.ResourceNotFoundException{Message: msg(format, args...)}
}

func inUse(format string, args ...any) error {
	return &types.ResourceInUseException{Message: msg(format, args...)}
}

func limitExceeded(format string, args ...any) error {
	return &types.LimitExceededException{Message: msg(format, args...)}
}

func throttled(format string, args ...any) error {
	return &types.ProvisionedThroughputExceededException{Message: msg(format, args...)}
}

// millis is t on Kinesis's millisecond grain.
func millis(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }
