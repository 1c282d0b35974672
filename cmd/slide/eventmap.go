package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/slide-metrics/slide/event"
)

// --event-map reads JSON lines of any shape into events through an event.Map: a built-in
// preset (envoy, nginx) or a YAML file of one block, or a list of blocks, each one event of
// a line:
//
//	metric: latency_ms
//	ts: {field: start_time}              # RFC 3339 text, or a number with unit: s | ms | us | ns (default ms)
//	value: {field: duration, scale: 1}   # scale multiplies
//	key: {field: upstream_cluster, default: "-"}
//	labels: {code: response_code, method: method}   # label name: field
//	trace: {field: traceparent, span: span_id}      # optional: the exemplar's trace (event.MapTrace)
//
// ts, value, key and trace also take the field alone (value: duration). The file is parsed here,
// with its lines, and held to the event package's rules by event.Map.Validate; a bad file
// stops the command at start, each problem with file:line.

const eventMapUsage = "read JSON lines of any shape into events through a map: envoy (Envoy Gateway's default JSON access log), nginx (the log_format of docs/sre.md) or a YAML `FILE` (docs/sre.md: Access logs and any JSON); empty: slide's own events"

// eventMapFormat returns the constructor of the Format that --event-map spec names, one per
// goroutine, or nil for "" (slide's own JSON events). A preset's name wins over a file of that
// name (write ./envoy for the file).
func eventMapFormat(spec string, cfg event.Config) (func() (event.Format, error), error) {
	if spec == "" {
		return nil, nil
	}
	m, err := loadEventMap(spec)
	if err != nil {
		return nil, err
	}
	if _, err := event.NewMapDecoder(m, cfg); err != nil {
		return nil, fmt.Errorf("--event-map: %w", err)
	}
	return func() (event.Format, error) { return event.NewMapDecoder(m, cfg) }, nil
}

// loadEventMap reads the map that spec names: a preset, or a YAML file.
func loadEventMap(spec string) (event.Map, error) {
	if m, ok := event.Preset(spec); ok {
		return m, nil
	}
	data, err := os.ReadFile(spec)
	if err != nil {
		return event.Map{}, fmt.Errorf("--event-map: %w (the presets are %s)", err, strings.Join(event.PresetNames(), ", "))
	}
	m, err := parseEventMap(data, spec)
	if err != nil {
		return event.Map{}, fmt.Errorf("--event-map: %w", err)
	}
	return m, nil
}

// parseEventMap parses a map file named source: one block, or a list of them. Every problem
// is reported, each as "source:line: …".
func parseEventMap(data []byte, source string) (event.Map, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return event.Map{}, fmt.Errorf("%s: %w", source, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return event.Map{}, fmt.Errorf("%s:1: empty file: want a block such as {metric: latency_ms, value: duration, key: upstream_cluster}, or a list of them", source)
	}
	p := mapParser{source: source}
	root := deref(doc.Content[0])
	blocks := []*yaml.Node{root}
	if root.Kind == yaml.SequenceNode {
		blocks = root.Content
		if len(blocks) == 0 {
			p.bad(root, "an empty list of metrics")
		}
	}
	var m event.Map
	for _, b := range blocks {
		if mm, ok := p.block(deref(b)); ok {
			m.Metrics = append(m.Metrics, mm)
		}
	}
	if len(p.errs) == 0 {
		if err := m.Validate(); err != nil {
			return event.Map{}, err // each problem prefixed by its block's source:line
		}
	}
	if len(p.errs) > 0 {
		return event.Map{}, errors.Join(p.errs...)
	}
	return m, nil
}

type mapParser struct {
	source string
	errs   []error
}

func (p *mapParser) at(n *yaml.Node) string { return p.source + ":" + strconv.Itoa(n.Line) }

func (p *mapParser) bad(n *yaml.Node, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s: %s", p.at(n), fmt.Sprintf(format, args...)))
}

// deref follows an alias (*name) to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 16; i++ {
		n = n.Alias
	}
	return n
}

// members walks a mapping's members, each key once, and refuses any other node.
func (p *mapParser) members(n *yaml.Node, what string, fn func(k, v *yaml.Node)) bool {
	if n.Kind != yaml.MappingNode {
		p.bad(n, "%s must be a mapping", what)
		return false
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		if seen[k.Value] {
			p.bad(k, "%s: %q given twice", what, k.Value)
			continue
		}
		seen[k.Value] = true
		fn(k, v)
	}
	return true
}

// scalar is v's text, or "" and a problem when v is not a scalar.
func (p *mapParser) scalar(v *yaml.Node, what string) (string, bool) {
	if v.Kind != yaml.ScalarNode {
		p.bad(v, "%s must be a single value", what)
		return "", false
	}
	return v.Value, true
}

func (p *mapParser) block(n *yaml.Node) (event.MapMetric, bool) {
	mm := event.MapMetric{Source: p.at(n)}
	before := len(p.errs)
	p.members(n, "a metric", func(k, v *yaml.Node) {
		switch k.Value {
		case "metric":
			mm.Metric, _ = p.scalar(v, "metric")
		case "ts":
			mm.TS.Field = p.field(v, "ts", func(k, v *yaml.Node) {
				if k.Value != "unit" {
					p.bad(k, "ts: unknown field %q (ts has field, unit)", k.Value)
					return
				}
				mm.TS.Unit, _ = p.scalar(v, "ts: unit")
			})
		case "value":
			mm.Value.Field = p.field(v, "value", func(k, v *yaml.Node) {
				if k.Value != "scale" {
					p.bad(k, "value: unknown field %q (value has field, scale)", k.Value)
					return
				}
				s, ok := p.scalar(v, "value: scale")
				if !ok {
					return
				}
				f, err := strconv.ParseFloat(s, 64)
				if err != nil || f == 0 {
					p.bad(v, "value: scale %q: want a number, not 0", s)
					return
				}
				mm.Value.Scale = f
			})
		case "key":
			mm.Key.Field = p.field(v, "key", func(k, v *yaml.Node) {
				if k.Value != "default" {
					p.bad(k, "key: unknown field %q (key has field, default)", k.Value)
					return
				}
				if mm.Key.Default, _ = p.scalar(v, "key: default"); mm.Key.Default == "" {
					p.bad(v, "key: default: empty (omit it to refuse lines without the key)")
				}
			})
		case "labels":
			p.members(v, "labels", func(k, v *yaml.Node) {
				f, ok := p.scalar(v, "label "+strconv.Quote(k.Value))
				if ok && f == "" {
					p.bad(v, "label %q: no field", k.Value)
				}
				mm.Labels = append(mm.Labels, event.MapLabel{Name: k.Value, Field: f})
			})
		case "trace":
			mm.Trace = p.trace(v)
		default:
			p.bad(k, "unknown field %q (a metric has metric, ts, value, key, labels, trace)", k.Value)
		}
	})
	return mm, len(p.errs) == before
}

// trace reads a trace spec: the field alone, or a mapping of field and span (span only with
// field).
func (p *mapParser) trace(v *yaml.Node) event.MapTrace {
	var t event.MapTrace
	if v.Kind == yaml.ScalarNode {
		if t.Field = v.Value; t.Field == "" {
			p.bad(v, "trace: no field")
		}
		return t
	}
	p.members(v, "trace", func(k, v *yaml.Node) {
		var dst *string
		switch k.Value {
		case "field":
			dst = &t.Field
		case "span":
			dst = &t.Span
		default:
			p.bad(k, "trace: unknown field %q (trace has field, span)", k.Value)
			return
		}
		if s, ok := p.scalar(v, "trace: "+k.Value); ok && s == "" {
			p.bad(v, "trace: %s: empty", k.Value)
		} else {
			*dst = s
		}
	})
	if t.Span != "" && t.Field == "" {
		p.bad(v, "trace: span without field (trace: {field: traceparent, span: %s})", t.Span)
	}
	return t
}

// field reads a field spec: the field's path alone, or a mapping of field and what other
// reads.
func (p *mapParser) field(v *yaml.Node, what string, other func(k, v *yaml.Node)) string {
	if v.Kind == yaml.ScalarNode {
		if v.Value == "" {
			p.bad(v, "%s: no field", what)
		}
		return v.Value
	}
	var f string
	named := false
	if !p.members(v, what, func(k, v *yaml.Node) {
		if k.Value == "field" {
			f, _ = p.scalar(v, what+": field")
			named = true
			return
		}
		other(k, v)
	}) {
		return ""
	}
	if !named || f == "" {
		p.bad(v, "%s: no field (%s: {field: NAME})", what, what)
	}
	return f
}
