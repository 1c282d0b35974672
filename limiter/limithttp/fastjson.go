package limithttp

import (
	"strconv"
	"sync"

	"github.com/slide-metrics/slide/jsonenc"
	"github.com/slide-metrics/slide/textparse"
)

// The /v1/allow hot path: a request body in the one common shape is parsed by hand and the
// answer is appended into a pooled buffer, so a decision over HTTP costs a few hundred
// nanoseconds of our own on top of net/http. The body is read by textparse's scanner, the
// one JSON scanner of ingest and batch too; anything unusual (escaped names, unknown or
// repeated fields, non-integer cost, invalid UTF-8) falls back to decodeAllowStrict, which
// also writes the error messages; a differential fuzz test holds the two paths to the same
// answers.

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// parseAllowFast parses {"policy":..,"policies":[..],"key":..,"cost":N} in any order, each
// field at most once, with textparse's scanner. ok is false when encoding/json must decide.
func parseAllowFast(b []byte) (req allowRequest, ok bool) {
	var sc textparse.Scanner
	sc.Reset(b)
	var seen uint8
	for sc.Next() {
		if sc.Name.Escaped { // an escaped or non-ASCII name: the strict decoder names it
			return req, false
		}
		v := sc.Value
		var bit uint8
		switch string(sc.Name.Bytes(b)) {
		case "policy":
			bit = 1
			if req.Policy, ok = fastString(b, v); !ok {
				return req, false
			}
		case "key":
			bit = 2
			if req.Key, ok = fastString(b, v); !ok {
				return req, false
			}
		case "cost":
			bit = 4
			if v.Kind != textparse.Number || !v.Integer {
				return req, false
			}
			c, ok := textparse.ParseInt(v.Bytes(b))
			if !ok {
				return req, false
			}
			req.Cost = &c
		case "policies":
			bit = 8
			if v.Kind != textparse.Array {
				return req, false
			}
			req.Policies = []string{}
			if !sc.Elements(b, v, func(e textparse.Value) bool {
				s, ok := fastString(b, e)
				if ok && len(req.Policies) < MaxPoliciesPerRequest {
					req.Policies = append(req.Policies, s)
					return true
				}
				return false
			}) {
				return req, false
			}
		default:
			return req, false
		}
		if seen&bit != 0 {
			return req, false
		}
		seen |= bit
	}
	return req, sc.Done()
}

// fastString decodes a string value that encoding/json would decode to the same string:
// what it would rewrite to U+FFFD (invalid UTF-8, a lone surrogate) is the strict decoder's.
func fastString(b []byte, v textparse.Value) (string, bool) {
	if v.Kind != textparse.String {
		return "", false
	}
	s := v.Bytes(b)
	if !v.Escaped {
		return string(s), true
	}
	out, lossy := textparse.Unquote(nil, s)
	return string(out), !lossy
}

// appendDecisionJSON appends d as encoding/json would marshal DecisionJSON, without the
// closing brace, so an AllowResponse can add its list.
func appendDecisionJSON(b []byte, d *DecisionJSON) []byte {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, d.Allowed)
	b = append(b, `,"policy":`...)
	b = jsonenc.AppendString(b, d.Policy)
	if d.Plan != "" {
		b = append(b, `,"plan":`...)
		b = jsonenc.AppendString(b, d.Plan)
	}
	if d.Level != "" {
		b = append(b, `,"level":`...)
		b = jsonenc.AppendString(b, d.Level)
	}
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, d.Limit, 10)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, d.Remaining, 10)
	b = append(b, `,"retry_after_ms":`...)
	b = strconv.AppendInt(b, d.RetryAfterMs, 10)
	b = append(b, `,"reset_after_ms":`...)
	b = strconv.AppendInt(b, d.ResetAfterMs, 10)
	if d.DelayMs != 0 {
		b = append(b, `,"delay_ms":`...)
		b = strconv.AppendInt(b, d.DelayMs, 10)
	}
	if d.Shadowed {
		b = append(b, `,"shadowed":true`...)
	}
	if d.Degraded {
		b = append(b, `,"degraded":true`...)
	}
	if d.StaleMs != nil {
		b = append(b, `,"stale_ms":`...)
		b = strconv.AppendInt(b, *d.StaleMs, 10)
	}
	return b
}

// appendAllowResponse appends r and a newline, byte for byte what json.Encoder writes.
func appendAllowResponse(b []byte, r *AllowResponse) []byte {
	b = appendDecisionJSON(b, &r.DecisionJSON)
	if len(r.Decisions) > 0 {
		b = append(b, `,"decisions":[`...)
		for i := range r.Decisions {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendDecisionJSON(b, &r.Decisions[i])
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}', '\n')
}
