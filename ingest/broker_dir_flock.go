//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package ingest

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes f's exclusive lock without waiting; errDirInUse when another holds it.
func lockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errDirInUse
	}
	return err
}
