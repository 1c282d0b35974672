package limiter

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const goodPolicies = `policies:
  - name: login
    algorithm: sliding_log          # fixed_window | sliding_log | sliding_counter | token_bucket | leaky_bucket
    limit: 3
    window: 60s
    backend: redis                  # memory | redis
    on_backend_error: closed        # open | closed | local
    timeout: 50ms
  - name: api
    algorithm: token_bucket
    capacity: 10
    refill_per_second: 5
    backend: memory
  - name: smooth
    algorithm: leaky_bucket
    capacity: 5
    leak_per_second: 2.5
    max_delay: 500ms
    shadow: true
`

func TestParsePolicies(t *testing.T) {
	ps, err := ParsePolicies([]byte(goodPolicies), "policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []Policy{
		{Name: "login", Algorithm: SlidingLog, Limit: 3, Window: time.Minute, Backend: BackendRedis,
			OnBackendError: FailClosed, Timeout: 50 * time.Millisecond, Source: "policies.yaml:2"},
		{Name: "api", Algorithm: TokenBucket, Capacity: 10, RefillPerSecond: 5, Source: "policies.yaml:9"},
		{Name: "smooth", Algorithm: LeakyBucket, Capacity: 5, LeakPerSecond: 2.5, MaxDelay: 500 * time.Millisecond,
			Shadow: true, Source: "policies.yaml:14"},
	}
	if !reflect.DeepEqual(ps, want) {
		t.Errorf("got  %+v\nwant %+v", ps, want)
	}
}

// A bad file is refused with the line and the problem, every problem at once.
func TestParsePoliciesErrors(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown field", "policies:\n  - name: a\n    algorithm: fixed_window\n    limt: 3\n    window: 1s\n",
			[]string{`p.yaml:4: policy "a": unknown field "limt" (known: name, algorithm, limit, window, timezone, capacity, refill_per_second, leak_per_second, max_delay, backend, on_backend_error, timeout, shadow, levels)`}},
		{"missing limit", "policies:\n  - name: a\n    algorithm: fixed_window\n    window: 1s\n",
			[]string{`p.yaml:2: policy "a": limit: missing or must be between 1 and 1099511627776`}},
		{"invalid window", "policies:\n  - name: a\n    algorithm: sliding_log\n    limit: 3\n    window: sixty\n",
			[]string{`p.yaml:5: policy "a": window: "sixty" is not a duration such as 90s, 5m, 1h or 7d`}},
		{"limit not an integer", "policies:\n  - name: a\n    algorithm: sliding_log\n    limit: \"3\"\n    window: 1s\n",
			[]string{`p.yaml:4: policy "a": limit: must be an integer, not "3"`}},
		{"zero limit", "policies:\n  - name: a\n    algorithm: sliding_log\n    limit: 0\n    window: 1s\n",
			[]string{`p.yaml:4: policy "a": limit: must be between 1 and 100000`}},
		{"unknown algorithm", "policies:\n  - name: a\n    algorithm: gcra\n",
			[]string{`p.yaml:3: policy "a": algorithm: unknown algorithm "gcra"`}},
		{"duplicate", "policies:\n  - name: a\n    algorithm: fixed_window\n    limit: 1\n    window: 1s\n  - name: a\n    algorithm: fixed_window\n    limit: 2\n    window: 1s\n",
			[]string{`p.yaml:6: policy "a": name: duplicate policy name (first defined at p.yaml:2)`}},
		// The ninth probe: names that differ only by case are one name to a reader
		// of the file (and of a dashboard), and a timeout no Redis round trip fits in made
		// every call answer 503 with Redis healthy.
		{"duplicate by case", "policies:\n  - name: P\n    algorithm: fixed_window\n    limit: 1\n    window: 1s\n  - name: p\n    algorithm: fixed_window\n    limit: 2\n    window: 1s\n",
			[]string{`p.yaml:6: policy "p": name: duplicate policy name (first defined at p.yaml:2)`}},
		{"timeout 1ns", "policies:\n  - name: a\n    algorithm: fixed_window\n    limit: 1\n    window: 1s\n    backend: redis\n    timeout: 1ns\n",
			[]string{`p.yaml:7: policy "a": timeout: must be 0 (default 50ms) or between 1ms and 1m`}},
		{"timeout 999us", "policies:\n  - name: a\n    algorithm: fixed_window\n    limit: 1\n    window: 1s\n    backend: redis\n    timeout: 999us\n",
			[]string{`p.yaml:7: policy "a": timeout: must be 0 (default 50ms) or between 1ms and 1m`}},
		{"bad backend and mode", "policies:\n  - name: a\n    algorithm: fixed_window\n    limit: 1\n    window: 1s\n    backend: etcd\n    on_backend_error: retry\n",
			[]string{`p.yaml:6: policy "a": backend: must be memory, redis or cluster, not "etcd"`, `p.yaml:7: policy "a": on_backend_error: must be open, closed or local, not "retry"`}},
		{"mode on memory", "policies:\n  - name: a\n    algorithm: fixed_window\n    limit: 1\n    window: 1s\n    on_backend_error: local\n",
			[]string{`p.yaml:6: policy "a": on_backend_error: local applies only to backend redis or cluster (a memory policy is open or closed when its store is full)`}},
		{"field of another algorithm", "policies:\n  - name: a\n    algorithm: sliding_log\n    limit: 1\n    window: 1s\n    capacity: 3\n",
			[]string{`p.yaml:6: policy "a": capacity: applies only to token_bucket and leaky_bucket`}},
		{"missing name", "policies:\n  - algorithm: fixed_window\n",
			[]string{`p.yaml:2: name: missing`}},
		{"top-level typo", "policy:\n  - name: a\n",
			[]string{`p.yaml:1: unknown field "policy" (want policies)`, `p.yaml:1: missing "policies:" list`}},
		{"empty list", "policies: []\n", []string{`p.yaml:1: policies: must be a non-empty list of policies`}},
		{"not yaml", "policies: [\n", []string{`p.yaml:1: not YAML: did not find expected node content`}},
		{"empty", "", []string{`p.yaml:1: empty file`}},
		{"two bad policies", "policies:\n  - name: a\n    algorithm: x\n  - name: b\n    algorithm: token_bucket\n    capacity: -1\n    refill_per_second: 1\n",
			[]string{`p.yaml:3: policy "a": algorithm: unknown algorithm "x"`, `p.yaml:6: policy "b": capacity: must be between 1 and`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePolicies([]byte(c.yaml), "p.yaml")
			if err == nil {
				t.Fatal("parsed, want an error")
			}
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Errorf("error %v does not wrap ErrInvalidPolicy", err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(c.want) {
				t.Fatalf("got %d problems:\n%s\nwant %d", len(lines), err, len(c.want))
			}
			for i, w := range c.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("problem %d:\n got  %s\n want %s", i, lines[i], w)
				}
			}
		})
	}
}

func TestNewServiceRefusesRedisWithoutAddress(t *testing.T) {
	ps, err := ParsePolicies([]byte(goodPolicies), "policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewService(Config{Policies: ps})
	want := `policies.yaml:2: policy "login": backend: redis needs a Redis address (slide serve --redis ADDR)`
	if err == nil || err.Error() != want {
		t.Fatalf("NewService error = %v\nwant %s", err, want)
	}
	if !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("error does not wrap ErrInvalidPolicy")
	}
}

func TestMarshalPoliciesRoundTrip(t *testing.T) {
	ps, err := ParsePolicies([]byte(goodPolicies), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := MarshalPolicies(ps)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParsePolicies(out, "b.yaml")
	if err != nil {
		t.Fatalf("re-parsing\n%s: %v", out, err)
	}
	for i := range ps {
		ps[i].Source, back[i].Source = "", ""
	}
	if !reflect.DeepEqual(ps, back) {
		t.Errorf("round trip changed the policies:\n%+v\n%+v\n%s", ps, back, out)
	}
}

func FuzzParsePolicies(f *testing.F) {
	f.Add([]byte(goodPolicies))
	f.Add([]byte("policies:\n  - name: a\n    algorithm: fixed_window\n    limit: 1\n    window: 1s\n"))
	f.Add([]byte("policies:\n  - name: a\n    algorithm: sliding_counter\n    limit: 99999999\n    window: 8760h\n"))
	f.Add([]byte("policies:\n  - {name: x, algorithm: token_bucket, capacity: 1e3, refill_per_second: 1e-300}\n"))
	f.Add([]byte("policies: [[], {}, 1]\nextra: 1\n"))
	f.Add([]byte("policies:\n  - {name: u, algorithm: fixed_window, limit: 1, window: 1m, timezone: UTC}\n")) // reads back as no zone
	f.Add([]byte("policies:\n  - {name: o, algorithm: fixed_window, window: calendar_month, timezone: Asia/Kolkata, levels: {separator: \"/\", limits: [50, 30, 20]}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := ParsePolicies(data, "fuzz.yaml")
		if err != nil {
			return
		}
		for i := range ps {
			if err := ps[i].Validate(); err != nil {
				t.Fatalf("parsed an invalid policy: %v", err)
			}
		}
		out, err := MarshalPolicies(ps)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParsePolicies(out, "fuzz.yaml")
		if err != nil {
			t.Fatalf("round trip failed: %v\n%s", err, out)
		}
		for i := range ps {
			ps[i].Source, back[i].Source = "", ""
		}
		if !reflect.DeepEqual(ps, back) {
			t.Fatalf("round trip changed the policies:\n%+v\n%+v", ps, back)
		}
	})
}

// A file over MaxPolicyFileBytes (a wrong path, a log) is refused before parsing.
func TestLoadPoliciesRefusesHugeFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.yaml")
	if err := os.WriteFile(path, bytes.Repeat([]byte("# x\n"), MaxPolicyFileBytes/4+1), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadPolicies(path)
	var pe *PolicyError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), path+": larger than 4 MiB") {
		t.Fatalf("LoadPolicies of a %d-byte file: %v", MaxPolicyFileBytes+4, err)
	}
}

// The names of the policy file parse back to what String writes, exactly (no case folding,
// as the rest of the file), for policy files and the rls config alike.
func TestParseBackendAndFailureMode(t *testing.T) {
	for _, b := range []BackendKind{BackendMemory, BackendRedis} {
		if got, ok := ParseBackend(b.String()); !ok || got != b {
			t.Errorf("ParseBackend(%q) = %v, %v", b.String(), got, ok)
		}
	}
	for _, f := range []FailureMode{FailOpen, FailClosed, FailLocal} {
		if got, ok := ParseFailureMode(f.String()); !ok || got != f {
			t.Errorf("ParseFailureMode(%q) = %v, %v", f.String(), got, ok)
		}
	}
	for _, s := range []string{"", "Redis", "BackendKind(2)", "memory "} {
		if _, ok := ParseBackend(s); ok {
			t.Errorf("ParseBackend(%q) accepted", s)
		}
	}
	for _, s := range []string{"", "Open", "fail_open", "FailureMode(3)"} {
		if _, ok := ParseFailureMode(s); ok {
			t.Errorf("ParseFailureMode(%q) accepted", s)
		}
	}
}

// TestSyntaxErrorAtItsLine: a YAML mistake is reported at the line that broke the file, not
// at the line where yaml.v3's enclosing block began (line 1 for a bad indent on line 6).
func TestSyntaxErrorAtItsLine(t *testing.T) {
	for _, c := range []struct{ name, file, want string }{
		{"indent out of the list item", "policies:\n  - name: api\n    algorithm: token_bucket\n    capacity: 10\n    refill_per_second: 5\n   backend: memory\n",
			"p.yaml:6: not YAML: did not find expected '-' indicator (in the block from line 1)"},
		{"tab", "policies:\n  - name: api\n    algorithm: token_bucket\n    capacity: 10\n\trefill_per_second: 5\n",
			"p.yaml:5: not YAML: found a tab character that violates indentation (in the block from line 4)"},
		{"indent too deep", "policies:\n  - name: api\n    limit: 3\n      window: 60s\n", "p.yaml:4: not YAML: mapping values are not allowed in this context"},
		// A quoted string over two lines is YAML; the mistake after it is still found.
		{"after a folded string", "policies:\n  - name: \"a\n    b\"\n    limit: 3\n   window: 60s\n", "p.yaml:5: not YAML: "},
	} {
		_, err := ParsePolicies([]byte(c.file), "p.yaml")
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant %q…", c.name, err, c.want)
		}
	}
}
