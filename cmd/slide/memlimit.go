package main

import (
	"bufio"
	"bytes"
	"log/slog"
	"os"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// The Go memory limit from the container's. A pod's memory limit kills the process when its
// resident memory reaches it; the Go runtime, told nothing, lets the heap double between
// collections and learns of the limit from the OOM killer. With GOMEMLIMIT unset, serve reads
// the limit of its cgroup (v2 memory.max, v1 memory.limit_in_bytes; the smallest up the
// hierarchy) and sets the runtime's limit to memLimitShare of it, leaving the rest to what the
// runtime does not count (thread stacks, the kernel's socket buffers, fragmentation). A
// GOMEMLIMIT given is the operator's word and is kept. No limit found, nothing is set.

// memLimitShare is the share of the container's memory limit the Go runtime's limit is set to.
const memLimitShare = 0.9

// setMemLimit sets the runtime's memory limit from the cgroup's unless GOMEMLIMIT is set, and
// logs what it did.
func setMemLimit(log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit, where := cgroupMemLimit("/proc/self/cgroup", "/sys/fs/cgroup")
	if limit <= 0 {
		return
	}
	goLimit := int64(float64(limit) * memLimitShare)
	debug.SetMemoryLimit(goLimit)
	log.Info("Go memory limit set from the container's (GOMEMLIMIT overrides)", "container_limit", limit, "go_limit", goLimit, "cgroup", where)
}

// cgroupMemLimit is the memory limit of the cgroup procCgroup (a /proc/PID/cgroup) names,
// under the cgroup file system at root: the smallest limit of it and its ancestors, and the
// file it came from; 0 when none is set.
func cgroupMemLimit(procCgroup, root string) (int64, string) {
	data, err := os.ReadFile(procCgroup)
	if err != nil {
		return 0, ""
	}
	var best int64
	var where string
	look := func(dir, file string) {
		for d := path.Clean("/" + dir); ; d = path.Dir(d) {
			f := path.Join(root, d, file)
			if v, ok := readLimit(f); ok && (best == 0 || v < best) {
				best, where = v, f
			}
			if d == "/" {
				return
			}
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// "0::/kubepods/…" (v2), "4:memory:/kubepods/…" (v1).
		f := strings.SplitN(sc.Text(), ":", 3)
		switch {
		case len(f) != 3:
		case f[0] == "0" && f[1] == "":
			look(f[2], "memory.max")
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			look(path.Join("memory", f[2]), "memory.limit_in_bytes")
		}
	}
	return best, where
}

// readLimit reads a cgroup memory limit file: a number of bytes, or "max" (v2) or a number near
// 2^63 (v1) for none.
func readLimit(file string) (int64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 || v >= 1<<62 {
		return 0, false
	}
	return v, true
}
