//go:build unix

// Command pause is the process that holds a Pod's namespaces on testenv's
// real nodes: it sleeps, reaps the children it inherits (it is PID 1 of the
// Pod's PID namespace when the Pod shares one), and exits when asked to
// stop. testenv builds it from this file at run time (see package pause).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
