//go:build !linux

package testenv

import "syscall"

// sysProcAttr puts the child in its own process group. Outside Linux there is
// no parent-death signal; sweepOrphans relies on /proc and does nothing.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
