package sim

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// flagBenchWorlds is how many worlds the benchmark runs.
var flagBenchWorlds = flag.Int("sim.benchworlds", 20000, "how many worlds BenchmarkSim runs")

// BenchmarkSim prints how many worlds of at least ten simulated minutes
// run a minute on this machine, and how many of 20,000 broke the promise.
// synctest needs a *testing.T, so it runs TestSim in a child process of
// this test binary and reads its summary line.
func BenchmarkSim(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		began := time.Now()
		cmd := exec.Command(exe, "-test.run=^TestSim$", "-test.timeout=0", fmt.Sprintf("-sim.seeds=%d", *flagBenchWorlds),
			"-sim.first=1000001", "-sim.quiet", "-sim.noshrink", "-sim.trace=0")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		runErr := cmd.Run() // a failing world fails the child: still a figure
		m := summaryLine.FindStringSubmatch(out.String())
		if m == nil {
			b.Fatalf("TestSim printed no summary (%v):\n%s", runErr, tail(out.String(), 3000))
		}
		worlds, _ := strconv.Atoi(m[1])
		bad, _ := strconv.Atoi(m[2])
		known, _ := strconv.Atoi(m[3])
		perMin, _ := strconv.ParseFloat(m[6], 64)
		fmt.Printf("bench sim_worlds_per_minute %.0f worlds/min (%d worlds of 10 to 12 simulated minutes and their drain, %s simulated hours, in %s on %d CPUs)\n",
			perMin, worlds, m[5], time.Since(began).Round(time.Second), numCPU())
		fmt.Printf("bench sim_violations %d worlds (of %d; %d of them by known bugs%s; %d by others)\n",
			bad+known, worlds, known, m[4], bad)
	}
}

var summaryLine = regexp.MustCompile(`sim: (\d+) worlds \(seeds \d+ to \d+\), (\d+) violating \((\d+) more by known bugs([^)]*)\), ([\d.]+) simulated hours in \S+: (\d+) worlds a minute`)

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func numCPU() int { return runtime.NumCPU() }
