package reliability_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/proctest"
)

// TestSIGHUPStopsNothing: SIGHUP is a reload signal (operating.md's kill -HUP "$(pidof slide)"
// after a certificate renewal, systemd's ExecReload), and it reaches every slide it is sent to.
// serve reloads --plans and --tls-cert on it; a serve without them, and slide broker, ended at
// once by the signal's default action, without a line of log: the broker's in-memory log and
// the serve's windows gone. Each now logs that it reloads nothing and goes on.
func TestSIGHUPStopsNothing(t *testing.T) {
	broker, addr := proctest.Broker(t, slideBin, 2)
	s := startSlide(t, "serve", addr, "hup")
	for _, p := range []*proctest.Proc{broker, s.Proc} {
		if err := syscall.Kill(p.PID(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if line, err := p.WaitOutput("SIGHUP", 10*time.Second); err != nil {
			t.Fatalf("%s after SIGHUP: %v", p.Name, err)
		} else {
			t.Logf("%s: %s", p.Name, line)
		}
	}
	// Both still work: serve answers and reaches the broker (ready means Kafka answered).
	if err := proctest.WaitStatus(context.Background(), s.base+"/readyz", 200, 20*time.Second); err != nil {
		t.Fatalf("serve after SIGHUP: %v", err)
	}
	if broker.Exited() || s.Exited() {
		t.Fatalf("exited after SIGHUP: broker %v, serve %v", broker.Exited(), s.Exited())
	}
}
