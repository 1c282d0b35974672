package ingest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DataDirError is StartBroker's error about BrokerConfig.DataDir: it cannot be created or
// written, or another broker holds it. Err says which.
type DataDirError struct {
	Dir string
	Err error
}

func (e *DataDirError) Error() string { return "data directory " + e.Dir + ": " + e.Err.Error() }
func (e *DataDirError) Unwrap() error { return e.Err }

// errDirInUse is lockDir's error when another process holds the directory's lock.
var errDirInUse = errors.New("in use by another broker")

// dirLockName is the file in a data directory that a running broker holds locked.
const dirLockName = "slide-broker.lock"

// lockDataDir creates dir when missing and takes its lock, so that two brokers never share
// one directory: each would append its own records to the same segment files at the same
// offsets, and a broker started on it afterwards reloads a log of both, with offsets given
// twice (seen: two `slide broker --data-dir d` both started and both acknowledged writes).
// It also finds a directory that cannot be written before the broker does, with one line
// instead of one per file. The lock is the operating system's (flock where there is one),
// so a broker that crashed holds nothing; the file keeps the holder's pid for the message.
func lockDataDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, &DataDirError{Dir: dir, Err: err}
	}
	path := filepath.Join(dir, dirLockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, &DataDirError{Dir: dir, Err: err}
	}
	if err := lockFile(f); err != nil {
		f.Close()
		if errors.Is(err, errDirInUse) {
			holder, _ := os.ReadFile(path)
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(holder))); perr == nil {
				err = fmt.Errorf("%w (pid %d): give each broker its own directory", errDirInUse, pid)
			} else {
				err = fmt.Errorf("%w: give each broker its own directory", errDirInUse)
			}
		}
		return nil, &DataDirError{Dir: dir, Err: err}
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, &DataDirError{Dir: dir, Err: err}
	}
	return f, nil
}
