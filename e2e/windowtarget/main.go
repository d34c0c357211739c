// Command windowtarget is the tumbling-window target of the end-to-end
// test: a stock handler for Lambda's Kinesis trigger with
// TumblingWindowInSeconds (events.KinesisTimeWindowEvent in,
// events.KinesisTimeWindowEventResponse out). Its state counts the records
// of the window so far ("n") and lists their data ("data", joined by "|").
//
// Each invocation appends one JSON line to the file named by
// E2E_RECORD_FILE: the window, the flags, the state received and returned,
// and the records' data.
package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

// Invocation is one line of the record file.
type Invocation struct {
	Start, End       int64 // window bounds, Unix milliseconds
	Final, Early     bool
	ShardID          string
	StateIn, Out     map[string]string
	Data             []string
	EventSourceARN   string
	InvokeIdentified bool
}

func handle(path string) func(context.Context, events.KinesisTimeWindowEvent) (events.KinesisTimeWindowEventResponse, error) {
	return func(_ context.Context, ev events.KinesisTimeWindowEvent) (events.KinesisTimeWindowEventResponse, error) {
		n, _ := strconv.Atoi(ev.State["n"])
		var data []string
		if d := ev.State["data"]; d != "" {
			data = strings.Split(d, "|")
		}
		inv := Invocation{
			Start: ev.Window.Start.UnixMilli(), End: ev.Window.End.UnixMilli(),
			Final: ev.IsFinalInvokeForWindow, Early: ev.IsWindowTerminatedEarly,
			ShardID: ev.ShardID, StateIn: ev.State, EventSourceARN: ev.EventSourceARN,
		}
		for _, r := range ev.Records {
			n++
			data = append(data, string(r.Kinesis.Data))
			inv.Data = append(inv.Data, string(r.Kinesis.Data))
			inv.InvokeIdentified = inv.InvokeIdentified || r.InvokeIdentityArn != ""
		}
		out := map[string]string{"n": strconv.Itoa(n), "data": strings.Join(data, "|")}
		inv.Out = out
		line, err := json.Marshal(inv)
		if err != nil {
			return events.KinesisTimeWindowEventResponse{}, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return events.KinesisTimeWindowEventResponse{}, err
		}
		_, werr := f.Write(append(line, '\n'))
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		return events.KinesisTimeWindowEventResponse{TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: out}}, werr
	}
}

func main() {
	lambda.Start(handle(os.Getenv("E2E_RECORD_FILE")))
}
