package runner

import (
	"errors"
	"testing"

	"github.com/shardloop/shardloop/pkg/lease"
)

// TestDeadStore_AKilledLoopWritesNothing: every write of a killed loop is
// refused, the pin of a tip opening and a window's state included, as a dead
// process makes none.
func TestDeadStore_AKilledLoopWritesNothing(t *testing.T) {
	mem, err := lease.NewMemoryStore()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := mem.Take(ctx, "s", "sh", "loop"); err != nil {
		t.Fatal(err)
	}
	ks := &killSwitch{}
	d := deadStore{store: mem, ks: ks}
	ks.kill()
	writes := map[string]error{}
	_, writes["take"] = d.Take(ctx, "s", "sh", "loop")
	_, writes["renew"] = d.Renew(ctx, "s", "sh", "loop", lease.Renewal{})
	_, writes["checkpoint"] = d.Checkpoint(ctx, "s", "sh", "loop", "5")
	_, writes["pin"] = d.Pin(ctx, "s", "sh", "loop", "timestamp:1")
	writes["release"] = d.Release(ctx, "s", "sh", "loop", lease.Handover{})
	writes["window"] = d.CheckpointWindow(ctx, "s", "sh", "loop", lease.Window{Seq: "5", State: []byte(`{}`)})
	for op, err := range writes {
		if !errors.Is(err, errKilled) {
			t.Errorf("%s by a killed loop: err = %v, want errKilled", op, err)
		}
	}
	if row, _ := mem.Get(ctx, "s", "sh"); row.Counter != 1 || row.Start != "" || row.Checkpoint != "" || row.Owner != "loop" {
		t.Fatalf("row %+v changed after the kill", row)
	}
	if w, err := mem.GetWindow(ctx, "s", "sh"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("window %+v (err %v) written after the kill", w, err)
	}
}
