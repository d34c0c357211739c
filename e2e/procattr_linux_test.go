package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/shardloop/shardloop/internal/emulators"
)

// supported reports whether this host can run the linux bootstraps.
const supported = true

// procAttr puts a child in its own process group (so a kill reaches the
// function the emulator started too) and kills it when the test binary dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills a child's whole process group.
func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }

// startLocked starts cmd on the one thread that never exits, so its
// PDEATHSIG stays tied to the life of the test binary.
func startLocked(cmd *exec.Cmd) error { return emulators.StartTied(cmd) }

// childPids lists the processes whose parent is pid, from /proc.
func childPids(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(string(f[1])); ppid == pid {
			if c, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}
