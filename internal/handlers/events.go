package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/shards"
)

// EventKind is what a coordinator event asks for.
type EventKind int

// The coordinator's events.
const (
	// EventSchedule: the EventBridge schedule (source aws.events,
	// detail-type "Scheduled Event").
	EventSchedule EventKind = iota + 1
	// EventNudge: a reader's nudge, {"nudge":true}.
	EventNudge
	// EventLoopEnded: an execution of this deployment's shard loop ended
	// FAILED, TIMED_OUT or ABORTED (source aws.states, detail-type "Step
	// Functions Execution Status Change"). Event.Loop names it, from the
	// execution's input; its ShardID is empty when the event does not carry
	// the input.
	EventLoopEnded
	// EventIgnored: an execution of another state machine, or a status
	// that needs nothing (RUNNING, SUCCEEDED). Event.Why says which.
	EventIgnored
)

// Event is a coordinator event, parsed.
type Event struct {
	Kind EventKind
	// Loop, Execution and Status are those of an execution event.
	Loop      coordinator.Loop
	Execution string
	Status    string
	Why       string
}

// Detail types and sources of the EventBridge events the coordinator takes.
const (
	ScheduleSource            = "aws.events"
	ScheduleDetailType        = "Scheduled Event"
	ExecutionSource           = "aws.states"
	ExecutionStatusDetailType = "Step Functions Execution Status Change"
)

// FailedStatuses are the execution statuses after which the coordinator
// watches the loop's shard; infra/ and template/ filter the rule on them.
var FailedStatuses = []string{"FAILED", "TIMED_OUT", "ABORTED"}

// ErrEvent is matched by every error ParseEvent returns.
var ErrEvent = errors.New("unrecognized coordinator event")

// EventError says what was wrong with an event.
type EventError struct{ Reason string }

func (e *EventError) Error() string   { return "coordinator event: " + e.Reason }
func (e *EventError) Is(t error) bool { return t == ErrEvent }

const eventForms = `want the EventBridge schedule ({"source":"aws.events","detail-type":"Scheduled Event",...}), ` +
	`a reader's nudge ({"nudge":true}) or a shard loop's execution status change ` +
	`({"source":"aws.states","detail-type":"Step Functions Execution Status Change","detail":{...}})`

// rawEvent has the fields of every event the coordinator takes.
type rawEvent struct {
	Nudge      bool            `json:"nudge"`
	Source     string          `json:"source"`
	DetailType string          `json:"detail-type"`
	Detail     json.RawMessage `json:"detail"`
}

type executionDetail struct {
	ExecutionARN    string  `json:"executionArn"`
	StateMachineARN string  `json:"stateMachineArn"`
	Status          string  `json:"status"`
	Input           *string `json:"input"`
	InputDetails    *struct {
		Included bool `json:"included"`
	} `json:"inputDetails"`
}

// ParseEvent tells which event raw is, for the coordinator of the state
// machine stateMachineARN. An execution event of another state machine, or
// with a status other than FailedStatuses, is EventIgnored; one of this
// state machine must carry the fields a status change has, and its input,
// when included, must be a loop's state (stream, shardId, owner). Anything
// else is an error matching ErrEvent.
func ParseEvent(raw []byte, stateMachineARN string) (Event, error) {
	bad := func(format string, args ...any) (Event, error) {
		return Event{}, &EventError{Reason: fmt.Sprintf(format, args...)}
	}
	var ev rawEvent
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&ev); err != nil {
		return bad("%v: %s", err, eventForms)
	}
	switch {
	case ev.Nudge:
		return Event{Kind: EventNudge}, nil
	case ev.Source == ScheduleSource && ev.DetailType == ScheduleDetailType:
		return Event{Kind: EventSchedule}, nil
	case ev.Source != ExecutionSource || ev.DetailType != ExecutionStatusDetailType:
		return bad("source %q, detail-type %q: %s", ev.Source, ev.DetailType, eventForms)
	}
	var d executionDetail
	if !bytes.HasPrefix(bytes.TrimSpace(ev.Detail), []byte("{")) || json.Unmarshal(ev.Detail, &d) != nil {
		return bad("an execution status change without a detail object")
	}
	if d.ExecutionARN == "" || d.StateMachineARN == "" || d.Status == "" {
		return bad("an execution status change whose detail lacks executionArn, stateMachineArn or status: %.300s", ev.Detail)
	}
	out := Event{Execution: d.ExecutionARN, Status: d.Status}
	if d.StateMachineARN != stateMachineARN {
		out.Kind, out.Why = EventIgnored, fmt.Sprintf("an execution of %s, not of this coordinator's %s", d.StateMachineARN, stateMachineARN)
		return out, nil
	}
	failed := false
	for _, s := range FailedStatuses {
		failed = failed || d.Status == s
	}
	if !failed {
		out.Kind, out.Why = EventIgnored, "status "+d.Status+" needs nothing"
		return out, nil
	}
	out.Kind = EventLoopEnded
	if d.Input == nil || (d.InputDetails != nil && !d.InputDetails.Included) {
		return out, nil
	}
	var loop coordinator.Loop
	if err := json.Unmarshal([]byte(*d.Input), &loop); err != nil {
		return bad("execution %s: its input is not a loop's state: %v", d.ExecutionARN, err)
	}
	if loop.ShardID == "" || loop.Owner == "" {
		return bad("execution %s: its input names no shardId and owner: %.300s", d.ExecutionARN, *d.Input)
	}
	if _, err := shards.StreamName(loop.Stream); err != nil {
		return bad("execution %s: its input's stream %q: %v", d.ExecutionARN, loop.Stream, err)
	}
	loop.Stream, _ = shards.StreamName(loop.Stream)
	out.Loop = loop
	return out, nil
}
