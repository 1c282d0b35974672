package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/internal/proctest"
	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/internal/tlstest"
	"github.com/slide-metrics/slide/limiter/redislimit"
	"github.com/slide-metrics/slide/query"
)

// served is a `slide serve` running in process.
type served struct {
	addr string
	logs *proctest.Buffer
	stop func()
}

// startServe runs serve with args plus a free --addr until the test ends.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	s := &served{addr: freeAddr(t), logs: new(proctest.Buffer)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--addr", s.addr}, args...), stdio{strings.NewReader(""), io.Discard, s.logs})
	}()
	stopped := false
	s.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Errorf("serve did not stop:\n%s", s.logs.String())
		}
	}
	t.Cleanup(s.stop)
	return s
}

// get polls url with client until it answers.
func get(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := client.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readyz waits until /readyz shows every backend checked, and returns it.
func readyz(t *testing.T, client *http.Client, base string) (int, readyzBody) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, body := get(t, client, base+"/readyz")
		var r readyzBody
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("/readyz: %v: %s", err, body)
		}
		checked := len(r.Backends) > 0
		for _, b := range r.Backends {
			checked = checked && b.State != "checking"
		}
		if checked {
			return code, r
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never showed every backend checked: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type readyzBody struct {
	Status string `json:"status"`
	Error  struct {
		Message string `json:"message"`
	} `json:"error"`
	Backends []query.BackendState `json:"backends"`
}

func (r readyzBody) backend(name string) query.BackendState {
	for _, b := range r.Backends {
		if b.Name == name {
			return b
		}
	}
	return query.BackendState{}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// noSecret fails the test if any of the texts contains secret.
func noSecret(t *testing.T, secret string, texts map[string]string) {
	t.Helper()
	for where, s := range texts {
		if strings.Contains(s, secret) {
			t.Errorf("the password %q appears in %s:\n%s", secret, where, s)
		}
	}
}

// Kafka over TLS with a private CA, with and without SCRAM-SHA-512 (SASL_SSL and SSL): an
// independent producer writes through it (kcat, librdkafka, over SSL; `slide produce` over
// SASL_SSL, since kfake's SASL handshake is one librdkafka does not accept), serve's
// consumer counts every event, and /readyz shows Kafka ok. serve reads the password from a
// file, produce from the environment; neither shows it.
func TestServeTLSKafka(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat not found: run `make deps` (apt-get install kcat)")
	}
	const password = "kafka-pw-3f9a"
	ca := tlstest.NewCA(t, "kafka")
	slideCert, kcatCert := ca.Client("slide"), ca.Client("kcat")
	for _, tc := range []struct {
		name  string
		mtls  bool
		users []kafkatest.User
	}{
		{"ssl, kcat", false, nil},
		{"mtls, kcat", true, nil},
		{"sasl_ssl, slide produce", false, []kafkatest.User{{Method: "SCRAM-SHA-512", Name: "slide", Password: password}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := ca.ServerTLS(nil)
			security := []string{"--brokers", "", "--kafka-ca", ca.CertFile}
			kcatTLS := []string{"-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + ca.CertFile}
			if tc.mtls {
				server = ca.ServerTLS(ca.Pool)
				security = append(security, "--kafka-cert", slideCert.CertFile, "--kafka-key", slideCert.KeyFile)
				kcatTLS = append(kcatTLS, "-X", "ssl.certificate.location="+kcatCert.CertFile, "-X", "ssl.key.location="+kcatCert.KeyFile)
			}
			c := kafkatest.StartWith(t, kafkatest.Opts{TLS: server, Users: tc.users}, "events", 2)
			security[1] = c.Addr
			serveArgs := security
			if tc.users != nil {
				security = append(security, "--kafka-sasl", "scram-sha-512", "--kafka-sasl-user", "slide")
				serveArgs = append(security, "--kafka-sasl-password-file", writeFile(t, "kafka-password", password+"\n"))
			}
			s := startServe(t, serveArgs...)
			base := "http://" + s.addr
			code, r := readyz(t, http.DefaultClient, base)
			if b := r.backend("kafka"); b.State != "ok" || b.Addr != c.Addr {
				t.Fatalf("/readyz %d: kafka %+v, want ok at %s\n%s", code, b, c.Addr, s.logs.String())
			}

			now := time.Now().UnixMilli()
			var lines strings.Builder
			for i := range 40 {
				fmt.Fprintf(&lines, `{"ts":%d,"key":"tenant-%d","metric":"latency_ms","value":%d}`+"\n", now, i%2, i+1)
			}
			events := writeFile(t, "events.ndjson", lines.String())
			var pout string
			if tc.users == nil {
				args := append(append([]string{"-P", "-b", c.Addr, "-t", "events", "-l"}, kcatTLS...), events)
				out, err := exec.Command(kcat, args...).CombinedOutput()
				if err != nil {
					t.Fatalf("kcat: %v\n%s", err, out)
				}
			} else {
				t.Setenv(kafkaPasswordEnv, password)
				code, out, errOut := runCmd(t, context.Background(), "", append([]string{"produce", "--file", events}, security...)...)
				if pout = out + errOut; code != 0 {
					t.Fatalf("slide produce over SASL_SSL: exit %d\n%s", code, pout)
				}
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				_, body := get(t, http.DefaultClient, base+"/v1/window?metric=latency_ms&key=tenant-*&window=1m")
				if strings.Contains(body, `"count":40,`) && strings.Contains(body, `"series":2,`) && strings.Contains(body, `"sum":820,`) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("want the 40 events (sum 820) of 2 series, got %s\n%s", body, s.logs.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
			_, metrics := get(t, http.DefaultClient, base+"/metrics")
			_, ready := get(t, http.DefaultClient, base+"/readyz")
			s.stop()
			noSecret(t, password, map[string]string{"serve's log": s.logs.String(), "/metrics": metrics, "/readyz": ready, "produce's output": pout})
		})
	}
}

// A wrong password and an untrusted certificate: one clear log line naming Kafka, its
// address and the cause; /readyz 503 with the cause; the password nowhere.
func TestServeKafkaRefusedCredentials(t *testing.T) {
	ca, other := tlstest.NewCA(t, "kafka"), tlstest.NewCA(t, "other")
	c := kafkatest.StartWith(t, kafkatest.Opts{TLS: ca.ServerTLS(nil),
		Users: []kafkatest.User{{Method: "SCRAM-SHA-256", Name: "slide", Password: "the-right-one"}}}, "events", 1)
	for _, tc := range []struct {
		name, ca, want string
	}{
		{"wrong password", ca.CertFile, "SASL Authentication Failed"},
		{"untrusted certificate", other.CertFile, "certificate signed by unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const wrong = "wrong-pw-77c1"
			t.Setenv(kafkaPasswordEnv, wrong)
			s := startServe(t, "--brokers", c.Addr, "--kafka-ca", tc.ca, "--kafka-sasl", "scram-sha-256", "--kafka-sasl-user", "slide")
			base := "http://" + s.addr
			code, r := readyz(t, http.DefaultClient, base)
			b := r.backend("kafka")
			if code != http.StatusServiceUnavailable || b.State != "failing" || !strings.Contains(b.Error, tc.want) ||
				!strings.Contains(r.Error.Message, tc.want) {
				t.Fatalf("/readyz %d %+v, want 503 with kafka failing: %s", code, r, tc.want)
			}
			_, metrics := get(t, http.DefaultClient, base+"/metrics")
			s.stop()
			pcode, pout, perr := runCmd(t, context.Background(), "", "produce", "--brokers", c.Addr, "--kafka-ca", tc.ca,
				"--kafka-sasl", "scram-sha-256", "--kafka-sasl-user", "slide", "--duration", "1s")
			if pcode != 1 || !strings.Contains(perr, "kafka "+c.Addr+": ") || !strings.Contains(perr, tc.want) {
				t.Errorf("slide produce: exit %d, stderr %q; want 1 naming kafka %s and %q", pcode, perr, c.Addr, tc.want)
			}
			logs := s.logs.String()
			noSecret(t, wrong, map[string]string{"produce's output": pout + perr})
			want := `level=ERROR msg="kafka ` + c.Addr + `: `
			if n := strings.Count(logs, want); n != 1 || !strings.Contains(logs, tc.want) {
				t.Errorf("want one line starting %q naming %q, got %d:\n%s", want, tc.want, n, logs)
			}
			noSecret(t, wrong, map[string]string{"serve's log": logs, "/metrics": metrics})
		})
	}
}

// Redis through a URL with an ACL user, then with a wrong password from
// --redis-password-file: the decision goes through Redis, the failure is one log line, and
// /readyz shows Redis failing without gating (decisions follow on_backend_error).
func TestServeRedisURLAndPasswordFile(t *testing.T) {
	const password = "redis-pw-51d0"
	srv := redistest.StartWith(t, redistest.Opts{User: "slide", UserPassword: password, Password: "default-pw-0b2e"})
	policies := writeFile(t, "policies.yaml", `policies:
  - name: login
    algorithm: sliding_log
    limit: 3
    window: 60s
    backend: redis
    on_backend_error: closed
    timeout: 2s
`)
	allow := func(base string) (int, string) {
		resp, err := http.Post(base+"/v1/allow", "application/json", strings.NewReader(`{"policy":"login","key":"u1"}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	t.Setenv("SLIDE_REDIS", "redis://slide:"+password+"@"+srv.Addr+"/0") // also proves --help hides it
	s := startServe(t, "--policies", policies, "--embedded-kafka-addr", "127.0.0.1:0")
	base := "http://" + s.addr
	if _, r := readyz(t, http.DefaultClient, base); r.backend("redis").State != "ok" || r.backend("redis").Addr != srv.Addr {
		t.Fatalf("/readyz: redis %+v, want ok at %s\n%s", r.backend("redis"), srv.Addr, s.logs.String())
	}
	if code, body := allow(base); code != 200 || !strings.Contains(body, `"remaining":2`) {
		t.Fatalf("POST /v1/allow through Redis: %d %s", code, body)
	}
	if n, err := srv.Do("KEYS", "rl:{u1}:*"); err != nil || n == "" {
		t.Fatalf("the decision left no key in Redis: %q %v", n, err)
	}
	_, metrics := get(t, http.DefaultClient, base+"/metrics")
	s.stop()
	_, help, helpErr := runCmd(t, context.Background(), "", "serve", "-h")
	noSecret(t, password, map[string]string{"serve's log": s.logs.String(), "/metrics": metrics, "--help": help + helpErr})

	const wrong = "wrong-redis-pw-9e"
	t.Setenv("SLIDE_REDIS", "")
	s = startServe(t, "--policies", policies, "--embedded-kafka-addr", "127.0.0.1:0", "--redis", srv.Addr,
		"--redis-user", "slide", "--redis-password-file", writeFile(t, "pw", wrong))
	base = "http://" + s.addr
	code, r := readyz(t, http.DefaultClient, base)
	if b := r.backend("redis"); b.State != "failing" || !strings.Contains(b.Error, "redis "+srv.Addr+": WRONGPASS") {
		t.Fatalf("/readyz %d: redis %+v, want failing with WRONGPASS", code, b)
	}
	for deadline := time.Now().Add(15 * time.Second); code != 200; code, r = readyz(t, http.DefaultClient, base) {
		if time.Now().After(deadline) { // the embedded broker's partitions restore first
			t.Fatalf("/readyz %d with Redis failing: Redis must not gate readiness: %+v", code, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := allow(base); code != 503 || !strings.Contains(body, `"code":"unavailable"`) {
		t.Errorf("POST /v1/allow with Redis refusing us, on_backend_error closed: %d %s, want 503", code, body)
	}
	_, ready := get(t, http.DefaultClient, base+"/readyz")
	s.stop()
	logs := s.logs.String()
	if n := strings.Count(logs, `level=ERROR msg="redis `+srv.Addr+`: WRONGPASS`); n != 1 {
		t.Errorf("want one WRONGPASS line naming redis %s, got %d:\n%s", srv.Addr, n, logs)
	}
	noSecret(t, wrong, map[string]string{"serve's log": logs, "/readyz": ready})
}

// HTTPS: a client trusting the CA gets answers; plain HTTP on the port gets no API
// answer; a certificate replaced on disk is served after SIGHUP without a restart, while
// a connection opened before keeps working.
func TestServeHTTPSReloadOnSIGHUP(t *testing.T) {
	ca := tlstest.NewCA(t, "api")
	first := ca.Server("api")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	install := func(p tlstest.Pair) {
		for src, dst := range map[string]string{p.CertFile: certFile, p.KeyFile: keyFile} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(first)
	s := startServe(t, "--embedded-kafka-addr", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile)
	base := "https://" + s.addr
	newClient := func() *http.Client {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}}}
	}
	serial := func(c *http.Client) string {
		t.Helper()
		resp, err := c.Get(base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/healthz over HTTPS: %d", resp.StatusCode)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
	old := newClient()
	get(t, old, base+"/healthz")
	if got := serial(old); got != first.Serial.String() {
		t.Fatalf("serving certificate %s, want %s", got, first.Serial)
	}
	if code, body := get(t, &http.Client{Timeout: 5 * time.Second}, "http://"+s.addr+"/healthz"); code == 200 || strings.Contains(body, `"ok"`) {
		t.Errorf("plain HTTP on the HTTPS port got %d %q", code, body)
	}
	if _, err := (&http.Client{Timeout: 5 * time.Second}).Get(base + "/healthz"); err == nil {
		t.Error("a client without the CA was answered")
	}

	second := ca.Server("api")
	install(second)
	if err := syscallHUP(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for serial(newClient()) != second.Serial.String() {
		if time.Now().After(deadline) {
			t.Fatalf("new connections still get the first certificate 10 s after SIGHUP\n%s", s.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := serial(old); got != first.Serial.String() {
		t.Errorf("the connection opened before the reload was replaced (certificate %s)", got)
	}
	s.stop()
	if !strings.Contains(s.logs.String(), "TLS certificate reloaded") {
		t.Errorf("no reload line in the log:\n%s", s.logs.String())
	}
}

// --client-ca: the API answers only clients with a certificate the CA signed.
func TestServeMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "api")
	srvPair, clientPair := ca.Server("api"), ca.Client("ops")
	s := startServe(t, "--embedded-kafka-addr", "127.0.0.1:0", "--tls-cert", srvPair.CertFile, "--tls-key", srvPair.KeyFile, "--client-ca", ca.CertFile)
	with := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{clientPair.Cert}}}}
	if code, _ := get(t, with, "https://"+s.addr+"/healthz"); code != 200 {
		t.Fatalf("with a client certificate: %d", code)
	}
	without := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}}}
	if resp, err := without.Get("https://" + s.addr + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("answered %d without a client certificate", resp.StatusCode)
	}
}

func TestConnectFlagsRefused(t *testing.T) {
	pw := writeFile(t, "pw", "x")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kafka-tls"}, "need --brokers"},
		{[]string{"--kafka-isolation", "committed"}, "want read_committed or read_uncommitted"},
		{[]string{"--brokers", "127.0.0.1:1", "--kafka-sasl", "gssapi", "--kafka-sasl-user", "u", "--kafka-sasl-password-file", pw}, "want plain"},
		{[]string{"--brokers", "127.0.0.1:1", "--kafka-sasl", "plain", "--kafka-sasl-user", "u"}, "needs a password"},
		{[]string{"--brokers", "127.0.0.1:1", "--kafka-sasl-user", "u"}, "need --kafka-sasl"},
		{[]string{"--brokers", "127.0.0.1:1", "--kafka-ca", "/nonexistent.pem"}, "--kafka-ca"},
		{[]string{"--brokers", "127.0.0.1:1", "--kafka-cert", pw}, "go together"},
		{[]string{"--tls-cert", pw}, "go together"},
		{[]string{"--client-ca", pw}, "needs --tls-cert"},
		{[]string{"--tls-cert", pw, "--tls-key", pw}, "--tls-cert"},
		{[]string{"--demo", "--redis", "redis://u:sekrit@h:1/x"}, "--redis"},
		{[]string{"--demo", "--redis-sentinel", "h:1"}, "MASTER@"},
		{[]string{"--demo", "--redis", "h:1", "--redis-cluster", "h:2"}, "not several"},
		{[]string{"--demo", "--redis-ca", pw}, "need --redis"},
	} {
		code, _, errOut := runCmd(t, context.Background(), "", append(append([]string{"serve"}, tc.args...), "--addr", "127.0.0.1:0", "--embedded-kafka-addr", "127.0.0.1:0")...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error containing %q", tc.args, code, errOut, tc.want)
		}
		if strings.Contains(errOut, "sekrit") {
			t.Errorf("%v: the password is in the error: %s", tc.args, errOut)
		}
	}
}

// A TLS-only Redis with an ACL user through the flags: rediss:// with --redis-ca and
// --redis-user/--redis-password-file; without the CA, one log line names the certificate.
func TestServeRedisTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "redis")
	pair := ca.Server("redis")
	srv := redistest.StartWith(t, redistest.Opts{TLSCert: pair.CertFile, TLSKey: pair.KeyFile, TLSCA: ca.CertFile,
		TLSClient: &tls.Config{RootCAs: ca.Pool}, User: "slide", UserPassword: "tls-pw-11"})
	policies := writeFile(t, "policies.yaml", "policies:\n  - name: api\n    algorithm: token_bucket\n    capacity: 5\n    refill_per_second: 1\n    backend: redis\n    timeout: 2s\n")
	pw := writeFile(t, "pw", "tls-pw-11\n")
	for _, tc := range []struct {
		name, ca, state string
	}{
		{"private CA", ca.CertFile, "ok"},
		{"system roots", "", "failing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--policies", policies, "--embedded-kafka-addr", "127.0.0.1:0",
				"--redis", "rediss://" + srv.Addr, "--redis-user", "slide", "--redis-password-file", pw}
			if tc.ca != "" {
				args = append(args, "--redis-ca", tc.ca)
			}
			s := startServe(t, args...)
			base := "http://" + s.addr
			_, r := readyz(t, http.DefaultClient, base)
			if b := r.backend("redis"); b.State != tc.state {
				t.Fatalf("/readyz: redis %+v, want %s", b, tc.state)
			}
			resp, err := http.Post(base+"/v1/allow", "application/json", strings.NewReader(`{"policy":"api","key":"k"}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			s.stop()
			if tc.state == "ok" {
				if resp.StatusCode != 200 || !strings.Contains(string(body), `"remaining":4`) {
					t.Errorf("POST /v1/allow through TLS Redis: %d %s", resp.StatusCode, body)
				}
				return
			}
			want := `level=ERROR msg="redis ` + srv.Addr + `: TLS handshake with ` + srv.Addr + `: tls: failed to verify certificate`
			if n := strings.Count(s.logs.String(), want); n != 1 {
				t.Errorf("want one line %q, got %d:\n%s", want, n, s.logs.String())
			}
		})
	}
}

// A Redis Cluster's check asks every master: a keyless PING went to one node picked at
// random, so /readyz said redis "ok" (two checks in three, with three masters) while the
// decisions of a dead master's slots answered 503.
func TestRedisClusterCheckAsksEveryMaster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	conn := redislimit.Conn{Cluster: c.Addrs()[:1]}
	client, err := redislimit.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	b := redisBackend(conn, client)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.check(ctx); err != nil {
		t.Fatalf("healthy cluster: %v", err)
	}
	dead := c.Nodes[2]
	dead.Stop()
	for i := 0; i < 12; i++ {
		err := b.check(ctx)
		if err == nil || !strings.Contains(err.Error(), dead.Addr) {
			t.Fatalf("check %d with master %s stopped: %v, want an error naming it", i, dead.Addr, err)
		}
	}
}

// The check runs the limiter's scripts as its ACL user would: a user refused EVAL (the
// NOSCRIPT fallback, needed after every Redis restart) or a command the scripts call
// answered PING, so /readyz said redis "ok" while decisions failed.
func TestRedisCheckNamesMissingPermission(t *testing.T) {
	srv := redistest.Start(t)
	if _, err := srv.Do("ACL", "SETUSER", "slide", "on", ">pw", "~*", "+@all", "-eval"); err != nil {
		t.Fatal(err)
	}
	conn := redislimit.Conn{Addr: srv.Addr, Username: "slide", Password: "pw"}
	client, err := redislimit.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	b := redisBackend(conn, client)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = b.check(ctx)
	if err == nil || !strings.Contains(err.Error(), "'eval' command") || !strings.Contains(err.Error(), "needs +eval +evalsha") {
		t.Fatalf("check as a user without EVAL: %v, want NOPERM for eval and what to grant", err)
	}
	if _, err := srv.Do("ACL", "SETUSER", "slide", "+eval"); err != nil {
		t.Fatal(err)
	}
	if err := b.check(ctx); err != nil {
		t.Fatalf("check once EVAL is granted: %v", err)
	}
}

// A Redis that evicts keys when full (maxmemory with an LRU policy) drops limiter keys
// silently, each a tenant's count started afresh: the check logs it once, naming the
// policy, and stays quiet about a Redis that does not evict.
func TestRedisCheckWarnsOfEviction(t *testing.T) {
	for _, tc := range []struct {
		policy string
		warns  bool
	}{{"volatile-lru", true}, {"noeviction", false}} {
		t.Run(tc.policy, func(t *testing.T) {
			srv := redistest.Start(t, "--maxmemory", "64mb", "--maxmemory-policy", tc.policy)
			conn := redislimit.Conn{Addr: srv.Addr}
			client, err := redislimit.NewClient(conn)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			logs := new(proctest.Buffer)
			log := slog.New(slog.NewTextHandler(logs, nil))
			b := redisBackend(conn, client)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); b.run(ctx, log) }()
			deadline := time.Now().Add(20 * time.Second)
			for !strings.Contains(logs.String(), "connected") && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			<-done
			got := logs.String()
			want := "level=WARN msg=\"redis " + srv.Addr + ": maxmemory-policy volatile-lru evicts keys"
			if tc.warns && strings.Count(got, want) != 1 {
				t.Errorf("want one line %q, got:\n%s", want, got)
			}
			if !tc.warns && strings.Contains(got, "WARN") {
				t.Errorf("a Redis that does not evict warned:\n%s", got)
			}
		})
	}
}
