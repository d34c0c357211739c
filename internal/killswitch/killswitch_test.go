package killswitch_test

import (
	"errors"
	"testing"

	"github.com/shardloop/shardloop/internal/killswitch"
	"github.com/shardloop/shardloop/pkg/lease"
)

var errGone = errors.New("gone")

// TestStore_ADeadWriterWritesNothing: every write of a killed loop or a
// dead invocation is refused, the pin of a tip opening and a window's state
// included, as a dead process makes none; reads go on, and rows written
// before the kill reach Wrote.
func TestStore_ADeadWriterWritesNothing(t *testing.T) {
	mem, err := lease.NewMemoryStore()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ks := &killswitch.Switch{}
	var seen []int64
	d := killswitch.Store{Store: mem, Dead: ks.Dead, Err: errGone, Wrote: func(l lease.Lease) { seen = append(seen, l.Counter) }}
	if _, err := d.Take(ctx, "s", "sh", "loop"); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != 1 {
		t.Fatalf("Wrote saw counters %v, want the take's 1", seen)
	}
	ks.Kill()
	if !ks.Dead() {
		t.Fatal("a thrown switch is not dead")
	}
	writes := map[string]error{}
	_, writes["take"] = d.Take(ctx, "s", "sh", "loop")
	_, writes["renew"] = d.Renew(ctx, "s", "sh", "loop", lease.Renewal{})
	_, writes["checkpoint"] = d.Checkpoint(ctx, "s", "sh", "loop", "5")
	_, writes["pin"] = d.Pin(ctx, "s", "sh", "loop", "timestamp:1")
	writes["release"] = d.Release(ctx, "s", "sh", "loop", lease.Handover{})
	writes["window"] = d.CheckpointWindow(ctx, "s", "sh", "loop", lease.Window{Seq: "5", State: []byte(`{}`)})
	for op, err := range writes {
		if !errors.Is(err, errGone) {
			t.Errorf("%s by a dead writer: err = %v, want its Err", op, err)
		}
	}
	row, err := d.Get(ctx, "s", "sh")
	if err != nil || row.Counter != 1 || row.Start != "" || row.Checkpoint != "" || row.Owner != "loop" {
		t.Fatalf("row %+v (err %v) after the kill, want it as the take left it", row, err)
	}
	if w, err := d.GetWindow(ctx, "s", "sh"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("window %+v (err %v) written after the kill", w, err)
	}
	if len(seen) != 1 {
		t.Fatalf("Wrote saw %v, want nothing after the kill", seen)
	}
}
