package main

import "syscall"

// sysProcAttr makes a child die with the chaos run even when the run itself
// is killed (no deferred cleanup then).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
