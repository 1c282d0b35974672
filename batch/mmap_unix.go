//go:build linux || darwin || freebsd

package batch

import (
	"os"
	"syscall"
)

// mapFile maps a regular, non-empty file read-only, or returns ok = false (a pipe, a terminal,
// an empty file, a failed mmap: the caller streams it instead). The mapping is page cache: it
// costs no heap, and the kernel pages it in (and out) as the workers read it.
func mapFile(f *os.File) (data []byte, unmap func(), ok bool) {
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() <= 0 || st.Size() != int64(int(st.Size())) {
		return nil, nil, false
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, false
	}
	adviseSequential(data) // a hint; read-ahead for files not cached
	return data, func() { _ = syscall.Munmap(data) }, true
}
