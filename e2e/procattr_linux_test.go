package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
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

// PDEATHSIG fires when the thread that forked the child exits, and the Go
// runtime may retire threads: every Start runs on one locked thread that
// never exits, so the signal is tied to the life of the test binary.
var (
	starterOnce sync.Once
	starterCh   chan startReq
)

type startReq struct {
	cmd  *exec.Cmd
	errc chan error
}

func startLocked(cmd *exec.Cmd) error {
	starterOnce.Do(func() {
		starterCh = make(chan startReq)
		go func() {
			runtime.LockOSThread()
			for r := range starterCh {
				r.errc <- r.cmd.Start()
			}
		}()
	})
	errc := make(chan error, 1)
	starterCh <- startReq{cmd, errc}
	return <-errc
}

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
