package redisserver

import "syscall"

// procAttr: redis-server gets a process group of its own, so the SIGINT a
// terminal sends its foreground group on Ctrl-C does not stop it before its
// owner is done with it; and it is killed if the process that started it
// dies, so a crashed test or demo leaves no server behind.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
