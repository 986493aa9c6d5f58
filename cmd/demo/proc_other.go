//go:build !linux

package main

import "syscall"

// nodeProcAttr: a process group of its own (see proc_linux.go); elsewhere
// there is no parent-death signal: a node exits when its stdin ends.
func nodeProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
