package main

import (
	"context"
	"strings"
	"testing"
)

// serve refuses span flags it cannot use before anything starts, naming the flag.
func TestServeEventFormatFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--event-format", "otlp"}, "--event-format otlp: want slide, otlp_proto or otlp_json"},
		{[]string{"--event-format", "otlp_proto", "--event-map", "envoy"}, "--event-map reads JSON lines of its own shape"},
		{[]string{"--event-format", "otlp_json", "--span-dimensions", "http.route,http_route"}, `both are label "http_route"`},
		{[]string{"--event-format", "otlp_proto", "--span-dimensions", "span.name"}, `label "span_name" is one of a span's own`},
		{[]string{"--event-format", "otlp_proto", "--span-key", ""}, "--span-key"},
	} {
		var stderr strings.Builder
		code := run(context.Background(), append([]string{"serve"}, c.args...), stdio{strings.NewReader(""), &strings.Builder{}, &stderr})
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}
