package testenv

import "syscall"

// sysProcAttr puts the child in its own process group and has the kernel
// kill it if this process dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
