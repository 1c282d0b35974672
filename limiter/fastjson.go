package limiter

import (
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/slide-metrics/slide/jsonenc"
)

// The /v1/allow hot path: a request body in the one common shape is parsed by hand and the
// answer is appended into a pooled buffer, so a decision over HTTP costs a few hundred
// nanoseconds of our own on top of net/http. Anything unusual (escapes, unknown or repeated
// fields, non-integer cost, invalid UTF-8) falls back to encoding/json, which also writes
// the error messages; a differential fuzz test holds the two paths to the same answers.

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// parseAllowFast parses {"policy":..,"policies":[..],"key":..,"cost":N} in any order, each
// field at most once. ok is false when encoding/json must decide.
func parseAllowFast(b []byte) (req allowRequest, ok bool) {
	p := fastParser{b: b}
	p.ws()
	if !p.byte('{') {
		return req, false
	}
	var seen uint8
	p.ws()
	if p.byte('}') {
		return req, p.end()
	}
	for {
		p.ws()
		name, ok := p.str()
		if !ok {
			return req, false
		}
		p.ws()
		if !p.byte(':') {
			return req, false
		}
		p.ws()
		var bit uint8
		switch name {
		case "policy":
			bit = 1
			if req.Policy, ok = p.str(); !ok {
				return req, false
			}
		case "key":
			bit = 2
			if req.Key, ok = p.str(); !ok {
				return req, false
			}
		case "cost":
			bit = 4
			c, ok := p.int()
			if !ok {
				return req, false
			}
			req.Cost = &c
		case "policies":
			bit = 8
			if req.Policies, ok = p.strs(); !ok {
				return req, false
			}
		default:
			return req, false
		}
		if seen&bit != 0 {
			return req, false
		}
		seen |= bit
		p.ws()
		if p.byte(',') {
			continue
		}
		if p.byte('}') {
			return req, p.end()
		}
		return req, false
	}
}

type fastParser struct {
	b []byte
	i int
}

func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) byte(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (p *fastParser) end() bool {
	p.ws()
	return p.i == len(p.b)
}

// str reads a string without escapes or control characters, valid UTF-8.
func (p *fastParser) str() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	start, ascii := p.i, true
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !ascii && !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		case c == '\\' || c < 0x20:
			return "", false
		case c >= 0x80:
			ascii = false
		}
		p.i++
	}
	return "", false
}

func (p *fastParser) strs() ([]string, bool) {
	if !p.byte('[') {
		return nil, false
	}
	out := []string{}
	p.ws()
	if p.byte(']') {
		return out, true
	}
	for {
		p.ws()
		s, ok := p.str()
		if !ok || len(out) == MaxPoliciesPerRequest {
			return nil, false
		}
		out = append(out, s)
		p.ws()
		if p.byte(',') {
			continue
		}
		return out, p.byte(']')
	}
}

// int reads a JSON integer of at most 18 digits (no fraction, no exponent).
func (p *fastParser) int() (int64, bool) {
	neg := p.byte('-')
	start := p.i
	var n int64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		n = n*10 + int64(p.b[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 18 || (digits > 1 && p.b[start] == '0') {
		return 0, false
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	return n, true
}

// appendDecisionJSON appends d as encoding/json would marshal DecisionJSON, without the
// closing brace, so an AllowResponse can add its list.
func appendDecisionJSON(b []byte, d *DecisionJSON) []byte {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, d.Allowed)
	b = append(b, `,"policy":`...)
	b = jsonenc.AppendString(b, d.Policy)
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
