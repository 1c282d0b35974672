package cluster

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slide-metrics/slide/window"
)

// withRegistryB gives instance B (the one serving peer reads) a registry of its own.
func withRegistryB(reg *prometheus.Registry) func(*Config) {
	return func(c *Config) {
		if c.Advertise != "127.0.0.1:1" {
			c.Registerer = reg
		}
	}
}

// withRegistry gives instance A (advertising 127.0.0.1:1) a registry of its own.
func withRegistry(reg *prometheus.Registry, more func(*Config)) func(*Config) {
	return func(c *Config) {
		if c.Advertise == "127.0.0.1:1" {
			c.Registerer = reg
		}
		if more != nil {
			more(c)
		}
	}
}

// Issue #25, finding 1: a peer's read time is taken only within the metric's skew of the
// receiver's clock; further ahead or behind (30 minutes, the int64 extremes) is a 409,
// counted, and the receiver's windows answer as before.
func TestPeerReadTimeWithinSkew(t *testing.T) {
	ti := newTwoConfig(t, withRegistryB(prometheus.NewRegistry()), nil, false)
	all := func(string) bool { return true }
	before, err := ti.storeB.ReadMerged(t0, "m", all, 5*time.Minute, qs)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(now int64) int {
		q := url.Values{"op": {"merge"}, "metric": {"m"}, "key": {"k-*"}, "window": {"300000"}, "now": {strconv.FormatInt(now, 10)}, "parts": {"2,3"}}
		req := httptest.NewRequest("GET", PeerPath+"?"+q.Encode(), nil)
		req.Header.Set(HeaderPeer, "x:1")
		w := httptest.NewRecorder()
		ti.b.PeerHandler().ServeHTTP(w, req)
		return w.Code
	}
	refused := 0
	for now, want := range map[int64]int{
		t0 + 30*60_000: 409, math.MaxInt64: 409, math.MinInt64: 409, t0 - 30*60_000: 409,
		t0 + 10_001: 409, t0 - 10_001: 409, // one slot (the default skew) and a millisecond
		t0 + 10_000: 200, t0 - 10_000: 200, t0: 200,
	} {
		if got := ask(now); got != want {
			t.Errorf("now %d (%+d ms): %d, want %d", now, now-t0, got, want)
		}
		if want == 409 {
			refused++
		}
	}
	if got := testutil.ToFloat64(ti.b.m.served.WithLabelValues("409")); got != float64(refused) {
		t.Errorf("slide_cluster_peer_served_total{code=\"409\"} = %v, want %d", got, refused)
	}
	after, err := ti.storeB.ReadMerged(t0, "m", all, 5*time.Minute, qs)
	if err != nil || !reflect.DeepEqual(after, before) {
		t.Errorf("after the probes: %+v %v, before %+v", after, err, before)
	}
	// Through the fan-out: an asker whose clock is 30 minutes off gets those partitions
	// missing, not an answer from another time.
	var p window.Partial
	missing, err := ti.a.Merge(context.Background(), t0+30*60_000, "m", "k-*", 5*time.Minute, false, &p)
	if err != nil || !reflect.DeepEqual(missing, []int32{2, 3}) {
		t.Errorf("an asker 30 minutes ahead: missing %v, %v; want [2 3]", missing, err)
	}
}

// forged is an answer a stranger makes up: every partition asked, a million events.
func forged(r *http.Request) []byte {
	var parts []int32
	for f := range strings.SplitSeq(r.URL.Query().Get("parts"), ",") {
		if p, err := strconv.Atoi(f); err == nil {
			parts = append(parts, int32(p))
		}
	}
	return appendPartial(appendServed(nil, parts), &window.Partial{Count: 1_000_000, Sum: 1e9, Min: 1, Max: 1000, Series: 1, From: t0 - 300_000, To: t0 + 10_000, NoBins: true})
}

// Issue #25, finding 2: with a group key (--peer-key-file, or derived from
// --auth-token-file), a member that is not what it claims cannot get an answer merged:
// forged (unsigned, or signed with another key), or replayed from an earlier request. Each
// leaves its partitions missing and is counted as unauthenticated; the requests it
// captured work neither on the peer it was meant for (a replay) nor on any other.
func TestForgedAnswersAreNotMerged(t *testing.T) {
	for name, keyed := range map[string]func(*Config){
		"peer key":   func(c *Config) { c.PeerKey = testKey },
		"token only": func(c *Config) { c.Token = "the API's token" },
	} {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var captured []*http.Request
			var recorded *httptest.ResponseRecorder
			mode := "forge"
			reg := prometheus.NewRegistry()
			ti := newTwoConfig(t, withRegistry(reg, keyed), func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					captured = append(captured, r.Clone(context.Background()))
					m := mode
					mu.Unlock()
					switch m {
					case "forge":
						_, _ = w.Write(forged(r))
					case "forge signed": // signed with a key of its own
						body := forged(r)
						st, _ := StampOf(r.Header)
						stranger, _ := NewAuth(AuthConfig{Key: otherKey})
						SetAnswerHeader(w.Header(), stranger.SignAnswer(st.Nonce, body))
						_, _ = w.Write(body)
					case "record": // pass the genuine answer on, and keep it
						rec := httptest.NewRecorder()
						h.ServeHTTP(rec, r)
						recorded = rec
						for k, v := range rec.Header() {
							w.Header()[k] = v
						}
						w.WriteHeader(rec.Code)
						_, _ = w.Write(rec.Body.Bytes())
					case "replay": // the genuine answer of an earlier request
						for k, v := range recorded.Header() {
							w.Header()[k] = v
						}
						_, _ = w.Write(recorded.Body.Bytes())
					}
				})
			}, false)
			local := window.Partial{}
			if err := ti.a.cfg.Store.MergePartial(t0, "m", func(string, int32) bool { return true }, 5*time.Minute, &local); err != nil {
				t.Fatal(err)
			}
			unauth := func() float64 { return testutil.ToFloat64(ti.a.m.requests.WithLabelValues("merge", "unauthenticated")) }
			read := func() (uint64, []int32) {
				var p window.Partial
				p.NoBins = true
				missing, err := ti.a.Merge(context.Background(), t0, "m", "k-*", 5*time.Minute, false, &p)
				if err != nil {
					t.Fatal(err)
				}
				return p.Count, missing
			}
			counted := map[string]float64{"forge": 1, "forge signed": 2, "replay": 3} // unauthenticated answers so far
			for _, m := range []string{"forge", "forge signed", "record", "replay"} {
				mode = m
				count, missing := read()
				if m == "record" {
					if len(missing) != 0 || count <= local.Count || count >= 1_000_000 {
						t.Errorf("the genuine answer: count %d, missing %v", count, missing)
					}
					continue
				}
				if !reflect.DeepEqual(missing, []int32{2, 3}) || count != local.Count {
					t.Errorf("%s: count %d (local %d), missing %v; want the peer's partitions missing and nothing of its answer", m, count, local.Count, missing)
				}
				if unauth() != counted[m] {
					t.Errorf("%s: %v unauthenticated answers counted", m, unauth())
				}
			}
			for _, r := range captured {
				if r.Header.Get("Authorization") != "" {
					t.Errorf("a peer request carried Authorization: %q", r.Header.Get("Authorization"))
				}
			}
			// The captured requests, sent on: the one B already answered is a replay, and
			// none is good for A, which it was not addressed to.
			replay := func(h http.Handler, r *http.Request) int {
				req := httptest.NewRequest("GET", r.URL.RequestURI(), nil)
				req.Header = r.Header.Clone()
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				return w.Code
			}
			if code := replay(ti.b.PeerHandler(), captured[2]); code != http.StatusUnauthorized {
				t.Errorf("the request B answered, sent to B again: %d, want 401", code)
			}
			for i, r := range captured {
				if code := replay(ti.a.PeerHandler(), r); code != http.StatusUnauthorized {
					t.Errorf("captured request %d sent to A: %d, want 401", i, code)
				}
			}
		})
	}
}

// A member holding another key is refused by its peers (401), and counted as
// unauthenticated by the asker: its partitions are missing.
func TestWrongPeerKeyIsRefused(t *testing.T) {
	reg := prometheus.NewRegistry()
	ti := newTwoConfig(t, withRegistry(reg, func(c *Config) {
		c.PeerKey = testKey
		if c.Advertise != "127.0.0.1:1" {
			c.PeerKey = otherKey
		}
	}), nil, false)
	var p window.Partial
	missing, err := ti.a.Merge(context.Background(), t0, "m", "k-*", 5*time.Minute, false, &p)
	if err != nil || !reflect.DeepEqual(missing, []int32{2, 3}) {
		t.Errorf("a peer with another key: missing %v, %v", missing, err)
	}
	if got := testutil.ToFloat64(ti.a.m.requests.WithLabelValues("merge", "unauthenticated")); got != 1 {
		t.Errorf("%v unauthenticated requests counted, want 1", got)
	}
	if got := testutil.ToFloat64(ti.b.m.served.WithLabelValues("401")); got != 1 {
		t.Errorf("the peer served %v 401s, want 1", got)
	}
}

// An operator who started one member with another --peer-key-file, or none, learns from
// the asker's warning what to change: each way round, it names the peer and the flag, and
// an asker without a key is not told its signature was refused (it sent none).
func TestPeerKeyMismatchSaysWhatToChange(t *testing.T) {
	for _, tc := range []struct {
		name       string
		keyA, keyB []byte
		want       string
	}{
		{"asker keyed, peer not", testKey, nil, "no group key"},
		{"peer keyed, asker not", nil, testKey, "this instance has none"},
		{"other keys", testKey, otherKey, "another group key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			var mu sync.Mutex
			ti := newTwoConfig(t, func(c *Config) {
				c.PeerKey = tc.keyB
				if c.Advertise == "127.0.0.1:1" {
					c.PeerKey = tc.keyA
					c.Registerer = prometheus.NewRegistry()
					c.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
				}
			}, nil, false)
			var p window.Partial
			missing, err := ti.a.Merge(context.Background(), t0, "m", "k-*", 5*time.Minute, false, &p)
			if err != nil || !reflect.DeepEqual(missing, []int32{2, 3}) {
				t.Fatalf("missing %v, %v", missing, err)
			}
			mu.Lock()
			got := logs.String()
			mu.Unlock()
			for _, w := range []string{tc.want, "--peer-key-file", ti.b.cfg.Advertise} {
				if !strings.Contains(got, w) {
					t.Errorf("the warning does not say %q:\n%s", w, got)
				}
			}
			if tc.keyA == nil && strings.Contains(got, "refused this instance's signature") {
				t.Errorf("an asker without a key is told its signature was refused:\n%s", got)
			}
		})
	}
}

// lockedWriter serializes writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
