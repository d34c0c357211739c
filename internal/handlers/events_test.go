package handlers_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardloop/shardloop/internal/handlers"
	"github.com/shardloop/shardloop/pkg/coordinator"
)

func TestParseEvent(t *testing.T) {
	const machine = "arn:aws:states:us-east-1:000000000000:stateMachine:orders-shard-loop"
	loop := coordinator.Loop{Stream: "orders", StreamARN: "arn:aws:kinesis:us-east-1:000000000000:stream/orders", ShardID: "shardId-000000000001", Owner: "shardId-000000000001-9f86d081884c7d65"}
	exec := func(detail string) string {
		return `{"version":"0","detail-type":"Step Functions Execution Status Change","source":"aws.states","detail":` + detail + `}`
	}
	const input = `"{\"stream\":\"orders\",\"streamArn\":\"arn:aws:kinesis:us-east-1:000000000000:stream/orders\",\"shardId\":\"shardId-000000000001\",\"owner\":\"shardId-000000000001-9f86d081884c7d65\",\"iteration\":3,\"continue\":true}"`
	ours := func(status, rest string) string {
		return exec(`{"executionArn":"arn:aws:states:us-east-1:000000000000:execution:orders-shard-loop:x","stateMachineArn":"` + machine + `","name":"x","status":"` + status + `"` + rest + `}`)
	}
	for _, tc := range []struct {
		name  string
		event string
		kind  handlers.EventKind
		loop  coordinator.Loop
		err   string
	}{
		{"schedule", `{"detail-type":"Scheduled Event","source":"aws.events","detail":{}}`, handlers.EventSchedule, coordinator.Loop{}, ""},
		{"nudge", `{"nudge":true}`, handlers.EventNudge, coordinator.Loop{}, ""},
		{"failed", ours("FAILED", `,"input":`+input+`,"inputDetails":{"included":true}`), handlers.EventLoopEnded, loop, ""},
		{"timed out", ours("TIMED_OUT", `,"input":`+input), handlers.EventLoopEnded, loop, ""},
		{"aborted", ours("ABORTED", `,"input":`+input), handlers.EventLoopEnded, loop, ""},
		{"input not included", ours("FAILED", `,"inputDetails":{"included":false}`), handlers.EventLoopEnded, coordinator.Loop{}, ""},
		{"succeeded", ours("SUCCEEDED", `,"input":`+input), handlers.EventIgnored, coordinator.Loop{}, ""},
		{"running", ours("RUNNING", `,"input":`+input), handlers.EventIgnored, coordinator.Loop{}, ""},
		{"another state machine", exec(`{"executionArn":"e","stateMachineArn":"arn:aws:states:us-east-1:000000000000:stateMachine:other","status":"FAILED","input":"{}"}`), handlers.EventIgnored, coordinator.Loop{}, ""},
		{"empty", `{}`, 0, coordinator.Loop{}, `source "", detail-type ""`},
		{"not JSON", `schedule`, 0, coordinator.Loop{}, "want the EventBridge schedule"},
		{"other source", `{"source":"aws.s3","detail-type":"Object Created"}`, 0, coordinator.Loop{}, `source "aws.s3"`},
		{"no detail", exec(`null`), 0, coordinator.Loop{}, "without a detail object"},
		{"detail lacks the state machine", exec(`{"executionArn":"e","status":"FAILED"}`), 0, coordinator.Loop{}, "lacks executionArn, stateMachineArn or status"},
		{"input not a state", ours("FAILED", `,"input":"[1]"`), 0, coordinator.Loop{}, "not a loop's state"},
		{"input without a shard", ours("FAILED", `,"input":"{\"stream\":\"orders\"}"`), 0, coordinator.Loop{}, "names no shardId and owner"},
		{"input with a bad stream", ours("FAILED", `,"input":"{\"stream\":\"a b\",\"shardId\":\"s\",\"owner\":\"o\"}"`), 0, coordinator.Loop{}, "stream \"a b\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := handlers.ParseEvent([]byte(tc.event), machine)
			if tc.err != "" {
				if !errors.Is(err, handlers.ErrEvent) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want ErrEvent containing %q", err, tc.err)
				}
				return
			}
			if err != nil || ev.Kind != tc.kind || ev.Loop != tc.loop {
				t.Fatalf("ParseEvent = %+v, %v; want kind %d, loop %+v", ev, err, tc.kind, tc.loop)
			}
			if tc.kind == handlers.EventIgnored && ev.Why == "" {
				t.Error("an ignored event without a reason")
			}
		})
	}
}

// The sample events of template/events are events the coordinator takes,
// for the state machine the SAM env file names.
func TestParseEvent_TheTemplatesSampleEvents(t *testing.T) {
	dir := filepath.Join("..", "..", "template")
	b, err := os.ReadFile(filepath.Join(dir, "env", "localstack.json"))
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]map[string]string
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	machine := env["CoordinatorFunction"]["SHARDLOOP_STATE_MACHINE_ARN"]
	for file, want := range map[string]handlers.EventKind{
		"coordinator-schedule.json":         handlers.EventSchedule,
		"coordinator-failed-execution.json": handlers.EventLoopEnded,
	} {
		raw, err := os.ReadFile(filepath.Join(dir, "events", file))
		if err != nil {
			t.Fatal(err)
		}
		ev, err := handlers.ParseEvent(raw, machine)
		if err != nil || ev.Kind != want {
			t.Errorf("%s: %+v, %v; want kind %d", file, ev, err, want)
		}
		if want == handlers.EventLoopEnded && (ev.Loop.ShardID == "" || ev.Loop.Stream != "shardloop-demo") {
			t.Errorf("%s: loop %+v, want the demo stream's shard", file, ev.Loop)
		}
	}
}
