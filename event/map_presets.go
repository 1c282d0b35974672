package event

import (
	"maps"
	"slices"
)

// The built-in maps, `--event-map envoy` and `--event-map nginx`: each reads an access log's
// line into two events of one series, latency_ms and bytes_sent, keyed by what served the
// request and labelled by its status code and method, so that a read can take p95 by
// upstream, count errors by code= and group by method.
//
// envoy reads Envoy Gateway's default JSON access log (its EnvoyProxy default format, the
// fields of Envoy's %START_TIME%, %DURATION%, %RESPONSE_CODE%, … operators):
//
//	{"start_time":"2026-12-02T09:05:00.123Z","method":"GET","x-envoy-origin-path":"/pay",
//	 "protocol":"HTTP/1.1","response_code":200,"response_flags":"-","bytes_received":0,
//	 "bytes_sent":466,"duration":3,"upstream_cluster":"httproute/default/pay/rule/0",…}
//
// latency_ms is duration (ms) and bytes_sent bytes_sent, at start_time, keyed by
// upstream_cluster ("-" when Envoy writes null, as for a route not found), with labels code
// (response_code), method and flags (response_flags). The path is no label: it holds ids and
// query strings, a series each.
//
// nginx reads the lines of this log_format (written out in docs/sre.md), one JSON object per
// request with nginx's escape=json:
//
//	log_format slide escape=json '{"msec":$msec,"host":"$host","method":"$request_method",'
//	    '"uri":"$uri","status":$status,"request_time":$request_time,"bytes_sent":$bytes_sent,'
//	    '"upstream_addr":"$upstream_addr","request_id":"$request_id"}';
//
// latency_ms is request_time × 1000 (nginx writes seconds with a millisecond resolution) and
// bytes_sent bytes_sent, at msec (seconds, with milliseconds), keyed by host, with labels
// code (status) and method.
//
// Neither reads a trace (MapTrace): neither format logs one. docs/sre.md shows the field to
// add to each (%REQ(TRACEPARENT)%, $http_traceparent) and the map that reads it.
var presets = map[string]Map{
	"envoy": {Metrics: []MapMetric{
		envoyMetric("latency_ms", "duration"),
		envoyMetric("bytes_sent", "bytes_sent"),
	}},
	"nginx": {Metrics: []MapMetric{
		nginxMetric("latency_ms", "request_time", 1000),
		nginxMetric("bytes_sent", "bytes_sent", 1),
	}},
}

func envoyMetric(metric, field string) MapMetric {
	return MapMetric{
		Metric: metric, Source: "preset envoy",
		TS:    MapTS{Field: "start_time"},
		Value: MapValue{Field: field},
		Key:   MapKey{Field: "upstream_cluster", Default: "-"},
		Labels: []MapLabel{
			{Name: "code", Field: "response_code"},
			{Name: "method", Field: "method"},
			{Name: "flags", Field: "response_flags"},
		},
	}
}

func nginxMetric(metric, field string, scale float64) MapMetric {
	return MapMetric{
		Metric: metric, Source: "preset nginx",
		TS:    MapTS{Field: "msec", Unit: "s"},
		Value: MapValue{Field: field, Scale: scale},
		Key:   MapKey{Field: "host"},
		Labels: []MapLabel{
			{Name: "code", Field: "status"},
			{Name: "method", Field: "method"},
		},
	}
}

// Preset returns the built-in map of that name (envoy, nginx), and whether there is one.
func Preset(name string) (Map, bool) {
	m, ok := presets[name]
	if !ok {
		return Map{}, false
	}
	out := Map{Metrics: slices.Clone(m.Metrics)}
	for i := range out.Metrics {
		out.Metrics[i].Labels = slices.Clone(out.Metrics[i].Labels)
	}
	return out, true
}

// PresetNames lists the built-in maps' names, sorted.
func PresetNames() []string { return slices.Sorted(maps.Keys(presets)) }
