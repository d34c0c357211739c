//go:build !linux

package e2e

import (
	"os/exec"
	"syscall"
)

// supported is false: the bootstraps are linux binaries and the emulator
// children cannot be tied to the test binary's life here.
const supported = false

func procAttr() *syscall.SysProcAttr { return nil }

func killGroup(pid int) {}

func childPids(pid int) []int { return nil }

func startLocked(cmd *exec.Cmd) error { return cmd.Start() }
