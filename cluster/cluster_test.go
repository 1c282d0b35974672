package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/window"
)

const t0 = int64(1_796_000_000_000) // a fixed instant, unix ms

// twoInstances is instance A (partitions 0, 1, in this process) and a peer B (partitions
// 2, 3) behind an HTTP server, plus a store that holds everything, the oracle of one
// instance owning all partitions.
type twoInstances struct {
	a, b    *Cluster
	all     *window.Store
	storeB  *window.Store
	srv     *httptest.Server
	peerHit atomic.Int64
}

func newStore(t *testing.T) *window.Store {
	t.Helper()
	s, err := window.NewStore(window.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newTwo(t *testing.T, token string, wrap func(http.Handler) http.Handler) *twoInstances {
	t.Helper()
	return newTwoOver(t, token, wrap, false)
}

// clockT0 is both instances' clock: the fixed instant the fixture's events are at.
func clockT0() int64 { return t0 }

// newTwoOver is newTwo with the peer serving HTTPS when tlsOn, and A reading it through
// Config.TLS with the peer's certificate trusted. Both instances' clocks stand at t0; B
// advertises its server's address (a signed request names it).
func newTwoOver(t *testing.T, token string, wrap func(http.Handler) http.Handler, tlsOn bool) *twoInstances {
	t.Helper()
	return newTwoConfig(t, func(c *Config) { c.Token = token }, wrap, tlsOn)
}

// newTwoConfig is newTwoOver with both instances' configs adjusted by mod.
func newTwoConfig(t *testing.T, mod func(*Config), wrap func(http.Handler) http.Handler, tlsOn bool) *twoInstances {
	t.Helper()
	ti := &twoInstances{all: newStore(t), storeB: newStore(t)}
	storeA := newStore(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 3000 {
		part := int32(i % 4) // round robin: a key's events land on every partition
		key := "k-" + strconv.Itoa(rng.IntN(40))
		if i%3 == 0 {
			part = int32(len(key) % 4) // and keyed: some keys stay on one
		}
		ev := window.Event{TS: t0 - rng.Int64N(280_000), Metric: "m", Key: key, Value: float64(1 + rng.IntN(1000)), Feed: window.FeedOf(part)}
		dst := storeA
		if part >= 2 {
			dst = ti.storeB
		}
		for _, s := range []*window.Store{dst, ti.all} {
			if err := s.ObserveAt(t0, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	var h http.Handler
	ti.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ti.peerHit.Add(1)
		h.ServeHTTP(w, r)
	}))
	var clientTLS *tls.Config
	if tlsOn {
		ti.srv.StartTLS()
		clientTLS = ti.srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	} else {
		ti.srv.Start()
	}
	t.Cleanup(ti.srv.Close)
	peer := strings.TrimPrefix(strings.TrimPrefix(ti.srv.URL, "http://"), "https://")
	cfgB := Config{Store: ti.storeB, Brokers: []string{"127.0.0.1:1"}, Advertise: peer, Now: clockT0,
		Local: func() []int32 { return []int32{2, 3} }}
	cfgA := Config{Store: storeA, Brokers: []string{"127.0.0.1:1"}, Advertise: "127.0.0.1:1", Now: clockT0,
		Timeout: 5 * time.Second, TLS: clientTLS, Local: func() []int32 { return []int32{0, 1} }}
	mod(&cfgA)
	mod(&cfgB)
	var err error
	if ti.b, err = New(cfgB); err != nil {
		t.Fatal(err)
	}
	h = ti.b.PeerHandler()
	if wrap != nil {
		h = wrap(h)
	}
	if ti.a, err = New(cfgA); err != nil {
		t.Fatal(err)
	}
	ti.a.view.Store(&View{Partitions: 4, Members: 2, Owner: map[int32]string{0: "127.0.0.1:1", 1: "127.0.0.1:1", 2: peer, 3: peer}})
	return ti
}

var qs = []float64{0.5, 0.95, 0.99}

func sameAgg(t *testing.T, what string, got, want window.Agg) {
	t.Helper()
	if got.Count != want.Count || got.Sum != want.Sum || got.Min != want.Min || got.Max != want.Max ||
		got.From != want.From || got.To != want.To || !reflect.DeepEqual(got.Quantiles, want.Quantiles) {
		t.Errorf("%s: cluster %+v, one instance %+v", what, got, want)
	}
}

func TestMergeEqualsOneInstance(t *testing.T) {
	ti := newTwo(t, "", nil)
	ix := ti.all.Indexer("m")
	for _, key := range []string{"k-*", "k-1*", "k-7", "nobody"} {
		for _, win := range []time.Duration{time.Minute, 5 * time.Minute} {
			var p window.Partial
			missing, err := ti.a.Merge(context.Background(), t0, "m", key, win, true, &p)
			if err != nil || len(missing) != 0 {
				t.Fatalf("%s: missing %v, err %v", key, missing, err)
			}
			want, err := ti.all.ReadMerged(t0, "m", func(k string) bool { return window.MatchKey(key, k) }, win, qs)
			if errors.Is(err, window.ErrNotFound) {
				if p.Series != 0 {
					t.Errorf("%s: %d series, want none", key, p.Series)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			sameAgg(t, key+" "+win.String(), p.Agg(ix, qs), want)
		}
	}
}

// TestPeersOverHTTPS: with Config.TLS the fan-out speaks HTTPS to its peers and merges as
// over plain HTTP; a peer serving HTTPS cannot be read without it.
func TestPeersOverHTTPS(t *testing.T) {
	ti := newTwoOver(t, "", nil, true)
	var p window.Partial
	missing, err := ti.a.Merge(context.Background(), t0, "m", "k-*", 5*time.Minute, true, &p)
	if err != nil || len(missing) != 0 {
		t.Fatalf("over HTTPS: missing %v, err %v", missing, err)
	}
	want, err := ti.all.ReadMerged(t0, "m", func(k string) bool { return window.MatchKey("k-*", k) }, 5*time.Minute, qs)
	if err != nil {
		t.Fatal(err)
	}
	sameAgg(t, "k-* over HTTPS", p.Agg(ti.all.Indexer("m"), qs), want)

	plain, err := New(Config{Store: newStore(t), Brokers: []string{"127.0.0.1:1"}, Advertise: "127.0.0.1:1",
		Timeout: 5 * time.Second, Local: func() []int32 { return []int32{0, 1} }})
	if err != nil {
		t.Fatal(err)
	}
	plain.view.Store(ti.a.view.Load())
	missing, err = plain.Merge(context.Background(), t0, "m", "k-*", 5*time.Minute, true, &p)
	if err == nil && len(missing) == 0 {
		t.Fatal("plain HTTP to an HTTPS peer answered; want its partitions missing")
	}
}

func TestEachEqualsOneInstancePerKey(t *testing.T) {
	ti := newTwo(t, "", nil)
	ix := ti.all.Indexer("m")
	n := 0
	missing, err := ti.a.Each(context.Background(), t0, "m", "", 5*time.Minute, true, func(key string, p *window.Partial) {
		n++
		want, err := ti.all.ReadAt(t0, "m", key, 5*time.Minute, qs)
		if err != nil {
			t.Fatal(err)
		}
		sameAgg(t, key, p.Agg(ix, qs), want)
	})
	if err != nil || len(missing) != 0 {
		t.Fatalf("missing %v, err %v", missing, err)
	}
	if want := len(ti.all.Keys("m", "")); n != want {
		t.Errorf("%d series, want %d", n, want)
	}
	ids, missing, err := ti.a.Keys(context.Background(), "", "k-1", nil, nil, 0)
	if err != nil || len(missing) != 0 {
		t.Fatalf("keys: missing %v, err %v", missing, err)
	}
	var keys []string
	for _, id := range ids {
		keys = append(keys, id.Key)
	}
	if want := ti.all.Keys("m", "k-1"); !reflect.DeepEqual(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
}

// A peer that is down, hangs past the deadline, refuses the token or answers garbage
// leaves its partitions missing: never a silently smaller answer.
func TestUnreachablePeerIsMissing(t *testing.T) {
	cases := map[string]struct {
		token string
		wrap  func(http.Handler) http.Handler
	}{
		"hung": {wrap: func(http.Handler) http.Handler {
			return http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		}},
		"garbage": {wrap: func(http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte{1, 1, 4, 0}) })
		}},
		"overreach": {wrap: func(http.Handler) http.Handler { // serves a partition it was not asked for
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write(appendPartial(appendServed(nil, []int32{1, 2, 3}), &window.Partial{}))
			})
		}},
		"down": {wrap: func(http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "down", http.StatusBadGateway)
			})
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ti := newTwo(t, tc.token, tc.wrap)
			ti.a.cfg.Timeout = 200 * time.Millisecond // a healthy peer on a loaded machine gets 5 s elsewhere
			start := time.Now()
			var p window.Partial
			missing, err := ti.a.Merge(context.Background(), t0, "m", "k-*", 5*time.Minute, true, &p)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(missing, []int32{2, 3}) {
				t.Errorf("missing %v, want [2 3]", missing)
			}
			if d := time.Since(start); d > 3*time.Second { // slack for a loaded machine under -race
				t.Errorf("took %v with a 200ms deadline", d)
			}
		})
	}
}

// With --auth-token-file alone, peers sign with a key derived from the token and never
// send the token: a request without a signature, or with the token as a bearer, is 401.
func TestPeerTokenIsNeverSent(t *testing.T) {
	var seen []http.Header
	var mu sync.Mutex
	ti := newTwo(t, "s3cret-token", func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Header.Clone())
			mu.Unlock()
			h.ServeHTTP(w, r)
		})
	})
	var p window.Partial
	if missing, _ := ti.a.Merge(context.Background(), t0, "m", "k-*", time.Minute, false, &p); len(missing) != 0 {
		t.Fatalf("signed with the derived key: missing %v", missing)
	}
	for _, h := range seen {
		for name, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, "s3cret-token") || strings.EqualFold(name, "Authorization") {
					t.Errorf("a peer request carried %s: %s", name, v)
				}
			}
		}
		if h.Get(HeaderSignature) == "" {
			t.Errorf("a peer request was not signed: %v", h)
		}
	}
	for _, auth := range []string{"", "Bearer wrong", "Bearer s3cret-token"} {
		req := httptest.NewRequest("GET", PeerPath+"?op=merge&metric=m&key=k-*&window=60000&now="+strconv.FormatInt(t0, 10)+"&parts=2", nil)
		req.Header.Set(HeaderPeer, "x:1")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		ti.b.PeerHandler().ServeHTTP(w, req)
		if w.Code != http.StatusUnauthorized {
			t.Errorf("authorization %q: %d, want 401", auth, w.Code)
		}
	}
}

// Usage reads take the peers' part from a cache at most Staleness old, and this instance's
// part fresh.
func TestUsageReadCachesRemotePart(t *testing.T) {
	ti := newTwo(t, "", nil)
	ti.a.cfg.Staleness = time.Hour // no expiry within the test: only the slot turn
	read := func(now int64) (window.Agg, int64) {
		t.Helper()
		a, stale, missing, err := ti.a.Read(context.Background(), now, "m", "k-7", 5*time.Minute, nil)
		if err != nil || len(missing) != 0 {
			t.Fatalf("read: %v, missing %v", err, missing)
		}
		return a, stale
	}
	first, _ := read(t0)
	hits := ti.peerHit.Load()
	if err := ti.storeB.ObserveAt(t0, window.Event{TS: t0, Metric: "m", Key: "k-7", Value: 1, Feed: window.FeedOf(2)}); err != nil {
		t.Fatal(err)
	}
	cached, stale := read(t0)
	if cached.Count != first.Count || ti.peerHit.Load() != hits || stale < 0 {
		t.Errorf("within staleness: count %d (first %d), %d peer requests more, stale %d ms", cached.Count, first.Count, ti.peerHit.Load()-hits, stale)
	}
	if _, _, _, err := ti.a.Read(context.Background(), t0, "m", "nobody", 5*time.Minute, nil); !errors.Is(err, window.ErrNotFound) {
		t.Errorf("unknown series: %v, want ErrNotFound", err)
	}
	// The next slot invalidates the cache: the new event shows.
	next, _ := read(t0 + 10_000)
	if next.Count != first.Count+1 {
		t.Errorf("next slot: count %d, want %d", next.Count, first.Count+1)
	}
	ti.a.OnGeneration(2, []int32{0, 1})
	if len(ti.a.cache) != 0 {
		t.Errorf("a generation left %d cached entries", len(ti.a.cache))
	}
}

func TestLocalNeedsEveryPartition(t *testing.T) {
	ti := newTwo(t, "", nil)
	if ti.a.Local() {
		t.Fatal("Local with half the partitions")
	}
	ti.a.OnGeneration(1, []int32{0, 1, 2, 3})
	if !ti.a.Local() {
		t.Fatal("not Local with every partition")
	}
	ti.a.OnGeneration(2, []int32{0, 1, 2})
	if ti.a.Local() {
		t.Fatal("still Local after a generation took a partition away")
	}
}

func TestCheckAdvertise(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:8080": true, "slide-0.slide:8080": true, "[::1]:8080": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "127.0.0.1": false, "127.0.0.1:0": false, "": false,
	} {
		if err := CheckAdvertise(addr); (err == nil) != ok {
			t.Errorf("CheckAdvertise(%q) = %v, want ok=%v", addr, err, ok)
		}
	}
}

// murmur2Partition picks what kafka-go's Murmur2Balancer (the Java client's partitioner)
// picks, so a declared murmur2 producer and the routed read agree.
func TestMurmur2MatchesKafkaGo(t *testing.T) {
	for _, n := range []int{1, 3, 8, 13} {
		parts := make([]int, n)
		for i := range parts {
			parts[i] = i
		}
		for i := range 500 {
			key := "tenant-" + strconv.Itoa(i) + strings.Repeat("x", i%5)
			want := (&kafka.Murmur2Balancer{}).Balance(kafka.Message{Key: []byte(key)}, parts...)
			if got := murmur2Partition(key, n); int(got) != want {
				t.Fatalf("%q over %d partitions: %d, kafka-go %d", key, n, got, want)
			}
		}
	}
}

// With a declared partitioner, a one-key read asks only its partition's owner, and only
// that partition can be missing.
func TestRoutedKeyAsksOneOwner(t *testing.T) {
	ti := newTwo(t, "", func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", 502) })
	})
	ti.a.cfg.KeyPartitioner = "murmur2"
	var local, remote string
	for i := 0; local == "" || remote == ""; i++ {
		k := "k-" + strconv.Itoa(i)
		if murmur2Partition(k, 4) < 2 {
			local = k
		} else {
			remote = k
		}
	}
	var p window.Partial
	before := ti.peerHit.Load()
	if missing, _ := ti.a.Merge(context.Background(), t0, "m", local, time.Minute, false, &p); len(missing) != 0 || ti.peerHit.Load() != before {
		t.Errorf("a key of a local partition: missing %v, %d peer requests", missing, ti.peerHit.Load()-before)
	}
	missing, _ := ti.a.Merge(context.Background(), t0, "m", remote, time.Minute, false, &p)
	if want := []int32{murmur2Partition(remote, 4)}; !reflect.DeepEqual(missing, want) {
		t.Errorf("a key of the down peer's partition: missing %v, want %v", missing, want)
	}
}

// A read during which the consumer's generation moved (a revocation may have dropped part
// of what it read) counts the partitions read there as missing, locally and on the peer.
func TestGenerationMovedMeansMissing(t *testing.T) {
	ti := newTwo(t, "", nil)
	var genA, genB atomic.Int32
	// Each call of Generation advances it: every read sees it move.
	ti.a.cfg.Generation = func() int32 { return genA.Add(1) }
	var p window.Partial
	missing, _ := ti.a.Merge(context.Background(), t0, "m", "k-*", time.Minute, false, &p)
	if !reflect.DeepEqual(missing, []int32{0, 1}) {
		t.Errorf("local generation moved: missing %v, want [0 1]", missing)
	}
	ti.a.cfg.Generation = nil
	ti.b.cfg.Generation = func() int32 { return genB.Add(1) }
	missing, _ = ti.a.Merge(context.Background(), t0, "m", "k-*", time.Minute, false, &p)
	if !reflect.DeepEqual(missing, []int32{2, 3}) {
		t.Errorf("peer generation moved: missing %v, want [2 3]", missing)
	}
}

// Bad peer requests are a 4xx with a message, never a panic or a partial answer.
func TestBadPeerRequests(t *testing.T) {
	ti := newTwo(t, "", nil)
	for _, tc := range []struct {
		query  string
		header bool
		code   int
	}{
		{"op=merge&metric=m&key=k&window=60000&now=1796000000000&parts=2", false, 400},
		{"op=merge&metric=m&key=k&window=7&now=1796000000000&parts=2", true, 400},
		{"op=merge&metric=m&key=k&window=-1&now=1796000000000&parts=2", true, 400},
		{"op=merge&metric=m&key=k&window=60000&now=x&parts=2", true, 400},
		{"op=merge&metric=m&key=k&window=60000&now=1796000000000&parts=2,-3", true, 400},
		{"op=merge&metric=m&key=k&window=60000&now=1796000000000&parts=a", true, 400},
		{"op=nope&metric=m&key=k&window=60000&now=1796000000000&parts=2", true, 400},
		{"op=merge&metric=m&key=" + strings.Repeat("x", 2000) + "&window=60000&now=1796000000000", true, 400},
		{"op=merge&metric=m&key=k&window=60000&now=1796000000000&parts=2", true, 200},
		{"op=groups&metric=m&key=k-*&by=key&m=2code%3D(&window=60000&now=1796000000000&parts=2", true, 400},
		{"op=groups&metric=m&key=k-*&by=key&m=code%3D5&window=60000&now=1796000000000&parts=2", true, 400},
		{"op=groups&metric=m&key=k-*&by=key,key&window=60000&now=1796000000000&parts=2", true, 400},
		{"op=groups&metric=m&key=k-*&by=__x&window=60000&now=1796000000000&parts=2", true, 400},
		{"op=groups&metric=m&key=k-*&by=" + strings.Repeat("a,", 16) + "b&window=60000&now=1796000000000&parts=2", true, 400},
		{"op=groups&metric=m&key=k-*&by=key&m=2code%3D5..&window=60000&now=1796000000000&parts=2", true, 200},
		{"op=groups&metric=m&window=60000&now=1796000000000&parts=2", true, 200},
		{"op=slots&metric=m&now=1796000000000&at=1796000000000&parts=2,3", true, 200},
		{"op=slots&metric=m&m=1key%3Dk-1&now=1796000000000&at=1795000000000&parts=2", true, 200},
		{"op=slots&metric=m&now=1796000000000&at=1796000000001&parts=2", true, 400}, // at after now
		{"op=slots&metric=m&now=1796000000000&at=x&parts=2", true, 400},
		{"op=slots&metric=m&now=1796000000000&at=1796000000000&m=2code%3D(&parts=2", true, 400},
		{"op=slots&metric=m&now=1797000000000&at=1796000000000&parts=2", true, 409}, // a clock an hour off
		{"op=slots&metric=m&at=1796000000000&parts=2", true, 400},
		{"op=metrics&parts=2", true, 200},
		{"op=keys&metric=m&parts=2", true, 200},
		{"op=keys&metric=m&key=k-&m=1key%3Dk-1&after_metric=m&after_key=k-0&limit=5&parts=2", true, 200},
		{"op=keys&metric=m&limit=0&parts=2", true, 400},
		{"op=keys&metric=m&limit=-1&parts=2", true, 400},
		{"op=keys&metric=m&limit=x&parts=2", true, 400},
		{"op=keys&metric=m&limit=99999999999&parts=2", true, 400},
		{"op=keys&metric=m&m=2code%3D(&parts=2", true, 400},
		{"op=keys&metric=m&after_metric=m&after_key=" + strings.Repeat("x", maxPeerCursor+1) + "&parts=2", true, 400},
	} {
		req := httptest.NewRequest("GET", PeerPath+"?"+tc.query, nil)
		if tc.header {
			req.Header.Set(HeaderPeer, "x:1")
		}
		w := httptest.NewRecorder()
		ti.b.PeerHandler().ServeHTTP(w, req)
		if w.Code != tc.code || (tc.code != 200 && w.Body.Len() == 0) {
			t.Errorf("%.80s (peer header %v): %d %q, want %d", tc.query, tc.header, w.Code, w.Body.String(), tc.code)
		}
	}
	req := httptest.NewRequest("POST", PeerPath, nil)
	w := httptest.NewRecorder()
	ti.b.PeerHandler().ServeHTTP(w, req)
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", w.Code)
	}
}

// Remote is every partition of the view this instance does not serve.
func TestRemoteIsWhatLocalLacks(t *testing.T) {
	ti := newTwo(t, "", nil)
	if got := ti.a.Remote(); !reflect.DeepEqual(got, []int32{2, 3}) {
		t.Errorf("Remote() = %v, want [2 3]", got)
	}
}

// TestKeyMatchesTheKeyLabel: on a metric with labelled series, a key read across instances
// selects by the key label, as one store's ReadSelected does: an exact key merges every
// series of that key (not one lookup of the key alone), a glob matches keys, never the
// labels after them; Each lists every series of the matched keys.
func TestKeyMatchesTheKeyLabel(t *testing.T) {
	ti := newTwo(t, "", nil)
	addLabelled(t, ti)
	ix := ti.all.Indexer("lm")
	for _, key := range []string{"k-1", "k-11", "k-1*", "*-1", "k-*", "nobody"} {
		sel, err := window.CompileSelector(key, nil)
		if err != nil {
			t.Fatal(err)
		}
		var p window.Partial
		missing, err := ti.a.Merge(context.Background(), t0, "lm", key, 5*time.Minute, true, &p)
		if err != nil || len(missing) != 0 {
			t.Fatalf("%s: missing %v, err %v", key, missing, err)
		}
		want, err := ti.all.ReadSelected(t0, "lm", sel, 5*time.Minute, qs, nil)
		if errors.Is(err, window.ErrNotFound) {
			if p.Series != 0 {
				t.Errorf("%s: %d series, want none", key, p.Series)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.Series != want.Series || want.Series < 2 {
			t.Errorf("%s: %d series, one instance %d", key, p.Series, want.Series)
		}
		sameAgg(t, key, p.Agg(ix, qs), want)
		n := 0
		if _, err := ti.a.Each(context.Background(), t0, "lm", key, 5*time.Minute, false, func(series string, _ *window.Partial) {
			n++
			if !sel.Match(series) {
				t.Errorf("%s: Each gave %q", key, series)
			}
		}); err != nil {
			t.Fatal(err)
		}
		if n != want.Series {
			t.Errorf("%s: Each gave %d series, want %d", key, n, want.Series)
		}
	}
}

// addLabelled adds metric "lm" to ti: 12 keys, each with series labelled code=200..202 and
// an unlabelled one, fed by partitions 0..3 (A holds 0 and 1, B 2 and 3).
func addLabelled(t *testing.T, ti *twoInstances) {
	t.Helper()
	storeA := ti.a.cfg.Store
	for i := range 600 {
		key := "k-" + strconv.Itoa(i%12)
		series, err := window.AppendSeries(nil, key, []window.Label{{Name: "code", Value: strconv.Itoa(200 + i/12%3)}})
		if err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 {
			series = []byte(key) // and some unlabelled series of the same keys
		}
		part := int32(len(series) % 4)
		ev := window.Event{TS: t0 - int64(i)*400, Metric: "lm", Key: string(series), Value: float64(1 + i*31%700), Feed: window.FeedOf(part)}
		dst := storeA
		if part >= 2 {
			dst = ti.storeB
		}
		for _, s := range []*window.Store{dst, ti.all} {
			if err := s.ObserveAt(t0, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestUsageReadSelectedEqualsOneInstance: a usage rule's read with label matchers
// (ReadSelected) across two instances equals one store's ReadSelected, the matchers travel
// to the peer, and the peers' part is cached apart from a plain Read of the same key.
func TestUsageReadSelectedEqualsOneInstance(t *testing.T) {
	ti := newTwo(t, "", nil)
	addLabelled(t, ti)
	ti.a.cfg.Staleness = time.Hour
	for _, c := range []struct {
		key string
		ms  []window.Matcher
	}{
		{"k-1", []window.Matcher{{Name: "code", Op: window.MatchEqual, Value: "201"}}},
		{"k-1*", []window.Matcher{{Name: "code", Op: window.MatchRegexp, Value: "20[01]"}}},
		{"*", []window.Matcher{{Name: "code", Op: window.MatchEqual, Value: ""}}},
	} {
		sel, err := window.CompileSelector(c.key, c.ms)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ti.all.ReadSelected(t0, "lm", sel, 5*time.Minute, qs, nil)
		if err != nil {
			t.Fatal(err)
		}
		hits := ti.peerHit.Load()
		got, _, missing, err := ti.a.ReadSelected(context.Background(), t0, "lm", c.key, c.ms, 5*time.Minute, qs)
		if err != nil || len(missing) != 0 || ti.peerHit.Load() == hits {
			t.Fatalf("key=%s %v: missing %v, err %v, peer asked %d times", c.key, c.ms, missing, err, ti.peerHit.Load()-hits)
		}
		what := fmt.Sprintf("key=%s %v", c.key, c.ms)
		if got.Series != want.Series || got.Series == 0 {
			t.Errorf("%s: %d series, one store %d", what, got.Series, want.Series)
		}
		sameAgg(t, what, got, want)
		plain, _, _, err := ti.a.Read(context.Background(), t0, "lm", c.key, 5*time.Minute, qs)
		if err != nil || plain.Series == got.Series {
			t.Errorf("%s: a plain Read of the key after it read %d series (%v): the cache mixed them up", what, plain.Series, err)
		}
	}
	if _, _, _, err := ti.a.ReadSelected(context.Background(), t0, "lm", "k-1", []window.Matcher{{Name: "code", Op: window.MatchRegexp, Value: "("}}, time.Minute, nil); !errors.Is(err, window.ErrMatcher) {
		t.Errorf("bad matcher: %v", err)
	}
}

// TestMergeGroupsEqualsOneInstance: a grouped read across two instances, each answering
// its groups (opGroups) rather than its series, equals one store's ReadGroups group by
// group, and without by-labels its one group equals ReadSelected; the matchers travel to
// the peer. Too many groups on either side is ErrTooManyGroups, never a partial answer.
func TestMergeGroupsEqualsOneInstance(t *testing.T) {
	ti := newTwo(t, "", nil)
	addLabelled(t, ti)
	ix := ti.all.Indexer("lm")
	for _, c := range []struct {
		key string
		ms  []window.Matcher
		by  []string
	}{
		{"", nil, []string{"code"}},
		{"k-1*", []window.Matcher{{Name: "code", Op: window.MatchRegexp, Value: "20[01]"}}, []string{"key", "code"}},
		{"k-3", nil, []string{"code"}},
		{"", []window.Matcher{{Name: "code", Op: window.MatchNotEqual, Value: "201"}, {Name: "key", Op: window.MatchRegexp, Value: "k-[0-5]"}}, []string{"code", "key"}},
		{"", []window.Matcher{{Name: "code", Op: window.MatchEqual, Value: "201"}}, nil},
		{"k-1", []window.Matcher{{Name: "code", Op: window.MatchEqual, Value: ""}}, nil},
	} {
		sel, err := window.CompileSelector(c.key, c.ms)
		if err != nil {
			t.Fatal(err)
		}
		g, err := window.NewGroupPartials(c.by, true)
		if err != nil {
			t.Fatal(err)
		}
		hits := ti.peerHit.Load()
		missing, err := ti.a.MergeGroups(context.Background(), t0, "lm", c.key, c.ms, 5*time.Minute, true, g)
		if err != nil || len(missing) != 0 || ti.peerHit.Load() == hits {
			t.Fatalf("%+v: missing %v, err %v, peer asked %d times", c, missing, err, ti.peerHit.Load()-hits)
		}
		what := fmt.Sprintf("key=%s %v by %v", c.key, c.ms, c.by)
		if c.by == nil {
			want, err := ti.all.ReadSelected(t0, "lm", sel, 5*time.Minute, qs, nil)
			if err != nil || g.Len() != 1 {
				t.Fatalf("%s: %d groups, one store: %v", what, g.Len(), err)
			}
			p := g.Sorted()[0].Partial
			if p.Series != want.Series {
				t.Errorf("%s: %d series, want %d", what, p.Series, want.Series)
			}
			sameAgg(t, what, p.Agg(ix, qs), want)
			continue
		}
		want, err := ti.all.ReadGroups(t0, "lm", sel, c.by, 5*time.Minute, qs, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := g.Groups(ix, qs)
		if len(got) != len(want) || len(got) < 2 {
			t.Fatalf("%s: %d groups, one store %d", what, len(got), len(want))
		}
		for i := range got {
			if !reflect.DeepEqual(got[i].Labels, want[i].Labels) || got[i].Agg.Series != want[i].Agg.Series {
				t.Errorf("%s group %d: %v of %d series, one store %v of %d", what, i, got[i].Labels, got[i].Agg.Series, want[i].Labels, want[i].Agg.Series)
			}
			sameAgg(t, fmt.Sprint(what, got[i].Labels), got[i].Agg, want[i].Agg)
		}
	}
	// A matcher that does not compile is the selector's error, asked of no peer.
	g, _ := window.NewGroupPartials(nil, false)
	hits := ti.peerHit.Load()
	if _, err := ti.a.MergeGroups(context.Background(), t0, "lm", "", []window.Matcher{{Name: "code", Op: window.MatchRegexp, Value: "("}}, time.Minute, false, g); !errors.Is(err, window.ErrMatcher) || ti.peerHit.Load() != hits {
		t.Errorf("bad matcher: %v", err)
	}
	// More groups than MaxGroups on the peer alone (partition 2), then on both.
	for i := range window.MaxGroups + 1 {
		ev := window.Event{TS: t0, Metric: "many", Key: "k" + strconv.Itoa(i), Value: 1, Feed: window.FeedOf(2)}
		if err := ti.storeB.ObserveAt(t0, ev); err != nil {
			t.Fatal(err)
		}
	}
	g, _ = window.NewGroupPartials([]string{"key"}, false)
	if _, err := ti.a.MergeGroups(context.Background(), t0, "many", "", nil, time.Minute, false, g); !errors.Is(err, window.ErrTooManyGroups) {
		t.Errorf("too many groups on the peer: %v", err)
	}
	for i := range window.MaxGroups + 1 {
		ev := window.Event{TS: t0, Metric: "many", Key: "a" + strconv.Itoa(i), Value: 1, Feed: window.FeedOf(0)}
		if err := ti.a.cfg.Store.ObserveAt(t0, ev); err != nil {
			t.Fatal(err)
		}
	}
	g, _ = window.NewGroupPartials([]string{"key"}, false)
	if _, err := ti.a.MergeGroups(context.Background(), t0, "many", "", nil, time.Minute, false, g); !errors.Is(err, window.ErrTooManyGroups) {
		t.Errorf("too many groups here: %v", err)
	}
}
