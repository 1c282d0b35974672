//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package ingest

import "os"

// lockFile is a no-op where there is no flock: the directory is not guarded.
func lockFile(*os.File) error { return nil }
