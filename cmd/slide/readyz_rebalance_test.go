package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/internal/polltest"
	"github.com/slide-metrics/slide/internal/proctest"
	"github.com/slide-metrics/slide/limiter/clusterlimit"
)

// TestRebalanceKeepsReadyWhileGainedPartitionsRestore is a scale-down (or a rolling update)
// seen from the instance that gains partitions: once ready, it stays ready (/readyz 200)
// while a partition a rebalance handed it restores, naming it in /readyz, /v1/status and
// slide_ingest_partitions{state="restoring"}; a read over that partition answers 503
// naming it (or, with partial=allow, flagged partial), never the short count of its
// half-restored window. Before, /readyz answered 503 on every instance that gained
// partitions, so a scale-up took every pod out of the Service at once.
func TestRebalanceKeepsReadyWhileGainedPartitionsRestore(t *testing.T) {
	broker := kafkatest.Start(t, "events", 2)
	now := time.Now().UnixMilli()
	perPartition := [2]int{3, 5} // distinct counts: a short read shows which partition it lacks
	for p, n := range perPartition {
		msgs := make([]kafka.Message, n)
		for i := range msgs {
			msgs[i] = kafka.Message{Value: fmt.Appendf(nil, `{"ts":%d,"key":"k%d-%d","metric":"latency_ms","value":1}`, now, p, i)}
		}
		broker.ProduceTo(t, p, msgs...)
	}

	// Another member holds the group first, so serve starts with one partition of the two.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	holder, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: "slide", Brokers: []string{broker.Addr}, Topics: []string{"events"},
		HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 2 * time.Second,
		RebalanceTimeout: 2 * time.Second, JoinGroupBackoff: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	var holderClosed atomic.Bool
	closeHolder := func() {
		if holderClosed.CompareAndSwap(false, true) {
			_ = holder.Close()
		}
	}
	defer closeHolder()
	joined := make(chan struct{})
	wg.Go(func() {
		for first := true; ; first = false {
			if _, err := holder.Next(ctx); err != nil {
				return
			}
			if first {
				close(joined)
			}
		}
	})
	select {
	case <-joined:
	case <-time.After(20 * time.Second):
		t.Fatal("the holding member never joined the group")
	}

	// A usage rule over the whole metric: 8 events are over its 7, either partition alone is not.
	policies := filepath.Join(t.TempDir(), "policies.yaml")
	// And a cluster policy: its limiter state of a gained partition restores beside the windows.
	if err := os.WriteFile(policies, []byte("rules:\n  - {name: cap, metric: latency_ms, agg: count, window: 5m, max: 7, key: '*', on_unavailable: closed}\n"+
		"policies:\n  - {name: fw, algorithm: fixed_window, limit: 100, window: 1m, backend: cluster, on_backend_error: closed, timeout: 2s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	base := "http://" + addr
	var errb proctest.Buffer
	wg.Go(func() {
		if code := run(ctx, []string{"serve", "--addr", addr, "--brokers", broker.Addr, "--group", "slide",
			"--snapshot-interval", "0", "--policies", policies}, stdio{strings.NewReader(""), io.Discard, &errb}); code != 0 && ctx.Err() == nil {
			t.Errorf("serve exited %d: %s", code, proctest.Tail(errb.String(), 20))
		}
	})
	var st readyStatus
	polltest.Eventually(t, 20*time.Second, 20*time.Millisecond, func() bool {
		code, _, _ := proctest.Get(base + "/readyz")
		return code == 200 && proctest.GetJSON(base+"/v1/status", &st) == nil && len(st.Progress.Partitions) == 1
	}, func() string {
		return fmt.Sprintf("serve ready with one partition: %+v\n%s", st, proctest.Tail(errb.String(), 20))
	})
	own := st.Progress.Partitions[0].Partition
	gained := 1 - own

	// The broker holds the fetches of the partition serve is about to gain: first the
	// restore's plan (its probes ask for a few bytes), then the replay of the backlog.
	k := broker.Kfake()
	planned, replayed := make(chan struct{}), make(chan struct{})
	var planOnce, replayOnce sync.Once
	freePlan := func() { planOnce.Do(func() { close(planned) }) }
	free := func() { freePlan(); replayOnce.Do(func() { close(replayed) }) }
	defer free()
	k.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		for _, tp := range req.(*kmsg.FetchRequest).Topics {
			for _, p := range tp.Partitions {
				if p.Partition != gained {
					continue
				}
				if p.PartitionMaxBytes < 1<<10 { // a probe: kafka-go asks at least 65 bytes for its 1
					k.SleepControl(func() { <-planned })
				} else {
					k.SleepControl(func() { <-replayed })
				}
			}
		}
		return nil, nil, false
	})

	// The broker holds the limiter restore's offset listing of the gained partition's
	// checkpoints until the end: readiness must not wait for it once the instance was ready.
	limits := make(chan struct{})
	var limitsOnce sync.Once
	freeLimits := func() { limitsOnce.Do(func() { close(limits) }) }
	defer freeLimits()
	k.ControlKey(kmsg.ListOffsets.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		for _, tp := range req.(*kmsg.ListOffsetsRequest).Topics {
			for _, p := range tp.Partitions {
				if tp.Topic == "events"+clusterlimit.TopicSuffix && p.Partition == gained {
					k.SleepControl(func() { <-limits })
				}
			}
		}
		return nil, nil, false
	})

	read := base + "/v1/window?metric=latency_ms&key=*&window=5m"
	restoring := func(phase string) {
		t.Helper()
		code, body, _ := proctest.Get(base + "/readyz")
		if code != 200 || !strings.Contains(string(body), fmt.Sprintf(`"restoring_partitions":[%d],"restoring_limits":[%d]`, gained, gained)) {
			t.Errorf("%s: /readyz while the gained partition %d restores its windows and limiter state: %d %s; want 200 naming it twice", phase, gained, code, body)
		}
		if err := proctest.GetJSON(base+"/v1/status", &st); err != nil || !slices.Equal(st.Restoring, []int32{gained}) {
			t.Errorf("%s: /v1/status restoring_partitions %v (%v), want [%d]", phase, st.Restoring, err, gained)
		}
		text, _ := proctest.Scrape(base)
		if n, _ := proctest.Metric(text, "slide_ingest_partitions", `state="restoring"`); n != 1 {
			t.Errorf(`%s: slide_ingest_partitions{state="restoring"} = %v, want 1`, phase, n)
		}
		code, body, _ = proctest.Get(read)
		if code != 503 || !strings.Contains(string(body), fmt.Sprintf(`"missing_partitions":[%d]`, gained)) ||
			!strings.Contains(string(body), fmt.Sprintf("restoring partitions %d", gained)) {
			t.Errorf("%s: a read over the restoring partition: %d %s; want 503 naming partition %d as restoring", phase, code, body, gained)
		}
		code, body, _ = proctest.Get(read + "&partial=allow")
		if want := fmt.Sprintf(`"count":%d`, perPartition[own]); code != 200 || !strings.Contains(string(body), `"partial":true`) || !strings.Contains(string(body), want) {
			t.Errorf("%s: partial=allow over the restoring partition: %d %s; want 200 flagged partial with %s", phase, code, body, want)
		}
		if code, body, _ = proctest.Get(base + "/api/v1/query?query=sum(latency_ms_count)"); code != 503 {
			t.Errorf("%s: PromQL over the restoring partition: %d %s; want 503", phase, code, body)
		}
		// on_unavailable: closed, and the part read is not over: no decision on a short window.
		if code, body, _ := allow(http.DefaultClient, base, "cap", "any"); code != 503 {
			t.Errorf("%s: a usage rule over the restoring partition: %d %s; want 503 (on_unavailable: closed)", phase, code, body)
		}
	}

	gen := st.Progress.Generation
	closeHolder() // the rebalance: serve gains the holder's partition, with its backlog
	polltest.Eventually(t, 20*time.Second, 20*time.Millisecond, func() bool {
		return proctest.GetJSON(base+"/v1/status", &st) == nil && st.Progress.Generation > gen
	}, func() string { return fmt.Sprintf("a new generation after the holder left: %+v", st) })
	restoring("planning")
	freePlan()
	polltest.Eventually(t, 20*time.Second, 20*time.Millisecond, func() bool {
		return proctest.GetJSON(base+"/v1/status", &st) == nil && len(st.Progress.Partitions) == 2
	}, func() string { return fmt.Sprintf("the gained partition replaying: %+v", st) })
	restoring("replaying")

	free()
	want := fmt.Sprintf(`"count":%d`, perPartition[0]+perPartition[1])
	var code int
	var body []byte
	polltest.Eventually(t, 20*time.Second, 20*time.Millisecond, func() bool {
		code, body, _ = proctest.Get(read)
		return code == 200 && strings.Contains(string(body), want)
	}, func() string { return fmt.Sprintf("the whole window once restored (%s): %d %s", want, code, body) })
	if code, body, _ := proctest.Get(base + "/readyz"); code != 200 || strings.Contains(string(body), "restoring_partitions") ||
		!strings.Contains(string(body), fmt.Sprintf(`"restoring_limits":[%d]`, gained)) {
		t.Errorf("/readyz with the windows restored, the limiter state not: %d %s", code, body)
	}
	if text, _ := proctest.Scrape(base); !strings.Contains(text, "\nslide_limiter_cluster_partitions_restoring 1\n") {
		t.Errorf("slide_limiter_cluster_partitions_restoring while the gained partition's limiter state restores: not 1 in\n%s", text)
	}
	freeLimits()
	polltest.Eventually(t, 20*time.Second, 20*time.Millisecond, func() bool {
		code, body, _ = proctest.Get(base + "/readyz")
		return code == 200 && !strings.Contains(string(body), "restoring")
	}, func() string { return fmt.Sprintf("/readyz once the limiter state is restored: %d %s", code, body) })
	if code, body, _ := allow(http.DefaultClient, base, "cap", "any"); code != 429 {
		t.Errorf("the usage rule once restored: %d %s; want 429 (8 events, max 7)", code, body)
	}
}

// status is the part of GET /v1/status the readiness tests read.
type readyStatus struct {
	Ready     bool    `json:"ready"`
	Restoring []int32 `json:"restoring_partitions"`
	Progress  struct {
		Generation int32 `json:"generation"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			Restored  bool  `json:"restored"`
		} `json:"partitions"`
	} `json:"progress"`
}
