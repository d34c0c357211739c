package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// keyWorld is a checker that knows key 0's records #0 to #9 of one shard.
func keyWorld(t *testing.T) *checker {
	t.Helper()
	t0 := time.Unix(946684800, 0)
	c := newChecker(newTracer(t0))
	c.quotedPad = strconv.Quote("xx")
	c.cur = 1
	for n := range 10 {
		s := c.shard(shardKey{1, "s"})
		x := &rec{inc: 1, key: 0, n: n, shard: s, idx: n, seq: seqOf(n), arrival: t0.Add(time.Duration(n) * time.Second)}
		s.recs = append(s.recs, x)
		c.bySeq[x.seq] = x
		c.keys[keyKey{1, 0}] = append(c.keys[keyKey{1, 0}], x)
	}
	return c
}

func seqOf(n int) string { return fmt.Sprintf("seq%02d", n) }

// inv is one invocation for the table: who, when (seconds), the records.
type inv struct {
	owner      string
	start, end float64
	order      int64
	ns         []int
}

// The per-key checks over every delivery: which sequences of invocations
// break the promise, and which are allowed (replays, skips of records
// given up or filtered).
func TestKeyChecks(t *testing.T) {
	t0 := time.Unix(946684800, 0)
	for _, c := range []struct {
		name   string
		invs   []inv
		gaveUp []int
		// from2, when not 0, records generation 2 as a timestamp start
		// owing the records that arrived from that second on (record #n
		// arrived at second n).
		from2 float64
		want  string // "" none
	}{
		{"in order", []inv{{"A", 0, 1, 1, []int{0, 1, 2}}, {"A", 1, 2, 1, []int{3, 4}}}, nil, 0, ""},
		{"a replay from the checkpoint, on in order", []inv{{"A", 0, 1, 1, []int{0, 1, 2, 3}}, {"B", 5, 6, 1, []int{2, 3, 4}}}, nil, 0, ""},
		{"a replay over two invocations", []inv{{"A", 0, 1, 1, []int{0, 1, 2, 3}}, {"B", 5, 6, 1, []int{1, 2}}, {"B", 6, 7, 1, []int{3, 4}}}, nil, 0, ""},
		{"a retried batch", []inv{{"A", 0, 1, 1, []int{0, 1}}, {"A", 1, 2, 1, []int{0, 1}}, {"A", 2, 3, 1, []int{2}}}, nil, 0, ""},
		{"a forward gap is not this check's", []inv{{"A", 0, 1, 1, []int{0, 1}}, {"A", 1, 2, 1, []int{5}}}, nil, 0, ""},
		{"out of order in one invocation", []inv{{"A", 0, 1, 1, []int{0, 2, 1}}}, nil, 0, "in one invocation"},
		{"a replay that skips", []inv{{"A", 0, 1, 1, []int{0, 1, 2, 3}}, {"B", 5, 6, 1, []int{1, 3}}}, nil, 0, "skipping #2"},
		{"a replay that resumes past what it had", []inv{{"A", 0, 1, 1, []int{0, 1, 2, 3}}, {"B", 5, 6, 1, []int{1}}, {"B", 6, 7, 1, []int{3, 4}}}, nil, 0, "skipping #2"},
		{"a replay may skip a record given up", []inv{{"A", 0, 1, 1, []int{0, 1, 2, 3}}, {"B", 5, 6, 1, []int{1, 3}}}, []int{2}, 0, ""},
		{"two loops at once", []inv{{"A", 0, 2, 1, []int{0, 1}}, {"B", 1, 3, 1, []int{2}}}, nil, 0, "overlaps"},
		{"two runs of one loop at once", []inv{{"A/r1", 0, 2, 1, []int{0, 1}}, {"A/r2", 1.5, 3, 1, []int{2}}}, nil, 0, "overlaps"},
		{"two lanes at once", []inv{{"A", 0, 2, 1, []int{0}}, {"A", 1, 3, 1, []int{1}}}, nil, 0, "overlaps"},
		{"one after the other", []inv{{"A", 0, 2, 1, []int{0}}, {"B", 2, 3, 1, []int{1}}}, nil, 0, ""},
		// A new start past what the function had seen (a redeploy at
		// latest or a later timestamp) overrides the checkpoint: the
		// replay in progress under the old generation ends, and the new
		// one's first records follow the records its start does not owe.
		{"a new generation's start past a replay in progress", []inv{{"A", 0, 1, 1, []int{0, 1, 2, 3, 4, 5}}, {"B", 5, 6, 1, []int{2, 3}}, {"B", 7, 8, 2, []int{6, 7}}}, nil, 6, ""},
		{"a new generation's start skips only what it does not owe", []inv{{"A", 0, 1, 1, []int{0, 1, 2, 3, 4, 5}}, {"B", 5, 6, 1, []int{2, 3}}, {"B", 7, 8, 2, []int{6, 7}}}, nil, 5, "skipping #5"},
		{"a new generation that owes what was skipped", []inv{{"A", 0, 1, 1, []int{0, 1, 2, 3, 4, 5}}, {"B", 5, 6, 2, []int{2, 3}}, {"B", 7, 8, 2, []int{6, 7}}}, nil, 1, "skipping #4"},
		{"a superseded generation after the new one began", []inv{{"A", 0, 1, 2, []int{0, 1}}, {"B", 1, 2, 1, []int{5}}}, nil, 0, "under generation 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ck := keyWorld(t)
			for _, n := range c.gaveUp {
				x := ck.bySeq[seqOf(n)]
				x.settles = append(x.settles, settle{givenUp: true})
			}
			if c.from2 != 0 {
				ck.rules[2] = map[string]*rule{"s": {order: 2, kind: owesFromArrival, at: t0.Add(time.Duration(c.from2 * float64(time.Second))), desc: "from2"}}
				ck.ruleInc[2] = 1
			}
			for _, iv := range c.invs {
				var seqs []string
				for _, n := range iv.ns {
					seqs = append(seqs, seqOf(n))
				}
				at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
				ck.keyDelivery("d", iv.owner, seqs, at(iv.start), at(iv.end), iv.order, false)
			}
			ck.keyChecks()
			var got []string
			for _, v := range ck.violations {
				got = append(got, v.What)
			}
			switch {
			case c.want == "" && len(got) > 0:
				t.Errorf("want no violation, got %q", got)
			case c.want != "" && (len(got) == 0 || !strings.Contains(got[0], c.want)):
				t.Errorf("want a violation saying %q, got %q", c.want, got)
			}
		})
	}
}

// TestKeyChecks_ARunUnderTheOlderGenerationUntilItsRowIsReopenedIsNotStale:
// world 320 (a Supersede whose newer start's passes wake just after the
// older one's): generation 5 kept a row, and its loop's runs read under
// it; then generation 4, which 5 superseded, landed its start on a parent,
// and the loop's next run read, until 5's coordinators re-opened the row,
// under generation 3, which governed it then. One loop reading on in
// order is no stale one; a run of a revoked loop under an older
// generation still is.
func TestKeyChecks_ARunUnderTheOlderGenerationUntilItsRowIsReopenedIsNotStale(t *testing.T) {
	t0 := time.Unix(946684800, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	for _, reopening := range []bool{true, false} {
		ck := keyWorld(t)
		ck.keyDelivery("d", "A", []string{seqOf(0), seqOf(1)}, at(0), at(1), 5, false)
		ck.keyDelivery("d", "A", []string{seqOf(2), seqOf(3)}, at(1), at(2), 3, reopening)
		ck.keyChecks()
		var got []string
		for _, v := range ck.violations {
			got = append(got, v.What)
		}
		switch {
		case reopening && len(got) > 0:
			t.Errorf("a run reading under the older generation until its row is re-opened: want no violation, got %q", got)
		case !reopening && (len(got) == 0 || !strings.Contains(got[0], "under generation 3")):
			t.Errorf("a run under an older generation after a newer one: want a stale generation, got %q", got)
		}
	}
}

// Record content: what the function got is checked against what was
// written, in process and as the Lambda event.
func TestContentCheck(t *testing.T) {
	t0 := time.Unix(946684800, 0)
	good := func(n int) seenRecord {
		return seenRecord{seq: seqOf(n), pk: "k0", data: recordData(0, n, "xx"), arrivalMs: t0.Add(time.Duration(n) * time.Second).UnixMilli()}
	}
	for _, c := range []struct {
		name string
		mod  func(*seenRecord)
		want string
	}{
		{"as written", func(*seenRecord) {}, ""},
		{"data", func(r *seenRecord) { r.data = recordData(0, 3, "xx") }, "data"},
		{"key", func(r *seenRecord) { r.pk = "k1" }, "partition key"},
		{"arrival", func(r *seenRecord) { r.arrivalMs++ }, "arrival"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ck := keyWorld(t)
			r := good(2)
			c.mod(&r)
			ck.content("d", "s", []seenRecord{good(1), r})
			if (c.want == "") != (len(ck.violations) == 0) || (c.want != "" && !strings.Contains(ck.violations[0].What, c.want)) {
				t.Errorf("want %q, got %v", c.want, ck.violations)
			}
		})
	}

	ev := `{"Records":[{"kinesis":{"kinesisSchemaVersion":"1.0","partitionKey":"k0","sequenceNumber":"seq02","data":"` +
		"eyJrIjowfQ==" + `","approximateArrivalTimestamp":946684802.5},"eventSource":"aws:kinesis","eventVersion":"1.0","eventID":"s:seq02","eventName":"aws:kinesis:record","invokeIdentityArn":"","awsRegion":"us-east-1","eventSourceARN":"arn:aws:kinesis:us-east-1:000000000000:stream/orders"}]}`
	rs, bad := eventRecords([]byte(ev), "s", "orders")
	if bad != "" || len(rs) != 1 || rs[0].arrivalMs != 946684802500 || string(rs[0].data) != `{"k":0}` || rs[0].pk != "k0" {
		t.Fatalf("eventRecords = %+v, %q", rs, bad)
	}
	for _, c := range []struct{ from, to string }{
		{`"eventName":"aws:kinesis:record"`, `"eventName":"aws:kinesis:other"`},
		{`"eventID":"s:seq02"`, `"eventID":"t:seq02"`},
		{`stream/orders`, `stream/other`},
		{`"awsRegion":"us-east-1"`, `"awsRegion":"eu-west-1"`},
	} {
		if _, bad := eventRecords([]byte(strings.Replace(ev, c.from, c.to, 1)), "s", "orders"); bad == "" {
			t.Errorf("an event with %s passes", c.to)
		}
	}
}

// The world's reader options record the reader's lag with each checkpoint
// (reader.Options.Lag), as the shardreader handler and `shardloop run` do:
// the simulated deployments run the deployed checkpoint path.
func TestReaderOptionsRecordTheLag(t *testing.T) {
	w := &World{}
	o := w.readerOptions("d", hostClock{}, nil, nil, nil)
	if o.Lag == nil {
		t.Fatal("reader options without Lag: checkpoints record no lag")
	}
	w.lags.store("s1", 7)
	if ms, ok := o.Lag(streamName, "s1"); !ok || ms != 7 {
		t.Fatalf("Lag = %d, %v; want the shard's last lag, 7", ms, ok)
	}
}

// recordData writes what fmt wrote before it was written out by hand:
// `{"k":%d,"n":%d,"t":%q,"p":%q}` (a seed names a world for one form of
// the data; the filters match on it).
func TestRecordData_AsFmtWroteIt(t *testing.T) {
	for _, pad := range []string{"", "xx", strings.Repeat("x", 700), "a\"b\n\u00e9"} {
		for _, k := range []int{0, 1, 9, 10, 99, 100, 12345} {
			for _, n := range []int{0, 1, 2, 10, 101, 99999} {
				t0 := "a"
				if (k+n)%2 == 1 {
					t0 = "b"
				}
				want := fmt.Sprintf(`{"k":%d,"n":%d,"t":%q,"p":%q}`, k, n, t0, pad)
				if got := string(recordData(k, n, pad)); got != want {
					t.Fatalf("recordData(%d, %d, %q) = %s, want %s", k, n, pad, got, want)
				}
				if got := string(appendRecordData([]byte("junk"), k, n, strconv.Quote(pad))); got != "junk"+want {
					t.Fatalf("appendRecordData(junk, %d, %d, %q) = %s, want junk%s", k, n, pad, got, want)
				}
			}
		}
	}
}

// A scanner reads what valuesAfter reads for each field, on events
// and on bytes pieced together from the fields' own prefixes, quotes,
// commas and braces (values cut short, prefixes inside values, prefixes
// that overlap).
func TestScanner_AsValuesAfter(t *testing.T) {
	pieces := []string{`"`, `,`, `}`, `:`, `x`, `1.5`, `"a`, `":"`, `"sequenceNumber`, `"eventID":"s:`}
	for _, f := range eventFields {
		pieces = append(pieces, f.prefix, f.prefix[:len(f.prefix)/2], f.prefix[len(f.prefix)/2:])
	}
	rng := rand.New(rand.NewPCG(1, 2))
	inputs := []string{"", `{"Records":[]}`}
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(30) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		inputs = append(inputs, b.String())
	}
	for _, in := range inputs {
		got := eventScanner.values([]byte(in))
		for x, f := range eventFields {
			if want := valuesAfter([]byte(in), f.prefix, f.ends); !slices.Equal(got[x], want) {
				t.Fatalf("on %q, field %s: the scanner read %q, valuesAfter %q", in, f.prefix, got[x], want)
			}
		}
	}
}
