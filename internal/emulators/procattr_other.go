//go:build unix && !linux

package emulators

import "syscall"

// procAttr puts an emulator in its own process group (Stop ends the group).
// Only Linux can tie a child's life to its parent: elsewhere an emulator
// outlives a test binary that is killed before it can call Stop.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
