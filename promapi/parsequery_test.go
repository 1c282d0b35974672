package promapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// TestParseQuery: /api/v1/parse_query (Prometheus 3's UI asks it for its tree view and
// explain pane) answers the expression's syntax tree in Prometheus' JSON, by GET and by
// POST: foo/bar as Prometheus' API documentation shows it (with the fields its v0.316
// adds: anchored, smoothed, offsetExpr, fillValues), a duration expression as Prometheus'
// own tests of the tree expect it, and a query of every kind of node; a query that does
// not parse is a 400 bad_data naming the parameter, as format_query's.
func TestParseQuery(t *testing.T) {
	d := newDemo(t, "native:5", 1, 1)
	srv := serveDemo(t, d, Config{})
	sel := func(name, rest string) string {
		return `{"anchored":false,"matchers":[{"name":"__name__","type":"=","value":"` + name + `"}],"name":"` + name + `",` + rest
	}
	plain := `"offset":0,"offsetExpr":null,"smoothed":false,"startOrEnd":null,"timestamp":null,"type":"vectorSelector"}`
	fooBar := `{"status":"success","data":{"bool":false,"lhs":` + sel("foo", plain) +
		`,"matching":{"card":"one-to-one","fillValues":{"lhs":null,"rhs":null},"include":[],"labels":[],"on":false},"op":"/","rhs":` +
		sel("bar", plain) + `,"type":"binaryExpr"}}`
	for _, c := range []struct {
		method, query string
		code          int
		want          string
	}{
		{"GET", "foo/bar", 200, fooBar},
		{"POST", "foo/bar", 200, fooBar},
		{"GET", `histogram_quantile(0.95, sum by (key) (rate(latency_ms{key=~"t.*"}[5m] offset 1m)))`, 200,
			`{"status":"success","data":{"args":[{"type":"numberLiteral","val":"0.95"},{"expr":{"args":[{"anchored":false,"matchers":[{"name":"key","type":"=~","value":"t.*"},{"name":"__name__","type":"=","value":"latency_ms"}],"name":"latency_ms","offset":60000,"offsetExpr":null,"range":300000,"rangeExpr":null,"smoothed":false,"startOrEnd":null,"timestamp":null,"type":"matrixSelector"}],"func":{"argTypes":["matrix"],"name":"rate","returnType":"vector","variadic":0},"type":"call"},"grouping":["key"],"op":"sum","param":null,"type":"aggregation","without":false}],"func":{"argTypes":["scalar","vector"],"name":"histogram_quantile","returnType":"vector","variadic":0},"type":"call"}}`},
		{"GET", "x offset (10m/2)", 200, `{"status":"success","data":` + sel("x",
			`"offset":0,"offsetExpr":{"lhs":{"duration":true,"type":"numberLiteral","val":"600"},"op":"/","rhs":{"duration":false,"type":"numberLiteral","val":"2"},"type":"durationExpr","wrapped":true},"smoothed":false,"startOrEnd":null,"timestamp":null,"type":"vectorSelector"}}`)},
		{"GET", `-sum_over_time(max_over_time(x[5m+1m] @ start())[10m:1m] offset -30s) > bool on (a) group_left (b) (y @ 1700000000)`, 200,
			`{"status":"success","data":{"bool":true,"lhs":{"expr":{"args":[{"expr":{"args":[` + sel("x", `"offset":0,"offsetExpr":null,"range":0,"rangeExpr":{"lhs":{"duration":true,"type":"numberLiteral","val":"300"},"op":"+","rhs":{"duration":true,"type":"numberLiteral","val":"60"},"type":"durationExpr","wrapped":false},"smoothed":false,"startOrEnd":"start","timestamp":null,"type":"matrixSelector"}`) +
				`],"func":{"argTypes":["matrix"],"name":"max_over_time","returnType":"vector","variadic":0},"type":"call"},"offset":-30000,"offsetExpr":null,"range":600000,"rangeExpr":null,"startOrEnd":null,"step":60000,"stepExpr":null,"timestamp":null,"type":"subquery"}],"func":{"argTypes":["matrix"],"name":"sum_over_time","returnType":"vector","variadic":0},"type":"call"},"op":"-","type":"unaryExpr"},` +
				`"matching":{"card":"many-to-one","fillValues":{"lhs":null,"rhs":null},"include":["b"],"labels":["a"],"on":true},"op":"\u003e","rhs":{"expr":` +
				sel("y", `"offset":0,"offsetExpr":null,"smoothed":false,"startOrEnd":null,"timestamp":1700000000000,"type":"vectorSelector"}`) + `,"type":"parenExpr"},"type":"binaryExpr"}}`},
		{"GET", `label_replace(time(), "a", "$1", "b", "(.*)")`, 400, `{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:15: parse error: expected type instant vector in call to function \"label_replace\", got scalar"}`},
		{"GET", "sum(", 400, `{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:5: parse error: unclosed left parenthesis"}`},
		{"POST", "", 400, `{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": unknown position: parse error: no expression found in input"}`},
	} {
		form := url.Values{"query": {c.query}}.Encode()
		var res *http.Response
		var err error
		if c.method == "GET" {
			res, err = http.Get(srv.URL + "/api/v1/parse_query?" + form)
		} else {
			res, err = http.Post(srv.URL+"/api/v1/parse_query", "application/x-www-form-urlencoded", strings.NewReader(form))
		}
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, res); res.StatusCode != c.code || body != c.want {
			t.Errorf("%s %q: %d\n%s\nwant %d\n%s", c.method, c.query, res.StatusCode, body, c.code, c.want)
		}
	}

	// Every node of the tree is there, of its type: as many of each as the parser's walk
	// finds, for queries of every kind of node.
	for _, q := range []string{
		`time() - 5 * scalar(sum(rate(x[5m])))`, `topk by (a) (3, x) or on () vector(1)`,
		`count_values without (b) ("v", x)`, `quantile_over_time(0.9, x[1h:5m] offset 1d)`,
		`x @ end() unless ignoring (c) -(y)`, `{__name__=~"a.*", b!="c"}[step()]`, `"a string"`,
		`label_join(x, "d", ",", "a", "b")`, `x[max_of(step(), 5m+3m)]`,
	} {
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		want := map[string]int{}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			switch n.(type) {
			case *parser.AggregateExpr:
				want["aggregation"]++
			case *parser.BinaryExpr:
				want["binaryExpr"]++
			case *parser.Call:
				want["call"]++
			case *parser.MatrixSelector:
				want["matrixSelector"]++
			case *parser.SubqueryExpr:
				want["subquery"]++
			case *parser.VectorSelector:
				want["vectorSelector"]++
			case *parser.ParenExpr:
				want["parenExpr"]++
			case *parser.UnaryExpr:
				want["unaryExpr"]++
			case *parser.StringLiteral:
				want["stringLiteral"]++
			}
			return nil
		})
		res, err := http.Get(srv.URL + "/api/v1/parse_query?" + url.Values{"query": {q}}.Encode())
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Status string
			Data   any
		}
		if err := json.Unmarshal([]byte(readAll(t, res)), &body); err != nil || body.Status != "success" {
			t.Fatalf("%s: %v %+v", q, err, body)
		}
		got := map[string]int{}
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				if typ, ok := v["type"].(string); ok {
					got[typ]++
				}
				for _, x := range v {
					walk(x)
				}
			case []any:
				for _, x := range v {
					walk(x)
				}
			}
		}
		walk(body.Data)
		// A range selector's vector selector is the range selector's node, not one of its own.
		want["vectorSelector"] -= want["matrixSelector"]
		for typ, n := range want {
			if got[typ] != n {
				t.Errorf("%s: %d nodes of type %s, the parser has %d: %+v", q, got[typ], typ, n, body.Data)
			}
		}
	}
}
