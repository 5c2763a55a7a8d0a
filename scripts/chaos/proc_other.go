//go:build !linux

package main

import "syscall"

// sysProcAttr: without Pdeathsig, children are ended by Run's deferred
// cleanup only.
func sysProcAttr() *syscall.SysProcAttr { return nil }
