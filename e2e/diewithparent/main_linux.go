// Command diewithparent runs a command that dies with its parent process:
// it asks the kernel for SIGKILL when its parent exits (PR_SET_PDEATHSIG,
// kept across exec) and then execs the command in its place.
//
// The end-to-end test puts it between the Runtime Interface Emulator and
// each Lambda bootstrap: the emulator starts the function in a process
// group of its own, so without this a function outlives a killed emulator
// (or a killed test binary) until its current invocation ends.
//
//	diewithparent /path/to/bootstrap [args...]
package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: diewithparent command [args...]")
		os.Exit(2)
	}
	parent := os.Getppid()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		fmt.Fprintln(os.Stderr, "diewithparent: prctl:", errno)
		os.Exit(1)
	}
	if os.Getppid() != parent { // the parent died before the prctl
		os.Exit(1)
	}
	path, err := exec.LookPath(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "diewithparent:", err)
		os.Exit(127)
	}
	err = syscall.Exec(path, os.Args[1:], os.Environ())
	fmt.Fprintln(os.Stderr, "diewithparent: exec:", err)
	os.Exit(126)
}
