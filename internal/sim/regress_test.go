package sim

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var (
	flagSave  = flag.String("sim.save", "", "write the world of -sim.seed (and -sim.shrink) to this file as a regression case, with -sim.bug naming what it found")
	flagBug   = flag.String("sim.bug", "", "with -sim.save: what the world found, and the fix")
	flagSweep = flag.Int("sim.sweep", 0, "run each regression world with run-time seeds 1 to N and print those that break the promise (to choose its seeds with its fix reverted)")
)

// regression is one world the simulator found a bug in, kept as a test.
// The world is kept whole (not as its seed): Draw may change, the world
// does not. It runs once for each of Seeds (World.Seed is replaced): the
// run-time draws (faults, latencies, clocks) follow the seed, and a change
// to the world's machinery may move the interleaving that broke it; seeds
// that each broke it keep the case alive.
type regression struct {
	Seed   uint64   `json:"seed"` // of Draw, when it was drawn
	Seeds  []uint64 `json:"seeds,omitempty"`
	Shrunk string   `json:"shrunk,omitempty"`
	Bug    string   `json:"bug"`
	Note   string   `json:"note,omitempty"`
	World  Config   `json:"world"`
}

// TestSim_Regressions runs every world in testdata/regressions: each broke
// the promise once, by a bug since fixed.
func TestSim_Regressions(t *testing.T) {
	if *flagSave != "" {
		saveRegression(t)
		return
	}
	files, err := filepath.Glob("testdata/regressions/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no regression worlds in testdata/regressions (%v)", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var r regression
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			seeds := r.Seeds
			if *flagSweep > 0 {
				seeds = nil
				for s := range *flagSweep {
					seeds = append(seeds, uint64(s+1))
				}
			}
			if len(seeds) == 0 {
				seeds = []uint64{r.World.Seed}
			}
			var broke []uint64
			for _, seed := range seeds {
				w := r.World
				w.Seed = seed
				res := runWorld(t, w)
				if v := res.Unknown(); len(v) > 0 || (*flagStrict && res.Failed()) {
					broke = append(broke, seed)
					if *flagSweep == 0 {
						t.Errorf("%s (run-time seed %d) breaks the promise again: %s\n  bug: %s\n%s", f, seed, res.Violations[0], r.Bug, strings.Join(res.Trace(*flagTrace), "\n"))
					}
				}
			}
			if *flagSweep > 0 {
				t.Logf("%s: broken with run-time seeds %v", f, broke)
			}
		})
	}
}

func saveRegression(t *testing.T) {
	if *flagSeed == 0 || *flagBug == "" {
		t.Fatal("-sim.save needs -sim.seed and -sim.bug")
	}
	r := regression{Seed: *flagSeed, Shrunk: MaskNames(*flagShrink), Bug: *flagBug, World: Shrunk(*flagSeed, *flagShrink)}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(*flagSave, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", *flagSave)
}
