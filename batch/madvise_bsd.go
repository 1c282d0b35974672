//go:build darwin || freebsd

package batch

// adviseSequential is a no-op where package syscall has no Madvise (macOS, FreeBSD): the
// mapping is read as it is, with the kernel's default read-ahead.
func adviseSequential([]byte) {}
