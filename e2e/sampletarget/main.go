// Command sampletarget is the target Lambda of the end-to-end test: a
// handler written for Lambda's own Kinesis trigger (events.KinesisEvent in,
// events.KinesisEventResponse out) that records what it received.
//
// Each invocation appends one JSON line per record (shard id, sequence
// number, partition key, data, receipt time) to the file named by
// E2E_RECORD_FILE, in one
// O_APPEND write per record set, so that several instances can share the
// file and a set is never interleaved with another.
//
// E2E_DELAY (optional, a Go duration) is slept after the record set is
// written and before the answer: a loop killed then has delivered records it
// has not checkpointed, which its successor must deliver again.
//
// E2E_FAIL_EVERY=N (optional) makes every Nth invocation of an instance
// report its middle record in batchItemFailures, so the reader's partial
// settlement (deliver again from the first failed record) is exercised by
// the real binaries. The records of that invocation are still recorded as
// received: a redelivery then shows up as a duplicate, never as a loss.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

// Received is one line of the record file.
type Received struct {
	ShardID      string `json:"shardId"`
	Seq          string `json:"seq"`
	PartitionKey string `json:"partitionKey"`
	Data         string `json:"data"`
	At           int64  `json:"at"` // receipt, Unix milliseconds
	// Failed is true for the record this invocation reported failed.
	Failed bool `json:"failed,omitempty"`
}

type handler struct {
	path      string
	failEvery int
	delay     time.Duration
	calls     int // invocations of this instance; Lambda runs one at a time
}

func (h *handler) handle(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	h.calls++
	failAt := -1
	if h.failEvery > 0 && h.calls%h.failEvery == 0 && len(ev.Records) > 1 {
		failAt = len(ev.Records) / 2
	}
	now := time.Now().UnixMilli()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i, r := range ev.Records {
		shard, _, _ := strings.Cut(r.EventID, ":")
		if err := enc.Encode(Received{
			ShardID:      shard,
			Seq:          r.Kinesis.SequenceNumber,
			PartitionKey: r.Kinesis.PartitionKey,
			Data:         string(r.Kinesis.Data),
			At:           now,
			Failed:       i == failAt,
		}); err != nil {
			return events.KinesisEventResponse{}, err
		}
	}
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return events.KinesisEventResponse{}, err
	}
	_, werr := f.Write(buf.Bytes()) // one write per record set
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return events.KinesisEventResponse{}, fmt.Errorf("record %d records: %w", len(ev.Records), werr)
	}
	if h.delay > 0 {
		select {
		case <-time.After(h.delay):
		case <-ctx.Done():
		}
	}
	var resp events.KinesisEventResponse
	if failAt >= 0 {
		resp.BatchItemFailures = []events.KinesisBatchItemFailure{{ItemIdentifier: ev.Records[failAt].Kinesis.SequenceNumber}}
	}
	return resp, nil
}

func main() {
	h := &handler{path: os.Getenv("E2E_RECORD_FILE")}
	if h.path == "" {
		fmt.Fprintln(os.Stderr, "E2E_RECORD_FILE is not set: want the file to append received records to")
		os.Exit(1)
	}
	if v := os.Getenv("E2E_FAIL_EVERY"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "E2E_FAIL_EVERY=%q: want a non-negative integer\n", v)
			os.Exit(1)
		}
		h.failEvery = n
	}
	if v := os.Getenv("E2E_DELAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			fmt.Fprintf(os.Stderr, "E2E_DELAY=%q: want a Go duration\n", v)
			os.Exit(1)
		}
		h.delay = d
	}
	lambda.Start(h.handle)
}
