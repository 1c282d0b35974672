package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The container's limit is found under cgroup v2 and v1, the smallest up the hierarchy, and
// "max" or v1's near-2^63 is no limit.
func TestCgroupMemLimit(t *testing.T) {
	write := func(t *testing.T, root, rel, content string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name      string
		proc      string
		files     map[string]string
		want      int64
		wantWhere string
	}{
		{"v2 in a namespace", "0::/\n", map[string]string{"memory.max": "2147483648\n"}, 2147483648, "memory.max"},
		{"v2 unlimited", "0::/\n", map[string]string{"memory.max": "max\n"}, 0, ""},
		{"v2 a parent's is smaller", "0::/kubepods/pod1/ctr\n", map[string]string{
			"kubepods/pod1/ctr/memory.max": "max\n", "kubepods/pod1/memory.max": "1073741824\n", "kubepods/memory.max": "8589934592\n"},
			1073741824, "kubepods/pod1/memory.max"},
		{"v1", "12:cpu,cpuacct:/x\n4:memory:/kubepods/pod2\n0::/\n", map[string]string{
			"memory/kubepods/pod2/memory.limit_in_bytes": "536870912\n", "memory/memory.limit_in_bytes": "9223372036854771712\n"},
			536870912, "memory/kubepods/pod2/memory.limit_in_bytes"},
		{"v1 unlimited", "4:memory:/\n", map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0, ""},
		{"no file", "0::/gone\n", nil, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, "proc", c.proc)
			for rel, content := range c.files {
				write(t, root, filepath.Join("sys", rel), content)
			}
			got, where := cgroupMemLimit(filepath.Join(root, "proc"), filepath.Join(root, "sys"))
			wantWhere := ""
			if c.wantWhere != "" {
				wantWhere = filepath.Join(root, "sys", c.wantWhere)
			}
			if got != c.want || where != wantWhere {
				t.Errorf("cgroupMemLimit = %d from %q, want %d from %q", got, where, c.want, wantWhere)
			}
		})
	}
}
