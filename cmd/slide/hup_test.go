package main

import (
	"os"
	"syscall"
)

// syscallHUP sends SIGHUP to this process, as `kill -HUP` does to slide serve.
func syscallHUP() error { return syscall.Kill(os.Getpid(), syscall.SIGHUP) }
