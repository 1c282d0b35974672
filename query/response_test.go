package query_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/slide-metrics/slide/httperr"
	"github.com/slide-metrics/slide/query"
)

// TestResponseTypesDecodeAnswers decodes real answers into the exported response types
// refusing unknown fields, so a member the server writes and the types lack fails here.
func TestResponseTypesDecodeAnswers(t *testing.T) {
	e := newEnv(t, nil)
	e.post(ndjson([]event{{ts: t0, key: "tenant-1", metric: "latency_ms", value: 5}, {ts: t0, key: "tenant-2", metric: "latency_ms", value: 7}}))
	strict := func(path string, status int, v any) {
		t.Helper()
		code, b, _ := e.do("GET", path, nil)
		if code != status {
			t.Fatalf("GET %s = %d %s, want %d", path, code, b, status)
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		if err := d.Decode(v); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, b)
		}
	}
	var w query.WindowResponse
	strict("/v1/window?metric=latency_ms&key=tenant-1&window=1m&q=0.5", 200, &w)
	if w.Count != 1 || w.Max == nil || *w.Max != 5 || w.ElapsedS == nil || w.Quantiles["0.5"] == nil {
		t.Errorf("/v1/window decoded as %+v", w)
	}
	var top query.TopResponse
	strict("/v1/top?metric=latency_ms&by=max&q=0.99", 200, &top)
	if len(top.Top) != 2 || top.Top[0].Key != "tenant-2" || top.Top[0].Value != 7 || top.By != "max" {
		t.Errorf("/v1/top decoded as %+v", top)
	}
	var bad query.ErrorResponse
	strict("/v1/window?metric=latency_ms&key=tenant-1&window=7s", 400, &bad)
	if bad.Error.Code != string(httperr.BadParameter) || bad.Error.Param != "window" || bad.Error.Message == "" {
		t.Errorf("400 decoded as %+v", bad)
	}
}
