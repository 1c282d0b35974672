package redistest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster is a Redis Cluster of real redis-server processes on loopback, made with
// `redis-cli --cluster create`. Starting one costs a few seconds: share it between the
// subtests of one test.
type Cluster struct {
	// Nodes are every server, masters first as created (a failover changes roles).
	Nodes []*Server
	// Masters is how many of Nodes were created as masters.
	Masters int
}

// StartCluster starts masters masters with replicas replicas each (node timeout 1 s, so a
// failover takes a second or two), creates the cluster and waits until every node reports
// cluster_state:ok. Each node's bus port is free port of its own. It fails the test if
// redis-server or redis-cli is missing or the cluster does not form within 30 s.
func StartCluster(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatal("redis-cli not found: run `make deps` (installs redis-server, which brings redis-tools)")
	}
	c := &Cluster{Masters: masters}
	for i := 0; i < masters*(1+replicas); i++ {
		bus, err := freePort()
		if err != nil {
			t.Fatalf("redistest: finding a free port: %v", err)
		}
		c.Nodes = append(c.Nodes, Start(t,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "1000",
			"--cluster-port", strconv.Itoa(bus),
			// A test may kill a master: its slots must move to the replica, not wait.
			"--cluster-replica-validity-factor", "0",
		))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitOK(t, 30*time.Second)
	return c
}

// Addrs are the host:port of every node.
func (c *Cluster) Addrs() []string { return addrs(c.Nodes) }

// addrs are the host:port of servers.
func addrs(servers []*Server) []string {
	var a []string
	for _, n := range servers {
		a = append(a, n.Addr)
	}
	return a
}

// WaitOK waits until every running node reports cluster_state:ok and agrees on who
// serves all 16384 slots.
func (c *Cluster) WaitOK(t testing.TB, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		bad := ""
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			info, err := n.Do("CLUSTER", "INFO")
			if err != nil {
				bad = fmt.Sprintf("%s: %v", n.Addr, err)
				break
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
				bad = n.Addr + ": " + firstLine(info, "cluster_state")
				break
			}
		}
		if bad == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: cluster not ok within %s: %s", within, bad)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// MasterOf returns the running node that serves key's slot as master.
func (c *Cluster) MasterOf(t testing.TB, key string) *Server {
	t.Helper()
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		slot, err := n.Do("CLUSTER", "KEYSLOT", key)
		if err != nil {
			continue
		}
		role, err := n.Do("ROLE")
		if err != nil || !strings.HasPrefix(role, "master") {
			continue
		}
		// CLUSTER NODES' "myself" line lists the slot ranges this master serves.
		nodes, err := n.Do("CLUSTER", "NODES")
		if err != nil {
			continue
		}
		s, _ := strconv.Atoi(slot)
		for _, line := range strings.Split(nodes, "\n") {
			f := strings.Fields(line)
			if len(f) < 9 || !strings.Contains(f[2], "myself") {
				continue
			}
			for _, r := range f[8:] {
				lo, hi, ok := strings.Cut(r, "-")
				if !ok {
					hi = lo
				}
				a, err1 := strconv.Atoi(lo)
				b, err2 := strconv.Atoi(hi)
				if err1 == nil && err2 == nil && a <= s && s <= b {
					return n
				}
			}
		}
	}
	t.Fatalf("redistest: no running master serves %q", key)
	return nil
}

func firstLine(info, prefix string) string {
	for _, l := range strings.Split(info, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			return strings.TrimSpace(l)
		}
	}
	return "(no " + prefix + ")"
}

// Sentinel is one master, one replica and three Sentinels monitoring them as MasterName.
type Sentinel struct {
	MasterName string
	Master     *Server
	Replica    *Server
	Sentinels  []*Server
}

// StartSentinel starts a master, a replica of it and three Sentinels (quorum 2, down after
// 500 ms, failover timeout 2 s) and waits until every Sentinel knows the replica and the
// other Sentinels. It fails the test if they do not within 20 s.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	s := &Sentinel{MasterName: "slidemaster"}
	s.Master = Start(t)
	s.Replica = Start(t, "--replicaof", "127.0.0.1", portOf(s.Master.Addr))
	for i := 0; i < 3; i++ {
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		body := strings.Join([]string{
			"sentinel monitor " + s.MasterName + " 127.0.0.1 " + portOf(s.Master.Addr) + " 2",
			"sentinel down-after-milliseconds " + s.MasterName + " 500",
			"sentinel failover-timeout " + s.MasterName + " 2000",
			"sentinel parallel-syncs " + s.MasterName + " 1",
		}, "\n") + "\n"
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatalf("redistest: writing %s: %v", conf, err)
		}
		s.Sentinels = append(s.Sentinels, startSentinel(t, conf))
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, sn := range s.Sentinels {
		for {
			out, err := sn.Do("SENTINEL", "MASTER", s.MasterName)
			if err == nil && infoField(out, "num-slaves") == "1" && infoField(out, "num-other-sentinels") == "2" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: sentinel %s does not see the replica and the others: %v\n%s", sn.Addr, err, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return s
}

// SentinelAddrs are the Sentinels' host:port.
func (s *Sentinel) SentinelAddrs() []string { return addrs(s.Sentinels) }

// MasterAddr asks the first running Sentinel which address is the master now.
func (s *Sentinel) MasterAddr(t testing.TB) string {
	t.Helper()
	for _, sn := range s.Sentinels {
		out, err := sn.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.MasterName)
		if err == nil {
			f := strings.Split(out, "\n")
			if len(f) == 2 {
				return net.JoinHostPort(f[0], f[1])
			}
		}
	}
	t.Fatal("redistest: no sentinel answers GET-MASTER-ADDR-BY-NAME")
	return ""
}

// infoField reads field from a flat name/value reply, one per line.
func infoField(reply, field string) string {
	f := strings.Split(reply, "\n")
	for i := 0; i+1 < len(f); i += 2 {
		if f[i] == field {
			return f[i+1]
		}
	}
	return ""
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}
