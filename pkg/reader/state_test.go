package reader

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// The state machine's ASL reads these names; they must not change.
var fixedStateFields = []string{"stream", "streamArn", "shardId", "owner", "iterator", "iteratorIssuedAt",
	"firstSequence", "checkpoint", "iteration", "continue", "continueAsNew", "reason"}

func TestState_JSONRoundTripsTheFixture(t *testing.T) {
	raw, err := os.ReadFile("testdata/state.json")
	if err != nil {
		t.Fatal(err)
	}
	var st State
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(out), bytes.TrimSpace(raw)) {
		t.Errorf("round trip changed the state:\n%s", out)
	}
}

func TestState_FixedFieldsAlwaysPresent(t *testing.T) {
	b, _ := json.Marshal(State{})
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, f := range fixedStateFields {
		if _, ok := m[f]; !ok {
			t.Errorf("field %q missing from the zero state's JSON %s", f, b)
		}
	}
	if !slices.Contains(fixedStateFields, "continue") {
		t.Fatal("unreachable")
	}
}
