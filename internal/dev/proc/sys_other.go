//go:build !linux

package proc

import "syscall"

// sysProcAttr: without Pdeathsig, children are ended by their starter's
// deferred cleanup only.
func sysProcAttr() *syscall.SysProcAttr { return nil }
