package lease

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Heartbeat is a runner's heartbeat row: one per runner and stream, in the
// lease table beside the stream's shard rows (List never returns it). Local
// runners that share a table (pkg/runner with balancing on) each keep one,
// so that they can divide the stream's shards between the runners alive.
//
// Whether a runner is alive is judged like a lease: a watcher that has seen
// its Counter stand still for a lease duration on its own clock deems it
// gone (Observer.ObserveRunner). BeatAt is the runner's own clock, for
// operators only.
type Heartbeat struct {
	// Runner is the runner's id: letters, digits, '-', '_' and '.', at
	// most MaxRunnerID characters.
	Runner string
	// Host and PID say where the runner runs, for operators.
	Host string
	PID  int
	// Leases is how many of the stream's leases the runner held at its last
	// beat.
	Leases int
	// Counter goes up with every beat. It is 0 for a runner listed among the
	// stream's runners without a row (between the two writes of a first
	// Beat or of a Leave).
	Counter int64
	// BeatAt is the runner's clock at its last beat.
	BeatAt time.Time
}

// MaxRunnerID is the longest runner id.
const MaxRunnerID = 64

// RunnerSeparator ends a loop owner id of a runner with the runner's id
// ("<shard>-<random>@<runner>"), so that the owner on a row names the
// runner that reads the shard (OwnerRunner).
const RunnerSeparator = "@"

// RunnerOwner returns the owner id loop owner in runner's name: loop +
// RunnerSeparator + runner.
func RunnerOwner(loop, runner string) string { return loop + RunnerSeparator + runner }

// OwnerRunner returns the runner named by an owner id (a loop owner or one
// of its run owners, "<loop>@<runner>/<run>"), or "" when the owner names
// none (a loop of the coordinator Lambda).
func OwnerRunner(owner string) string {
	loop := LoopOwner(owner)
	i := strings.LastIndex(loop, RunnerSeparator)
	if i < 0 {
		return ""
	}
	return loop[i+len(RunnerSeparator):]
}

// runnerKey is the key of a runner's heartbeat row; runnersKey the key of
// the row listing a stream's runners.
func runnerKey(stream, runner string) string {
	return stream + metaSeparator + "runner" + metaSeparator + runner
}

func runnersKey(stream string) string { return stream + metaSeparator + "runners" }

// CheckRunnerID reports whether id may name a runner.
func CheckRunnerID(id string) error {
	if id == "" || len(id) > MaxRunnerID {
		return &InvalidError{Field: "runner id", Value: id, Want: fmt.Sprintf("1 to %d characters", MaxRunnerID)}
	}
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
		default:
			return &InvalidError{Field: "runner id", Value: id, Want: "letters, digits, '-', '_' and '.' only"}
		}
	}
	return nil
}

func checkBeat(stream string, hb Heartbeat) error {
	if err := checkName("stream", stream); err != nil {
		return err
	}
	if err := CheckRunnerID(hb.Runner); err != nil {
		return err
	}
	if hb.Leases < 0 || hb.PID < 0 {
		return &InvalidError{Field: "heartbeat", Value: fmt.Sprintf("leases %d, pid %d", hb.Leases, hb.PID), Want: "no negative count"}
	}
	return nil
}

func checkLeave(stream, runner string, counter int64) error {
	if err := checkName("stream", stream); err != nil {
		return err
	}
	if err := CheckRunnerID(runner); err != nil {
		return err
	}
	if counter < 0 {
		return &InvalidError{Field: "heartbeat counter", Value: fmt.Sprint(counter), Want: "0 or more"}
	}
	return nil
}

func sortByRunner(hs []Heartbeat) {
	slices.SortFunc(hs, func(a, b Heartbeat) int { return strings.Compare(a.Runner, b.Runner) })
}
