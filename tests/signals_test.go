package tests

import "syscall"

// Signals that pause and resume a process, for the tests that freeze one.
var (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
)
