package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/window"
)

// slide produce --otlp writes otlp_proto records of three services that the OTLP reader
// takes whole: every span an event of its record's service, with its route and status code;
// --zipkin the same as zipkin_json records, read with the same --span-dimensions.
func TestProduceOTLP(t *testing.T) {
	addr := startBroker(t)
	for _, c := range []struct {
		flag, format string
		newDec       func(event.SpanConfig) (*event.SpanDecoder, error)
	}{{"--otlp", "otlp_proto", event.NewOTLPProto}, {"--zipkin", "zipkin_json", event.NewZipkinJSON}} {
		produceSpans(t, addr, c.flag, c.format, c.newDec)
	}
}

func produceSpans(t *testing.T, addr, flag, format string, newDec func(event.SpanConfig) (*event.SpanDecoder, error)) {
	var out, errb bytes.Buffer
	err := cmdProduce(context.Background(), []string{"--brokers", addr, "--topic", format, flag, "--rate", "2000", "--duration", "300ms"},
		stdio{strings.NewReader(""), &out, &errb})
	if err != nil {
		t.Fatalf("produce %s: %v\n%s", flag, err, errb.String())
	}
	m := regexp.MustCompile(`^sent (\d+) spans \((\d+) ` + format + ` records, 3 services\) to ` + format + ` on `).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("output %q", out.String())
	}
	spans, _ := strconv.Atoi(m[1])
	recs := topicRecords(t, addr, format)
	if n, _ := strconv.Atoi(m[2]); n != len(recs) || spans != 50*len(recs) || spans == 0 {
		t.Fatalf("the topic holds %d records, the command says %s records and %d spans", len(recs), m[2], spans)
	}
	d, err := newDec(event.SpanConfig{Dimensions: []string{"http.route", "http.response.status_code"}})
	if err != nil {
		t.Fatal(err)
	}
	services := map[string]int{}
	for _, r := range recs {
		d.DecodeLines(r.Value, 0, func(_ []byte, ev window.Event, reason event.Reason) {
			if reason != event.ReasonNone || window.SeriesKeyOf(ev.Key) != string(r.Key) || ev.Metric != event.SpanMetric ||
				!strings.Contains(ev.Key, "\xffhttp_route=") || !strings.Contains(ev.Key, "\xffhttp_response_status_code=") {
				t.Fatalf("record of %s: %q %v", r.Key, ev.Key, reason)
			}
			services[string(r.Key)]++
		})
	}
	if len(services) != 3 {
		t.Errorf("%s: spans by service %v, want three services", flag, services)
	}
}
