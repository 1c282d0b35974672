package batch

import "syscall"

// adviseSequential hints that data, a file's mapping, is read from start to end: the kernel
// reads ahead for a file not yet in the page cache.
func adviseSequential(data []byte) { _ = syscall.Madvise(data, syscall.MADV_SEQUENTIAL) }
