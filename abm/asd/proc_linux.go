package asd

import "syscall"

// sysProcAttr makes the node die with the process that started it and puts
// it in its own process group so a terminal's SIGINT reaches only the parent
// (which then stops it in order).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
