package metrics_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardloop/shardloop/pkg/metrics"
	"github.com/shardloop/shardloop/pkg/reader"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newRecorder(t *testing.T, w *syncBuffer, c *clock, interval time.Duration) *metrics.Recorder {
	t.Helper()
	r, err := metrics.New(w, func(o *metrics.Options) {
		o.Clock = c.Now
		o.FlushInterval = interval
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// emfLine is one parsed line: its metric values, the dimension sets of each
// metric, and the dimension values.
type emfLine struct {
	Timestamp  int64
	Namespace  string
	Dimensions map[string]string // metric -> its dimension sets, as fmt prints them
	Units      map[string]string
	Values     map[string]float64
	Dims       map[string]string
}

// parseEMF checks that line is a valid CloudWatch embedded metric format
// object, as CloudWatch Logs requires it: an _aws object with a millisecond
// Timestamp and a non-empty CloudWatchMetrics array; each directive with a
// Namespace, Dimensions (arrays of at most 30 keys) and Metrics (at most 100,
// each with a Name and a known Unit); every dimension key present at the top
// level as a string, and every metric named present as a number.
func parseEMF(t *testing.T, line string) emfLine {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &top); err != nil {
		t.Fatalf("line is not a JSON object: %v\n%s", err, line)
	}
	rawAws, ok := top["_aws"]
	if !ok {
		t.Fatalf("no _aws member: %s", line)
	}
	var aws struct {
		Timestamp         *json.Number `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  *string    `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name *string `json:"Name"`
				Unit *string `json:"Unit"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	}
	dec := json.NewDecoder(bytes.NewReader(rawAws))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&aws); err != nil {
		t.Fatalf("_aws: %v\n%s", err, line)
	}
	if aws.Timestamp == nil {
		t.Fatalf("_aws.Timestamp missing: %s", line)
	}
	ts, err := aws.Timestamp.Int64()
	if err != nil || ts < 1_000_000_000_000 || ts > 100_000_000_000_000 {
		t.Fatalf("_aws.Timestamp %v is not epoch milliseconds", aws.Timestamp)
	}
	if len(aws.CloudWatchMetrics) == 0 {
		t.Fatalf("_aws.CloudWatchMetrics is empty: %s", line)
	}
	units := map[string]bool{"Count": true, "Milliseconds": true, "Seconds": true, "Bytes": true, "None": true}
	out := emfLine{Timestamp: ts, Dimensions: map[string]string{}, Units: map[string]string{}, Values: map[string]float64{}, Dims: map[string]string{}}
	for _, d := range aws.CloudWatchMetrics {
		if d.Namespace == nil || *d.Namespace == "" {
			t.Fatalf("directive without Namespace: %s", line)
		}
		out.Namespace = *d.Namespace
		if d.Dimensions == nil {
			t.Fatalf("directive without Dimensions: %s", line)
		}
		for _, set := range d.Dimensions {
			if len(set) == 0 || len(set) > 30 {
				t.Fatalf("dimension set %v: want 1 to 30 keys", set)
			}
			for _, key := range set {
				var v string
				raw, ok := top[key]
				if !ok || json.Unmarshal(raw, &v) != nil {
					t.Fatalf("dimension %q is not a string member at the top level: %s", key, line)
				}
				out.Dims[key] = v
			}
		}
		if len(d.Metrics) == 0 || len(d.Metrics) > 100 {
			t.Fatalf("directive with %d metrics: want 1 to 100", len(d.Metrics))
		}
		for _, m := range d.Metrics {
			if m.Name == nil || *m.Name == "" {
				t.Fatalf("metric without a Name: %s", line)
			}
			if m.Unit != nil && !units[*m.Unit] {
				t.Fatalf("metric %s has unit %q", *m.Name, *m.Unit)
			}
			var v float64
			raw, ok := top[*m.Name]
			if !ok || json.Unmarshal(raw, &v) != nil || math.IsNaN(v) {
				t.Fatalf("metric %q has no numeric value at the top level: %s", *m.Name, line)
			}
			out.Values[*m.Name] = v
			out.Dimensions[*m.Name] = fmt.Sprint(d.Dimensions)
			if m.Unit != nil {
				out.Units[*m.Name] = *m.Unit
			}
		}
	}
	// Shard is a property of every line even where no dimension set names it.
	var shard string
	if raw, ok := top["Shard"]; ok && json.Unmarshal(raw, &shard) == nil {
		out.Dims["Shard"] = shard
	}
	return out
}

func parseAll(t *testing.T, out string) []emfLine {
	t.Helper()
	var lines []emfLine
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		lines = append(lines, parseEMF(t, sc.Text()))
	}
	return lines
}

func TestRecorder_EMFLinesAreValidEMFWithEveryMetric(t *testing.T) {
	var w syncBuffer
	c := &clock{now: time.UnixMilli(1_800_000_000_000)}
	r := newRecorder(t, &w, c, time.Minute)
	var h reader.Hooks = r
	h.RecordsDelivered("orders", "shardId-000000000001", 40)
	h.RecordsDelivered("orders", "shardId-000000000001", 60)
	h.Batch("orders", "shardId-000000000001", 100, time.Second)
	h.TargetError("orders", "shardId-000000000001", errors.New("boom"))
	r.BatchGivenUp("orders", "shardId-000000000001", 7, "retry attempts")
	r.InvocationGivenUp("orders", "shardId-000000000001", 11*time.Second)
	h.ReadError("orders", "shardId-000000000001", errors.New("x"), false)
	h.ReadError("orders", "shardId-000000000001", errors.New("x"), true)
	h.AggregatedRecord(&reader.AggregatedRecordError{Stream: "orders", ShardID: "shardId-000000000001", Seq: "1"})
	h.MillisBehindLatest("orders", "shardId-000000000001", 900)
	h.MillisBehindLatest("orders", "shardId-000000000001", 2500)
	h.MillisBehindLatest("orders", "shardId-000000000001", 10)
	h.LeaseLost("orders", "shardId-000000000001", "o1")
	h.ShardEnd("orders", "shardId-000000000001")
	r.LeaseTaken("orders", "shardId-000000000001")
	if w.String() != "" {
		t.Fatalf("wrote before the interval or a flush: %s", w.String())
	}
	r.Flush()

	lines := parseAll(t, w.String())
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want 1:\n%s", len(lines), w.String())
	}
	l := lines[0]
	if l.Namespace != "Shardloop" || l.Timestamp != 1_800_000_000_000 {
		t.Fatalf("namespace %q timestamp %d", l.Namespace, l.Timestamp)
	}
	if l.Dims["Stream"] != "orders" || l.Dims["Shard"] != "shardId-000000000001" {
		t.Fatalf("dimension values %v", l.Dims)
	}
	want := map[string]float64{
		"RecordsDelivered": 100, "Batches": 1, "TargetErrors": 1, "GivenUpBatches": 1, "GivenUpRecords": 7, "InvocationsGivenUp": 1,
		"ReadErrors": 1, "ReadThrottles": 1, "AggregatedRecords": 1, "MillisBehindLatest": 2500,
		"LeaseLosses": 1, "ShardEnds": 1, "LeaseTakes": 1,
	}
	if fmt.Sprint(l.Values) != fmt.Sprint(want) {
		t.Fatalf("values %v\nwant   %v", l.Values, want)
	}
	for name := range want {
		wantDims := "[[Stream] [Stream Shard]]"
		if name == "RecordsDelivered" || name == "Batches" || name == "MillisBehindLatest" {
			wantDims = "[[Stream]]" // no custom metric per shard: see streamOnly
		}
		if l.Dimensions[name] != wantDims {
			t.Errorf("dimensions of %s = %s, want %s", name, l.Dimensions[name], wantDims)
		}
		wantUnit := "Count"
		if name == "MillisBehindLatest" {
			wantUnit = "Milliseconds"
		}
		if l.Units[name] != wantUnit {
			t.Errorf("unit of %s = %q, want %s", name, l.Units[name], wantUnit)
		}
	}
}

// With PerShardLag the lag is a metric of each shard too; without it
// (above) only the stream's, while each line still names its shard.
func TestRecorder_PerShardLagAddsTheShardDimensionToTheLagOnly(t *testing.T) {
	var w syncBuffer
	c := &clock{now: time.UnixMilli(1_800_000_000_000)}
	r, err := metrics.New(&w, func(o *metrics.Options) { o.Clock, o.FlushInterval, o.PerShardLag = c.Now, time.Minute, true })
	if err != nil {
		t.Fatal(err)
	}
	r.MillisBehindLatest("orders", "s0", 1200)
	r.RecordsDelivered("orders", "s0", 3)
	r.Flush()
	lines := parseAll(t, w.String())
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1:\n%s", len(lines), w.String())
	}
	l := lines[0]
	if l.Dimensions["MillisBehindLatest"] != "[[Stream] [Stream Shard]]" || l.Values["MillisBehindLatest"] != 1200 {
		t.Errorf("lag dimensions %s value %v, want [[Stream] [Stream Shard]] and 1200", l.Dimensions["MillisBehindLatest"], l.Values["MillisBehindLatest"])
	}
	if l.Dimensions["RecordsDelivered"] != "[[Stream]]" {
		t.Errorf("RecordsDelivered dimensions %s, want [[Stream]]", l.Dimensions["RecordsDelivered"])
	}
	if l.Dims["Shard"] != "s0" {
		t.Errorf("line does not name its shard: %v", l.Dims)
	}
}

func TestRecorder_EMFLagIsEachShardsMaximumSoTheStreamRollupIsTheWorstShard(t *testing.T) {
	var w syncBuffer
	c := &clock{now: time.UnixMilli(1_800_000_000_000)}
	r := newRecorder(t, &w, c, time.Minute)
	for shard, samples := range map[string][]int64{"s0": {5, 30_000, 7}, "s1": {1_000, 0}, "s2": {0}} {
		for _, ms := range samples {
			r.MillisBehindLatest("orders", shard, ms)
		}
	}
	r.Flush()
	got := map[string]float64{}
	for _, l := range parseAll(t, w.String()) {
		got[l.Dims["Shard"]] = l.Values["MillisBehindLatest"]
		if len(l.Values) != 1 {
			t.Errorf("shard %s line has %v, want only MillisBehindLatest", l.Dims["Shard"], l.Values)
		}
	}
	if fmt.Sprint(got) != "map[s0:30000 s1:1000 s2:0]" {
		t.Fatalf("lag per shard = %v", got)
	}
	if ms, ok := r.Lag("orders", "s0"); !ok || ms != 7 {
		t.Fatalf("Lag(s0) = %d, %v; want the last sample 7", ms, ok)
	}
	if _, ok := r.Lag("orders", "s9"); ok {
		t.Fatal("Lag of a shard never seen reports ok")
	}
	r.ShardEnd("orders", "s0")
	if _, ok := r.Lag("orders", "s0"); ok {
		t.Fatal("Lag of a shard read to its end still reports ok")
	}
}

func TestRecorder_EMFCountsGatherUntilTheIntervalThenOneLinePerShard(t *testing.T) {
	var w syncBuffer
	c := &clock{now: time.UnixMilli(1_800_000_000_000)}
	r := newRecorder(t, &w, c, 10*time.Second)
	for range 50 {
		r.RecordsDelivered("orders", "s0", 2)
		r.RecordsDelivered("orders", "s1", 1)
		c.Advance(100 * time.Millisecond)
	}
	if w.String() != "" {
		t.Fatalf("wrote within the interval: %s", w.String())
	}
	c.Advance(5 * time.Second)
	r.Batch("orders", "s0", 100, time.Millisecond) // the hook call that finds the flush due
	lines := parseAll(t, w.String())
	if len(lines) != 2 || lines[0].Dims["Shard"] != "s0" || lines[0].Values["RecordsDelivered"] != 100 || lines[0].Values["Batches"] != 1 ||
		lines[1].Dims["Shard"] != "s1" || lines[1].Values["RecordsDelivered"] != 50 {
		t.Fatalf("lines = %+v", lines)
	}
	r.Flush()
	r.Flush()
	if n := len(parseAll(t, w.String())); n != 2 {
		t.Fatalf("flushes with nothing new wrote lines: %d in all", n)
	}
}

func TestRecorder_ConcurrentHooksLoseNoCount(t *testing.T) {
	var w syncBuffer
	r, err := metrics.New(&w, func(o *metrics.Options) { o.FlushInterval = time.Millisecond })
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				r.RecordsDelivered("orders", fmt.Sprint("s", g%3), 1)
				r.MillisBehindLatest("orders", fmt.Sprint("s", g%3), int64(i))
				_, _ = r.Lag("orders", "s0")
			}
		})
	}
	wg.Wait()
	r.Flush()
	var total float64
	for _, l := range parseAll(t, w.String()) {
		total += l.Values["RecordsDelivered"]
	}
	if total != 16000 {
		t.Fatalf("records delivered over all lines = %v, want 16000", total)
	}
}

func TestNew_RefusesANilWriterAndANegativeInterval(t *testing.T) {
	if _, err := metrics.New(nil); err == nil {
		t.Fatal("nil writer accepted")
	}
	if _, err := metrics.New(&syncBuffer{}, func(o *metrics.Options) { o.FlushInterval = -time.Second }); err == nil {
		t.Fatal("negative interval accepted")
	}
}

func TestRecorder_StreamNotFoundIsAStreamMetricWithoutAShard(t *testing.T) {
	var w syncBuffer
	c := &clock{now: time.UnixMilli(1_800_000_000_000)}
	r := newRecorder(t, &w, c, time.Minute)
	r.StreamNotFound("orders")
	r.StreamNotFound("orders")
	r.Flush()
	lines := parseAll(t, w.String())
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want 1:\n%s", len(lines), w.String())
	}
	l := lines[0]
	if l.Values["StreamNotFound"] != 2 || l.Dimensions["StreamNotFound"] != "[[Stream]]" || l.Units["StreamNotFound"] != "Count" || l.Dims["Stream"] != "orders" {
		t.Fatalf("line %+v, want StreamNotFound=2 Count over [Stream] orders", l)
	}
	if _, ok := l.Dims["Shard"]; ok || strings.Contains(w.String(), `"Shard"`) {
		t.Fatalf("a stream's line names a shard: %s", w.String())
	}
}
