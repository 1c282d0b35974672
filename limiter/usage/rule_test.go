package usage_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/usage"
)

const policyFile = `# policies.yaml
policies:
  - name: per-tenant
    algorithm: sliding_counter
    limit: 100
    window: 1m
rules:
  - {name: tenant-quota, metric: cost, agg: sum, window: 1h, max: 1000}
  - name: shed-slow
    metric: latency_ms
    agg: p95
    window: 5m
    max: 800
    key: "*"
`

func TestParseRules(t *testing.T) {
	rules, err := usage.ParseRules([]byte(policyFile), "policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []usage.Rule{
		{Name: "tenant-quota", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 1000, Source: "policies.yaml:8"},
		{Name: "shed-slow", Metric: "latency_ms", Agg: usage.Agg{Kind: usage.KindQuantile, Q: 0.95}, Window: 5 * time.Minute, Max: 800, Key: "*", Source: "policies.yaml:9"},
	}
	if fmt.Sprint(rules) != fmt.Sprint(want) {
		t.Fatalf("rules\n got %+v\nwant %+v", rules, want)
	}
	if rules, err := usage.ParseRules([]byte("policies: []\n"), "p.yaml"); err != nil || rules != nil {
		t.Fatalf("file without rules: %v, %v", rules, err)
	}
}

func TestParseRulesErrorsNameTheLineAndField(t *testing.T) {
	for _, c := range []struct{ yaml, msg string }{
		{"rules:\n  - {name: q, metric: cost, agg: sum, window: 1h}\n", `p.yaml:2: rule "q": max: required`},
		{"rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, max: lots}\n", `max: "lots" is not a number`},
		{"rules:\n  - {name: q, metric: cost, agg: median, window: 1h, max: 1}\n", `agg: "median" is not count`},
		{"rules:\n  - {name: q, metric: cost, agg: sum, window: an hour, max: 1}\n", `window: "an hour" is not a duration`},
		{"rules:\n  - name: q\n    metric: cost\n    agg: sum\n    window: 1h\n    max: 1\n    maximum: 2\n", "p.yaml:7: maximum: unknown field"},
		{"rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, max: 1}\n  - {name: q, metric: x, agg: sum, window: 1h, max: 1}\n", "duplicate rule name (first defined at p.yaml:2)"},
		{"rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, max: .nan}\n", `max: ".nan" is not a number`},
		{"rules: {name: q}\n", "rules: must be a list"},
		{"rules:\n  - just-a-string\n", "a rule is a mapping"},
		{"rules:\n  - {name: [q], metric: cost}\n", "name: must be a string"},
		{"- a\n- b\n", "a policy file is a mapping"},
		{"rules: [\n", "p.yaml:1: not YAML: did not find expected node content"},
	} {
		_, err := usage.ParseRules([]byte(c.yaml), "p.yaml")
		if !errors.Is(err, usage.ErrInvalidRule) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: err %v, want ErrInvalidRule containing %q", c.yaml, err, c.msg)
		}
	}
	_, err := usage.ParseRules([]byte("rules:\n  - {name: q, metric: cost, agg: sum, window: 1h}\n"), "p.yaml")
	if !errors.Is(err, limiter.ErrInvalidPolicy) {
		t.Errorf("rule errors should match limiter.ErrInvalidPolicy too: %v", err)
	}
}

func TestAggRoundTrip(t *testing.T) {
	for in, want := range map[string]string{
		"sum": "sum", "COUNT": "count", "avg": "avg", "min": "min", "max": "max", "rate": "rate",
		"p95": "p95", "p99.9": "p99.9", "p999": "p99.9", "0.5": "p50", "p5": "p5", "p100": "p100", "0": "p0", "0.9999": "p99.99",
	} {
		a, err := usage.ParseAgg(in)
		if err != nil || a.String() != want {
			t.Errorf("ParseAgg(%q) = %v, %v; want %s", in, a, err, want)
			continue
		}
		if back, err := usage.ParseAgg(a.String()); err != nil || back != a {
			t.Errorf("%q: %s parses back as %v, %v", in, a, back, err)
		}
	}
	for _, bad := range []string{"", "p", "p100.5", "p1000.1", "1.5", "median", "p9x", "-0.1"} {
		if _, err := usage.ParseAgg(bad); err == nil {
			t.Errorf("ParseAgg(%q) accepted", bad)
		}
	}
}

// formatRule writes r as a policy-file rule; ParseRules must read it back unchanged.
func formatRule(r usage.Rule) string {
	if r.Levels.N > 0 {
		return fmt.Sprintf("rules:\n  - {name: %q, metric: %q, agg: %q, window: %q, key: %q, levels: {separator: %q, max: %v}}\n",
			r.Name, r.Metric, r.Agg.String(), r.Window.String(), r.Key, r.Levels.Separator, strings.ReplaceAll(fmt.Sprint(r.Levels.Max[:r.Levels.N]), " ", ", "))
	}
	return fmt.Sprintf("rules:\n  - {name: %q, metric: %q, agg: %q, window: %q, max: %v, key: %q}\n",
		r.Name, r.Metric, r.Agg.String(), r.Window.String(), r.Max, r.Key)
}

// FuzzParseRules: no panic on any file, and every rule accepted formats to a file that
// parses back to the same rule.
func FuzzParseRules(f *testing.F) {
	f.Add([]byte(policyFile))
	f.Add([]byte("rules:\n  - {name: q, metric: cost, agg: p99.9, window: 90s, max: -3.5, key: \"{key}/x\"}\n"))
	f.Add([]byte("rules: [{name: a, metric: b, agg: rate, window: 1m, max: 1e9}]"))
	f.Add([]byte("rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, levels: {separator: \"::\", max: [5e4, 2.5, 1]}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := usage.ParseRules(data, "f.yaml")
		if err != nil {
			return
		}
		for _, r := range rules {
			back, err := usage.ParseRules([]byte(formatRule(r)), "f.yaml")
			if err != nil || len(back) != 1 {
				t.Fatalf("rule %+v formatted as %q: %v", r, formatRule(r), err)
			}
			back[0].Source, r.Source = "", ""
			if back[0] != r {
				t.Fatalf("round trip: %+v became %+v", r, back[0])
			}
		}
	})
}

func TestParseFile(t *testing.T) {
	policies, rules, err := usage.ParseFile([]byte(policyFile), "policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(policies) != 1 || policies[0].Name != "per-tenant" || policies[0].Source != "policies.yaml:3" || len(rules) != 2 {
		t.Fatalf("policies %+v rules %+v", policies, rules)
	}
	// Rules first, then policies: the policy errors keep the file's line numbers.
	bad := "rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, max: 1}\n\npolicies:\n  - name: p\n    algorithm: fixed_window\n    limit: 0\n    window: 1m\n"
	if _, _, err := usage.ParseFile([]byte(bad), "p.yaml"); !errors.Is(err, limiter.ErrInvalidPolicy) || !strings.Contains(err.Error(), "p.yaml:7: policy \"p\": limit") {
		t.Fatalf("bad policy after the rules: %v, want an error at p.yaml:7, the limit line", err)
	}
	if _, rules, err := usage.ParseFile([]byte("rules: [{name: q, metric: cost, agg: sum, window: 1h, max: 1}]\n"), "p.yaml"); err != nil || len(rules) != 1 {
		t.Fatalf("rules only: %v, %v", rules, err)
	}
	if _, _, err := usage.ParseFile([]byte("other: 1\n"), "p.yaml"); err == nil {
		t.Fatal("a file with neither list was accepted")
	}
}

// TestParseRulesMatch: match: is read with the rule, and a matcher that does not parse or
// compile is refused at load, naming the file's line, the field and the matcher.
func TestParseRulesMatch(t *testing.T) {
	rules, err := usage.ParseRules([]byte("rules:\n  - {name: pay, metric: cost, agg: sum, window: 1h, max: 10, match: 'route=\"/pay\",code=~\"5..\"'}\n"), "p.yaml")
	if err != nil || len(rules) != 1 || rules[0].Match != `route="/pay",code=~"5.."` {
		t.Fatalf("rules %+v, err %v", rules, err)
	}
	for _, c := range []struct{ match, msg string }{
		{`route=~"("`, `p.yaml:2: rule "q": match: `},
		{`route=~"("`, `(`},
		{`route`, `p.yaml:2: rule "q": match: "route": `},
		{`__name__="cost"`, `the metric is given by metric:`},
		{`__x="1"`, `match: invalid matcher __x="1"`},
	} {
		y := fmt.Sprintf("rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, max: 1, match: '%s'}\n", c.match)
		_, err := usage.ParseRules([]byte(y), "p.yaml")
		if !errors.Is(err, usage.ErrInvalidRule) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("match %s: err %v, want ErrInvalidRule containing %q", c.match, err, c.msg)
		}
	}
}
