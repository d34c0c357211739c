package emulators

import "syscall"

// procAttr puts an emulator in its own process group (Stop ends the group)
// and has the kernel kill it when the process that started it dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
