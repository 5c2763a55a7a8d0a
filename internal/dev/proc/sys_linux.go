package proc

import "syscall"

// sysProcAttr makes a child die with the tool or test that started it, even
// when that one is killed (no deferred cleanup then).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
