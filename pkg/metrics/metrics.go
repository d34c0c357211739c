package metrics

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/shardloop/shardloop/pkg/reader"
)

// Namespace and dimension names. infra/shardloop's alarms and dashboard read
// these; change them together.
const (
	DefaultNamespace = "Shardloop"
	DimStream        = "Stream"
	DimShard         = "Shard"
)

// Metric names.
const (
	RecordsDelivered = "RecordsDelivered" // Count: records settled at the target
	Batches          = "Batches"          // Count: GetRecords batches fully settled
	TargetErrors     = "TargetErrors"     // Count: failed or partial deliveries (each is retried)
	GivenUpBatches   = "GivenUpBatches"   // Count: batches given up by the failure policy
	GivenUpRecords   = "GivenUpRecords"   // Count: records in those batches
	// InvocationsGivenUp counts calls to the target that ended without the
	// function's answer (a timeout, a broken connection): the function may
	// run on, so its lane starts nothing more for up to the function's
	// timeout. A steady count explains a shard's growing lag.
	InvocationsGivenUp = "InvocationsGivenUp"
	LeaseTakes         = "LeaseTakes"         // Count: leases the coordinator took to start a loop
	LeaseLosses        = "LeaseLosses"        // Count: runs that lost (or could not take) their lease
	ShardEnds          = "ShardEnds"          // Count: shards read to their end (SHARD_END checkpointed)
	ReadErrors         = "ReadErrors"         // Count: failed GetShardIterator/GetRecords calls, throttles excluded
	ReadThrottles      = "ReadThrottles"      // Count: throttled reads
	AggregatedRecords  = "AggregatedRecords"  // Count: KPL-aggregated records skipped
	MillisBehindLatest = "MillisBehindLatest" // Milliseconds: the most a shard was behind its tip in the interval
	// StreamNotFound counts coordinator passes that found no stream of the
	// configured name: nothing is read until it exists (infra/'s
	// StreamNotFound alarm watches it).
	StreamNotFound = "StreamNotFound"
	// StaleConfiguration counts coordinator passes whose start position is
	// older than the generation the stream's lease table records (a
	// deployment of before a deploy, or the other of two deployments on one
	// table): it changed nothing (docs/operations.md says what to do).
	StaleConfiguration = "StaleConfiguration"
	// BacklogSkipped counts the records a coordinator's new start position
	// moved shards past before the stream's previous start delivered them
	// (at least one a shard it could not count; the coordinator logs the
	// shards at WARN). infra/'s BacklogSkipped alarm watches it.
	BacklogSkipped = "BacklogSkipped"
)

// CloudWatch units of the metrics.
const (
	UnitCount        = "Count"
	UnitMilliseconds = "Milliseconds"
)

// counterNames is the order counters appear in a line.
var counterNames = []string{
	RecordsDelivered, Batches, TargetErrors, GivenUpBatches, GivenUpRecords, InvocationsGivenUp,
	LeaseTakes, LeaseLosses, ShardEnds, ReadErrors, ReadThrottles, AggregatedRecords, StreamNotFound, StaleConfiguration, BacklogSkipped,
	PolledEventCount, FilteredOutEventCount, InvokedEventCount, FailedInvokeEventCount, DroppedEventCount, OnFailureDestinationDeliveredEventCount,
}

// DefaultFlushInterval is how long counts gather before a hook call writes
// them.
const DefaultFlushInterval = 10 * time.Second

// Options configure a Recorder.
type Options struct {
	// Namespace of the metrics. Default DefaultNamespace.
	Namespace string
	// FlushInterval: the first hook call at least this long after the last
	// flush writes what has gathered. Default DefaultFlushInterval. Flush
	// writes at once; call it at the end of each invocation.
	FlushInterval time.Duration
	// Clock returns the time. Default time.Now.
	Clock func() time.Time
	// Logger gets write failures. Default discards.
	Logger *slog.Logger
	// PerShardLag publishes MillisBehindLatest with the dimension set
	// [Stream, Shard] too, one CloudWatch custom metric per shard ($0.30 a
	// shard-month). Default false: the metric carries [Stream] alone, whose
	// Maximum is the lag of the stream's most-behind shard, and each shard's
	// figure stays in its line (CloudWatch Logs Insights) and on its lease
	// row (shardloop status).
	PerShardLag bool
}

// Recorder gathers the reader's and coordinator's events per stream and
// shard and writes them to an io.Writer as CloudWatch embedded metric
// format (EMF) lines: one JSON object per line, per shard with activity,
// per flush. On Lambda the writer is stdout and CloudWatch Logs turns the
// lines into metrics; no API call is made.
//
// Every metric carries the dimension set [Stream], so Sum of a counter over
// [Stream] is the stream's total. The event counters (errors, give-ups,
// lease takes and losses, shard ends) carry [Stream, Shard] too: they are
// billed only in the hours they occur, and then say which shard is in
// trouble. RecordsDelivered, Batches, the trigger's busy counts
// (PolledEventCount, FilteredOutEventCount, InvokedEventCount), IteratorAge
// and, unless Options.PerShardLag, MillisBehindLatest do not, so that a
// busy shard adds no custom metric of its own (see streamOnly). MillisBehindLatest is each shard's maximum over
// the interval, so the Maximum statistic over [Stream] is the lag of the
// stream's most-behind shard; its Average over [Stream] means little. Each
// line names its shard as a property whatever the dimensions.
//
// Recorder implements reader.Hooks and reader.EventCounter. Its methods are safe for concurrent use
// and do not block on I/O except the hook call that finds a flush due, which
// writes the gathered lines. It starts no goroutine: counts gathered after
// the last flush stay in memory until the next hook call or Flush.
type Recorder struct {
	reader.NopHooks

	w    io.Writer
	opts Options

	mu        sync.Mutex
	shards    map[shardKey]*counts
	lag       map[shardKey]int64 // the last MillisBehindLatest of each shard, for Lag
	lastFlush time.Time

	wmu sync.Mutex // one flush writes at a time, so lines never interleave
}

var (
	_ reader.Hooks        = (*Recorder)(nil)
	_ reader.EventCounter = (*Recorder)(nil)
)

type shardKey struct{ stream, shard string }

type counts struct {
	n         map[string]int64
	behind    int64
	hasBehind bool
}

// New returns a Recorder that writes to w.
func New(w io.Writer, optFns ...func(*Options)) (*Recorder, error) {
	if w == nil {
		return nil, errors.New("metrics: nil writer")
	}
	var o Options
	for _, f := range optFns {
		f(&o)
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.FlushInterval < 0 {
		return nil, fmt.Errorf("metrics: FlushInterval %v: want a positive duration", o.FlushInterval)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Recorder{
		w: w, opts: o,
		shards:    map[shardKey]*counts{},
		lag:       map[shardKey]int64{},
		lastFlush: o.Clock(),
	}, nil
}

// add counts n of metric for a shard and writes when a flush is due.
func (r *Recorder) add(stream, shard, metric string, n int64) {
	r.record(stream, shard, func(c *counts) { c.n[metric] += n })
}

func (r *Recorder) record(stream, shard string, f func(*counts)) {
	r.mu.Lock()
	k := shardKey{stream, shard}
	c := r.shards[k]
	if c == nil {
		c = &counts{n: map[string]int64{}}
		r.shards[k] = c
	}
	f(c)
	var due map[shardKey]*counts
	if now := r.opts.Clock(); now.Sub(r.lastFlush) >= r.opts.FlushInterval {
		due = r.takeLocked(now)
	}
	r.mu.Unlock()
	if due != nil {
		r.write(due)
	}
}

// takeLocked hands over what has gathered and starts a new interval.
func (r *Recorder) takeLocked(now time.Time) map[shardKey]*counts {
	due := r.shards
	r.shards = map[shardKey]*counts{}
	r.lastFlush = now
	return due
}

// Flush writes what has gathered since the last flush.
func (r *Recorder) Flush() {
	r.mu.Lock()
	due := r.takeLocked(r.opts.Clock())
	r.mu.Unlock()
	r.write(due)
}

func (r *Recorder) write(due map[shardKey]*counts) {
	if len(due) == 0 {
		return
	}
	keys := make([]shardKey, 0, len(due))
	for k := range due {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b shardKey) int {
		return cmp.Or(cmp.Compare(a.stream, b.stream), cmp.Compare(a.shard, b.shard))
	})
	ts := r.opts.Clock().UnixMilli()
	var buf bytes.Buffer
	for _, k := range keys {
		if line := r.line(ts, k, due[k]); line != nil {
			buf.Write(line)
			buf.WriteByte('\n')
		}
	}
	if buf.Len() == 0 {
		return
	}
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if _, err := r.w.Write(buf.Bytes()); err != nil {
		r.opts.Logger.Warn("metrics: write failed; these counts are lost", "err", err)
	}
}

// EMF document types; the field names are the format's.
type emfRoot struct {
	Timestamp         int64          `json:"Timestamp"`
	CloudWatchMetrics []emfDirective `json:"CloudWatchMetrics"`
}

type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// streamOnly are the counters a busy shard emits every minute: they carry
// the Stream dimension alone, so that a shard adds no custom metric to the
// CloudWatch bill (MillisBehindLatest likewise, unless PerShardLag, and
// IteratorAge). The
// Shard is still a property of every line, for CloudWatch Logs Insights.
// The other counters also carry [Stream, Shard]: they cost only in the
// hours they occur, and then say which shard is in trouble.
var streamOnly = map[string]bool{RecordsDelivered: true, Batches: true, StreamNotFound: true, StaleConfiguration: true, BacklogSkipped: true,
	PolledEventCount: true, FilteredOutEventCount: true, InvokedEventCount: true}

// line is one shard's EMF object, or nil when nothing happened.
func (r *Recorder) line(ts int64, k shardKey, c *counts) []byte {
	doc := map[string]any{DimStream: k.stream}
	if k.shard != "" {
		doc[DimShard] = k.shard
	}
	var stream, shard []emfMetric
	for _, name := range counterNames {
		if v := c.n[name]; v != 0 {
			doc[name] = v
			if streamOnly[name] {
				stream = append(stream, emfMetric{Name: name, Unit: UnitCount})
			} else {
				shard = append(shard, emfMetric{Name: name, Unit: UnitCount})
			}
		}
	}
	if c.hasBehind {
		lag := emfMetric{Name: MillisBehindLatest, Unit: UnitMilliseconds}
		if r.opts.PerShardLag {
			shard = append(shard, lag)
		} else {
			stream = append(stream, lag)
		}
		doc[MillisBehindLatest] = c.behind
	}
	if age, ok := iteratorAge(doc, c); ok {
		stream = append(stream, age) // like the lag: a busy shard's, every minute
	}
	var ds []emfDirective
	if len(stream) > 0 {
		ds = append(ds, emfDirective{Namespace: r.opts.Namespace, Dimensions: [][]string{{DimStream}}, Metrics: stream})
	}
	if len(shard) > 0 {
		ds = append(ds, emfDirective{Namespace: r.opts.Namespace, Dimensions: [][]string{{DimStream}, {DimStream, DimShard}}, Metrics: shard})
	}
	if len(ds) == 0 {
		return nil
	}
	doc["_aws"] = emfRoot{Timestamp: ts, CloudWatchMetrics: ds}
	b, err := json.Marshal(doc)
	if err != nil { // only strings and numbers: cannot happen
		r.opts.Logger.Warn("metrics: encode failed", "err", err)
		return nil
	}
	return b
}

// Lag returns the last MillisBehindLatest seen for a shard; ok is false
// when none was. It suits reader.Options.Lag (lease.HolderOptions.Lag).
func (r *Recorder) Lag(stream, shardID string) (millis int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	millis, ok = r.lag[shardKey{stream, shardID}]
	return millis, ok
}

// RecordsDelivered implements reader.Hooks.
func (r *Recorder) RecordsDelivered(stream, shardID string, n int) {
	r.add(stream, shardID, RecordsDelivered, int64(n))
}

// Batch implements reader.Hooks.
func (r *Recorder) Batch(stream, shardID string, _ int, _ time.Duration) {
	r.add(stream, shardID, Batches, 1)
}

// TargetError implements reader.Hooks.
func (r *Recorder) TargetError(stream, shardID string, _ error) {
	r.add(stream, shardID, TargetErrors, 1)
}

// BatchGivenUp counts a batch (and its records) that the failure policy gave
// up on.
func (r *Recorder) BatchGivenUp(stream, shardID string, records int, _ string) {
	r.record(stream, shardID, func(c *counts) {
		c.n[GivenUpBatches]++
		c.n[GivenUpRecords] += int64(records)
	})
}

// InvocationGivenUp implements reader.InvocationGivenUp.
func (r *Recorder) InvocationGivenUp(stream, shardID string, _ time.Duration) {
	r.add(stream, shardID, InvocationsGivenUp, 1)
}

var _ reader.InvocationGivenUp = (*Recorder)(nil)

// ReadError implements reader.Hooks.
func (r *Recorder) ReadError(stream, shardID string, _ error, throttled bool) {
	if throttled {
		r.add(stream, shardID, ReadThrottles, 1)
		return
	}
	r.add(stream, shardID, ReadErrors, 1)
}

// AggregatedRecord implements reader.Hooks.
func (r *Recorder) AggregatedRecord(err *reader.AggregatedRecordError) {
	if err == nil {
		return
	}
	r.add(err.Stream, err.ShardID, AggregatedRecords, 1)
}

// MillisBehindLatest implements reader.Hooks: the interval keeps the most.
func (r *Recorder) MillisBehindLatest(stream, shardID string, ms int64) {
	r.record(stream, shardID, func(c *counts) {
		if !c.hasBehind || ms > c.behind {
			c.behind, c.hasBehind = ms, true
		}
		r.lag[shardKey{stream, shardID}] = ms
	})
}

// LeaseLost implements reader.Hooks.
func (r *Recorder) LeaseLost(stream, shardID, _ string) {
	r.add(stream, shardID, LeaseLosses, 1)
}

// ShardEnd implements reader.Hooks. The shard's lag is forgotten: it is
// read to its end.
func (r *Recorder) ShardEnd(stream, shardID string) {
	r.record(stream, shardID, func(c *counts) {
		c.n[ShardEnds]++
		delete(r.lag, shardKey{stream, shardID})
	})
}

// LeaseTaken counts a lease the coordinator took to start a loop.
func (r *Recorder) LeaseTaken(stream, shardID string) {
	r.add(stream, shardID, LeaseTakes, 1)
}

// StreamNotFound counts a coordinator pass that found no stream of the
// configured name. It carries the Stream dimension only.
func (r *Recorder) StreamNotFound(stream string) {
	r.add(stream, "", StreamNotFound, 1)
}

// StaleConfiguration counts a coordinator pass that changed nothing because
// its start position is older than the stream's recorded generation. It
// carries the Stream dimension only.
func (r *Recorder) StaleConfiguration(stream string) {
	r.add(stream, "", StaleConfiguration, 1)
}

// BacklogSkipped counts n records a new start position moved the stream's
// shards past before they were delivered. It carries the Stream dimension
// only.
func (r *Recorder) BacklogSkipped(stream string, n int) {
	r.add(stream, "", BacklogSkipped, int64(n))
}
