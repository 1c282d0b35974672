package looktest

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// TestDashboardWhileRestoring: while windows are being restored every data route is 503,
// and the dashboard says so instead of going blank: the badge shows the restore's progress
// from /v1/status, the header the reason. The only console messages are the browser's own
// notes of the 503 answers.
func TestDashboardWhileRestoring(t *testing.T) {
	st, err := window.NewStore(window.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := query.New(query.Config{
		Store: st,
		Ready: func() error { return errors.New("restoring windows from Kafka: 2 of 4 partitions") },
		Progress: func() any {
			return map[string]any{"partitions": []map[string]any{{"partition": 0, "done": 1.0}, {"partition": 1, "done": 0.5}}}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	dom, console := chromium(t, hs.URL+"/", 3*time.Second, "--dump-dom")
	for _, c := range console {
		if !strings.Contains(c, "status of 503") {
			t.Errorf("console: %s", c)
		}
	}
	for _, want := range []string{`class="badge warn"`, ">restoring 75%<", "metrics: not ready: restoring windows from Kafka: 2 of 4 partitions", `<pre id="console-errors"></pre>`} {
		if !strings.Contains(dom, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
