package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/slide-metrics/slide/internal/kafkatest"
)

// serve --plans: decisions name the key's plan and take its limit, GET /v1/quota and
// slide query quota report it; the file is reloaded when it changes, a bad one is refused
// (counted, the old plans kept), and SIGHUP reloads it.
func TestServePlansReload(t *testing.T) {
	dir := t.TempDir()
	pol, plans := filepath.Join(dir, "policies.yaml"), filepath.Join(dir, "plans.yaml")
	write := func(path, s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(pol, "policies:\n  - {name: daily-requests, algorithm: fixed_window, limit: 3, window: calendar_day, timezone: Europe/London}\n")
	write(plans, "plans:\n  pro: {daily-requests: {limit: 5}}\nkeys:\n  \"tenant-*\": pro\n")
	s := startServe(t, "--embedded-kafka-addr", "127.0.0.1:0", "--policies", pol, "--plans", plans)
	base := "http://" + s.addr
	client := &http.Client{Timeout: 5 * time.Second}
	get(t, client, base+"/healthz")
	allow := func(key string) string {
		t.Helper()
		resp, err := client.Post(base+"/v1/allow", "application/json", strings.NewReader(`{"policy":"daily-requests","key":"`+key+`","cost":0}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := allow("tenant-1"); !strings.Contains(got, `"plan":"pro"`) || !strings.Contains(got, `"limit":5`) {
		t.Fatalf("tenant-1: %s, want plan pro, limit 5", got)
	}
	if got := allow("someone"); strings.Contains(got, `"plan"`) || !strings.Contains(got, `"limit":3`) {
		t.Errorf("a key without a plan: %s, want the policy's limit 3 and no plan", got)
	}
	code, out, errOut := runCmd(t, context.Background(), "", "query", "quota", "--addr", base, "--policy", "daily-requests", "--key", "tenant-1")
	if code != 0 || !strings.Contains(out, "plan pro") || !regexp.MustCompile(`\(all\)\s+5\s+0\s+5\s+20\d\d-`).MatchString(out) {
		t.Errorf("slide query quota: exit %d\n%s%s", code, out, errOut)
	}
	metric := func(result string) int {
		_, body := get(t, client, base+"/metrics")
		m := regexp.MustCompile(`slide_limiter_plan_updates_total\{result="` + result + `",source="file"\} (\d+)`).FindStringSubmatch(body)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 10 s\n%s", what, s.logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	write(plans, "plans:\n  pro: {daily-requests: {limit: 70}}\nkeys:\n  \"tenant-*\": pro\n")
	waitFor("the changed file is reloaded", func() bool { return strings.Contains(allow("tenant-1"), `"limit":70`) })
	write(plans, "plans:\n  pro: {hourly: {limit: 1}}\n")
	waitFor("the bad file is counted", func() bool { return metric("refused") == 1 })
	if got := allow("tenant-1"); !strings.Contains(got, `"limit":70`) {
		t.Errorf("after a bad reload: %s, want the old plans (limit 70)", got)
	}
	if !strings.Contains(s.logs.String(), `unknown policy or rule \"hourly\"`) {
		t.Errorf("the refusal is not logged with its reason:\n%s", s.logs.String())
	}
	write(plans, "plans:\n  pro: {daily-requests: {limit: 9}}\nkeys:\n  tenant-1: pro\n")
	waitFor("the good file is reloaded", func() bool { return strings.Contains(allow("tenant-1"), `"limit":9`) })
	applied := metric("applied")
	if err := syscallHUP(); err != nil {
		t.Fatal(err)
	}
	waitFor("SIGHUP reloads", func() bool { return metric("applied") == applied+1 })
}

// servePlansTopic starts serve on broker with a daily policy, plans pro (50) and free (5),
// tenant-1 on free by the file, and --plans-topic topic.
func servePlansTopic(t *testing.T, broker, topic string) *served {
	dir := t.TempDir()
	pol, plans := filepath.Join(dir, "policies.yaml"), filepath.Join(dir, "plans.yaml")
	os.WriteFile(pol, []byte("policies:\n  - {name: daily, algorithm: fixed_window, limit: 3, window: calendar_day}\n"), 0o600)
	os.WriteFile(plans, []byte("plans:\n  pro: {daily: {limit: 50}}\n  free: {daily: {limit: 5}}\nkeys:\n  tenant-1: free\n"), 0o600)
	return startServe(t, "--brokers", broker, "--policies", pol, "--plans", plans, "--plans-topic", topic)
}

// --plans-topic on the embedded test broker: the records already in the topic apply before
// the instance is ready (a key's plan is never the file's for a moment after a restart); a
// record moves a key to another plan (the topic wins over the file), a record naming no plan
// is refused and counted with the key's plan kept, a tombstone gives the key back to the file.
func TestServePlansTopic(t *testing.T) {
	c := kafkatest.Start(t, "events", 1, "billing-plans")
	topic := *c
	topic.Topic = "billing-plans"
	const before = 20_000
	recs := make([]kafka.Message, before)
	for i := range recs {
		recs[i] = kafka.Message{Key: []byte("bulk-" + strconv.Itoa(i)), Value: []byte("pro")}
	}
	topic.ProduceRecords(t, 0, recs...)
	s := servePlansTopic(t, c.Addr, "billing-plans")
	base := "http://" + s.addr
	client := &http.Client{Timeout: 5 * time.Second}
	get(t, client, base+"/healthz")
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := client.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 15 s\n%s", s.logs.String())
		}
	}
	for _, k := range []int{0, before / 2, before - 1} {
		if _, body := get(t, client, base+"/v1/quota?policy=daily&key=bulk-"+strconv.Itoa(k)); !strings.Contains(body, `"plan":"pro","limit":50`) {
			t.Fatalf("ready, and bulk-%d of the %d records before the start has no plan yet: %s", k, before, body)
		}
	}
	limit := func() string {
		_, body := get(t, client, base+"/v1/quota?policy=daily&key=tenant-1")
		m := regexp.MustCompile(`"plan":"(\w*)","limit":(\d+)`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("/v1/quota: %s", body)
		}
		return m[1] + " " + m[2]
	}
	if got := limit(); got != "free 5" {
		t.Fatalf("before any record: %s, want the file's free 5", got)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 15 s\n%s", what, s.logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	topic.Produce(t, kafka.Message{Key: []byte("tenant-1"), Value: []byte("pro")})
	waitFor("the topic's plan applies", func() bool { return limit() == "pro 50" })
	topic.Produce(t, kafka.Message{Key: []byte("tenant-1"), Value: []byte("platinum")})
	waitFor("the bad record is counted", func() bool {
		_, body := get(t, client, base+"/metrics")
		return strings.Contains(body, `slide_limiter_plan_updates_total{result="refused",source="topic"} 1`)
	})
	if got := limit(); got != "pro 50" {
		t.Errorf("after a record naming no plan: %s, want the key's plan kept (pro 50)", got)
	}
	topic.Produce(t, kafka.Message{Key: []byte("tenant-1"), Value: nil})
	waitFor("a tombstone gives the key back to the file", func() bool { return limit() == "free 5" })
}

// --plans-topic naming a topic that does not exist yet (the billing system has not written
// it): the instance is ready with the file's plans, and follows the topic once it appears.
func TestServePlansTopicNotYet(t *testing.T) {
	// A broker that creates no topic on a metadata request, as Kafka with
	// auto.create.topics.enable=false (kafkatest's creates them).
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0), kfake.SeedTopics(1, "events"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	c := &kafkatest.Cluster{Addr: kc.ListenAddrs()[0], Topic: "events", Partitions: 1}
	s := servePlansTopic(t, c.Addr, "later-plans")
	base := "http://" + s.addr
	client := &http.Client{Timeout: 5 * time.Second}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 15 s\n%s", what, s.logs.String())
			}
		}
	}
	waitFor("ready without the topic", func() bool {
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	conn, err := kafka.Dial("tcp", c.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.CreateTopics(kafka.TopicConfig{Topic: "later-plans", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(c.Addr), Topic: "later-plans", BatchTimeout: time.Millisecond}
	defer w.Close()
	waitFor("a record written to the new topic", func() bool {
		return w.WriteMessages(context.Background(), kafka.Message{Key: []byte("tenant-1"), Value: []byte("pro")}) == nil
	})
	waitFor("the topic is followed once it appears", func() bool {
		_, body := get(t, client, base+"/v1/quota?policy=daily&key=tenant-1")
		return strings.Contains(body, `"plan":"pro","limit":50`)
	})
}
