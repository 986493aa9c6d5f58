package main

import "syscall"

// nodeProcAttr: a node gets a process group of its own, so the SIGINT a
// terminal sends its foreground group on Ctrl-C reaches only the
// orchestrator, which stops the nodes in order; and it is killed if the
// orchestrator dies, so nothing is left behind.
func nodeProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
