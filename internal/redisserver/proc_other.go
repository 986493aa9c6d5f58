//go:build !linux

package redisserver

import "syscall"

// procAttr: a process group of its own (see proc_linux.go); elsewhere there
// is no parent-death signal, so Close must be called.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
