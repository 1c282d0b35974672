package redislimit_test

import (
	"testing"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/redislimit"
)

// A master, a replica and three Sentinels: the suites pass through go-redis's failover
// client, and after SIGKILL of the master decisions recover once the replica is promoted.
func TestSentinel(t *testing.T) {
	s := redistest.StartSentinel(t)
	conn := redislimit.Conn{SentinelMaster: s.MasterName, Sentinels: s.SentinelAddrs()}
	t.Run("conformance", func(t *testing.T) { conformance(t, connClient(t, conn)) })
	t.Run("scale_out", func(t *testing.T) {
		scaleOut(t, func() limiter.Backend { return connBackend(t, conn) }, false)
	})
	t.Run("kill_master", func(t *testing.T) {
		failover(t, conn, "tenant-sentinel", s.Master.Stop,
			func() bool { return s.MasterAddr(t) == s.Replica.Addr },
			func(string) *redistest.Server { return s.Replica }, false)
	})
}
