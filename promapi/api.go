package promapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/slide-metrics/slide/jsonenc"
	"github.com/slide-metrics/slide/readgate"
)

// Error types of the Prometheus HTTP API, and the status each answers with.
const (
	errBadData     = "bad_data"    // 400
	errExec        = "execution"   // 422
	errCostLimit   = "cost_limit"  // 422
	errCanceled    = "canceled"    // 499
	errTimeout     = "timeout"     // 503
	errUnavailable = "unavailable" // 503
	errInternal    = "internal"    // 500
	errNotFound    = "not_found"   // 404
)

var errStatus = map[string]int{
	errBadData: http.StatusBadRequest, errExec: http.StatusUnprocessableEntity,
	errCostLimit: http.StatusUnprocessableEntity, errCanceled: 499,
	errTimeout: http.StatusServiceUnavailable, errUnavailable: http.StatusServiceUnavailable,
	errInternal: http.StatusInternalServerError, errNotFound: http.StatusNotFound,
}

// apiError is an answer's error: its Prometheus type and message.
type apiError struct {
	typ string
	err error
}

func badParam(name string, err error) *apiError {
	return &apiError{errBadData, fmt.Errorf("invalid parameter %q: %w", name, err)}
}

// maxBodyBytes caps a POST form: queries and match[] lists, not data.
const maxBodyBytes = 1 << 20

// maxPoints is Prometheus' cap on a range query's points per series.
const maxPoints = 11_000

// API serves the Prometheus HTTP API (see the package doc) over a store. It is safe for
// concurrent use; build it once with New and mount Handler under /api/v1/.
type API struct {
	cfg    Config
	gate   *readgate.Gate // the queries and listings evaluated at once (Config.Gate, MaxConcurrent)
	q      *Queryable
	engine *promql.Engine
	parser parser.Parser
	mux    *http.ServeMux
	pushed atomic.Int64 // queries the pushdown answered (for tests)
}

// New builds the API and its engine. It returns Validate's error.
func New(cfg Config) (*API, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	a := &API{cfg: cfg, q: NewQueryable(cfg.Store, cfg.Now, cfg.MaxSeries), parser: parser.NewParser(parser.Options{}), gate: cfg.Gate}
	if a.gate == nil {
		var err error
		if a.gate, err = readgate.New(readgate.Config{Max: cfg.MaxConcurrent, Setting: "promapi.Config.MaxConcurrent"}); err != nil {
			return nil, err
		}
	}
	a.q.cluster = cfg.Cluster
	a.engine = promql.NewEngine(promql.EngineOpts{
		Logger: cfg.Logger, Reg: cfg.Registerer, MaxSamples: cfg.MaxSamples, Timeout: cfg.Timeout,
		LookbackDelta: cfg.LookbackDelta, EnableAtModifier: true, EnableNegativeOffset: true,
		NoStepSubqueryIntervalFn: func(int64) int64 { return time.Minute.Milliseconds() },
	})
	m := http.NewServeMux()
	m.HandleFunc("/api/v1/query", a.serve(a.query))
	m.HandleFunc("/api/v1/query_range", a.serve(a.queryRange))
	m.HandleFunc("/api/v1/labels", a.serve(a.labelNames))
	m.HandleFunc("/api/v1/label/{name}/values", a.serve(a.labelValues))
	m.HandleFunc("/api/v1/series", a.serve(a.series))
	m.HandleFunc("/api/v1/metadata", a.serve(a.metadata))
	m.HandleFunc("/api/v1/query_exemplars", a.serve(a.queryExemplars))
	m.HandleFunc("/api/v1/format_query", a.serve(a.formatQuery))
	m.HandleFunc("/api/v1/parse_query", a.serve(a.parseQuery))
	m.HandleFunc("/api/v1/rules", a.serve(a.rules))
	m.HandleFunc("/api/v1/alerts", a.serve(a.alerts))
	m.HandleFunc("/api/v1/status/buildinfo", a.serve(func(*http.Request) ([]byte, notes, *apiError) {
		return buildInfo, notes{}, nil
	}))
	m.HandleFunc("/", a.serve(func(r *http.Request) ([]byte, notes, *apiError) {
		return nil, notes{}, &apiError{errNotFound, fmt.Errorf("no route %s in slide's Prometheus API", clip(r.URL.Path))}
	}))
	a.mux = m
	return a, nil
}

// Handler serves /api/v1/…; methods, authentication and readiness are the mounting
// server's (query mounts it beside its read routes).
func (a *API) Handler() http.Handler { return a.mux }

// Queryable is the API's storage.Queryable, for callers that run the engine themselves.
func (a *API) Queryable() *Queryable { return a.q }

// serve wraps an endpoint: form parsing, the partition check, the envelope. fn returns the
// JSON of data, the warnings, or an error.
func (a *API) serve(fn func(r *http.Request) ([]byte, notes, *apiError)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		if err := r.ParseForm(); err != nil {
			// The form's bound is this server's, not Prometheus': say it, and how to keep within it.
			if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
				err = errors.New("the request body is over 1 MiB, the bound of a form: ask with fewer or shorter parameters (several requests of fewer match[] sets)")
			} else {
				err = fmt.Errorf("error parsing form values: %w", err)
			}
			writeError(w, &apiError{errBadData, err})
			return
		}
		if a.cfg.Ready != nil {
			if err := a.cfg.Ready(); err != nil {
				writeError(w, &apiError{errUnavailable, fmt.Errorf("not ready: %w", err)})
				return
			}
		}
		var warn []string
		note := &readNote{allow: r.Form.Get("partial") == "allow"}
		if a.cfg.Cluster != nil {
			r = r.WithContext(withNote(r.Context(), note))
		} else if a.cfg.Remote != nil {
			if missing := a.cfg.Remote(); len(missing) > 0 {
				if r.Form.Get("partial") != "allow" {
					writeError(w, &apiError{errUnavailable, fmt.Errorf("this instance holds part of the partitions: %d (%s) are other instances' and a PromQL query reads this instance's rings only; pass partial=allow for an answer over its own, with a warning naming the missing partitions", len(missing), partitions(missing))})
					return
				}
				warn = append(warn, "partial answer: partitions "+partitions(missing)+" are held by other instances and were not read (partial=allow)")
			}
		}
		data, n, aerr := fn(r)
		if missing := note.partitions(); len(missing) > 0 {
			if !note.allow {
				writeError(w, &apiError{errUnavailable, &MissingError{Partitions: missing}})
				return
			}
			warn = append(warn, "partial answer: partitions "+partitions(missing)+" were not read: their owners did not answer (partial=allow)")
		}
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		// Head, data and tail are written apart: data is most of a large answer (a query's
		// result), and one buffer around it was a copy and an allocation as large.
		_, _ = io.WriteString(w, envelopeHead)
		_, _ = w.Write(data)
		_, _ = w.Write(appendEnvelopeTail(nil, append(warn, n.warn...), n.info))
	}
}

func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	if errors.Is(e.err, readgate.ErrBusy) {
		// Unlike a query that ran out of time, a query that found no slot may well find
		// one in a moment.
		w.Header().Set("Retry-After", "1")
	}
	code, ok := errStatus[e.typ]
	if !ok {
		code = http.StatusInternalServerError
	}
	w.WriteHeader(code)
	_, _ = w.Write(appendError(nil, e.typ, e.err.Error()))
}

func partitions(ps []int32) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		if i == 20 {
			fmt.Fprintf(&b, "… %d more", len(ps)-i)
			break
		}
		b.WriteString(strconv.Itoa(int(p)))
	}
	return b.String()
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// parseTime reads a time as Prometheus does: unix seconds (with a fraction) or RFC 3339.
func parseTime(s string) (time.Time, error) {
	if t, err := strconv.ParseFloat(s, 64); err == nil {
		sec, frac := math.Modf(t)
		frac = math.Round(frac*1000) / 1000
		if math.IsNaN(t) || math.IsInf(t, 0) || math.Abs(sec) > 1<<53 {
			return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp", clip(s))
		}
		return time.Unix(int64(sec), int64(frac*float64(time.Second))).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp", clip(s))
}

// parseDuration reads a duration as Prometheus does: seconds (with a fraction) or 5m, 1h30m.
func parseDuration(s string) (time.Duration, error) {
	if d, err := strconv.ParseFloat(s, 64); err == nil {
		ts := d * float64(time.Second)
		if math.IsNaN(ts) || ts >= float64(math.MaxInt64) || ts < float64(math.MinInt64) {
			return 0, fmt.Errorf("cannot parse %q to a valid duration. It overflows int64", clip(s))
		}
		return time.Duration(ts), nil
	}
	if d, err := model.ParseDuration(s); err == nil {
		return time.Duration(d), nil
	}
	return 0, fmt.Errorf("cannot parse %q to a valid duration", clip(s))
}

func (a *API) timeParam(r *http.Request, name string, def time.Time) (time.Time, *apiError) {
	v := r.Form.Get(name)
	if v == "" {
		return def, nil
	}
	t, err := parseTime(v)
	if err != nil {
		return t, badParam(name, err)
	}
	return t, nil
}

// queryContext is the request's context (a client that leaves cancels the query) with the
// request's timeout= when it is shorter than the engine's.
func (a *API) queryContext(r *http.Request) (context.Context, context.CancelFunc, *apiError) {
	ctx := r.Context()
	if v := r.Form.Get("timeout"); v != "" {
		d, err := parseDuration(v)
		if err != nil {
			return nil, nil, badParam("timeout", err)
		}
		if d <= 0 {
			return nil, nil, badParam("timeout", fmt.Errorf("timeout must be positive, got %s", d))
		}
		c, cancel := context.WithTimeout(ctx, d)
		return c, cancel, nil
	}
	return ctx, func() {}, nil
}

func (a *API) queryOpts(r *http.Request) (promql.QueryOpts, *apiError) {
	var lookback time.Duration
	if v := r.Form.Get("lookback_delta"); v != "" {
		d, err := parseDuration(v)
		if err != nil {
			return nil, &apiError{errBadData, fmt.Errorf("error parsing lookback delta duration: %w", err)}
		}
		lookback = d
	}
	return promql.NewPrometheusQueryOptsWithLimits(false, lookback, uint64(a.cfg.MaxSeries), 0, 0, nil), nil
}

func (a *API) query(r *http.Request) ([]byte, notes, *apiError) {
	ts, aerr := a.timeParam(r, "time", a.cfg.Now())
	if aerr != nil {
		return nil, notes{}, aerr
	}
	at := engineMillis(ts)
	return a.run(r, evalSpan{start: at, end: at}, func(ctx context.Context, opts promql.QueryOpts, text string) (promql.Query, error) {
		return a.engine.NewInstantQuery(ctx, a.q, opts, text, ts)
	})
}

func (a *API) queryRange(r *http.Request) ([]byte, notes, *apiError) {
	start, err := parseTime(r.Form.Get("start"))
	if err != nil {
		return nil, notes{}, badParam("start", err)
	}
	end, err := parseTime(r.Form.Get("end"))
	if err != nil {
		return nil, notes{}, badParam("end", err)
	}
	if end.Before(start) {
		return nil, notes{}, badParam("end", errors.New("end timestamp must not be before start time"))
	}
	step, err := parseDuration(r.Form.Get("step"))
	if err != nil {
		return nil, notes{}, badParam("step", err)
	}
	if step <= 0 {
		return nil, notes{}, badParam("step", errors.New("zero or negative query resolution step widths are not accepted. Try a positive integer"))
	}
	if end.Sub(start)/step > maxPoints {
		return nil, notes{}, &apiError{errBadData, errors.New("exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)")}
	}
	span := evalSpan{start: engineMillis(start), end: engineMillis(end), step: step.Milliseconds()}
	if span.step == 0 {
		span.step = -1 // under a millisecond: the engine's
	}
	return a.run(r, span, func(ctx context.Context, opts promql.QueryOpts, text string) (promql.Query, error) {
		return a.engine.NewRangeQuery(ctx, a.q, opts, text, start, end, step)
	})
}

// formatQuery is /api/v1/format_query: the expression as Prometheus' parser prints it
// pretty (Grafana's query editor asks to format a query), or the parse error.
func (a *API) formatQuery(r *http.Request) ([]byte, notes, *apiError) {
	expr, aerr := a.parseExpr(r.Form.Get("query"))
	if aerr == nil {
		aerr = checkFormatDepth(expr)
	}
	if aerr != nil {
		return nil, notes{}, aerr
	}
	return jsonenc.AppendString(nil, expr.Pretty(0)), notes{}, nil
}

// run is what an instant and a range query share once their times are read: the request's
// context and timeout, the engine's options, the subquery cap, the pushdown (when the query
// has its shape), else the query newQuery makes of the text, executed.
func (a *API) run(r *http.Request, span evalSpan, newQuery func(context.Context, promql.QueryOpts, string) (promql.Query, error)) ([]byte, notes, *apiError) {
	text := r.Form.Get("query")
	if aerr := checkQueryText(text); aerr != nil {
		return nil, notes{}, aerr
	}
	ctx, cancel, aerr := a.queryContext(r)
	if aerr != nil {
		return nil, notes{}, aerr
	}
	defer cancel()
	opts, aerr := a.queryOpts(r)
	if aerr != nil {
		return nil, notes{}, aerr
	}
	expr, perr := a.parser.ParseExpr(text)
	if aerr := checkSubqueries(expr, perr); aerr != nil {
		return nil, notes{}, aerr
	}
	// A slot once the query is known to be one to run: a refused subquery never waits.
	release, aerr := a.slot(ctx)
	if aerr != nil {
		return nil, notes{}, aerr
	}
	defer release()
	if perr == nil && !a.cfg.DisablePushdown && span.step >= 0 {
		data, n, err := a.pushdown(ctx, expr, text, span)
		if !errors.Is(err, errNotPushed) {
			if err != nil {
				return nil, notes{}, execError(err)
			}
			a.pushed.Add(1)
			return data, n, nil
		}
	}
	qry, err := newQuery(ctx, opts, text)
	if err != nil {
		if name := quotedName(a.knownMetrics(ctx), text); name != "" {
			err = fmt.Errorf("%w (%s)", err, quoteHint(name))
		}
		return nil, notes{}, badParam("query", err)
	}
	return a.exec(ctx, qry, text)
}

// checkSubqueries refuses a subquery of more than maxPoints steps: the engine steps through
// a subquery without asking the context (count_over_time(x[5y:1s]) is 158M steps, minutes
// of CPU that the timeout does not stop), so its steps get Prometheus' own cap on a range
// query's points. A subquery inside others is a range query over their ranges and its own
// (each step of the outer one reads the inner's window), so those ranges count too: twenty
// max_over_time((…)[3h:1s]) nested, each 10,800 steps alone, held 3 GB and a core past the
// timeout and the write deadline. A query that does not parse is left to the engine's error.
func checkSubqueries(expr parser.Expr, err error) *apiError {
	if err != nil {
		return nil
	}
	var bad *apiError
	parser.Inspect(expr, func(n parser.Node, path []parser.Node) error {
		sq, ok := n.(*parser.SubqueryExpr)
		if !ok || bad != nil {
			return nil
		}
		step := sq.Step
		if step <= 0 {
			step = time.Minute // the engine's default subquery step (NoStepSubqueryIntervalFn)
		}
		span, around := sq.Range, 0
		for _, p := range path {
			if outer, ok := p.(*parser.SubqueryExpr); ok && outer != sq {
				span += outer.Range
				around++
			}
		}
		if span/step <= maxPoints {
			return nil
		}
		if around == 0 {
			bad = &apiError{errBadData, fmt.Errorf("subquery %s evaluates %d steps, more than %d: widen its step", clip(sq.String()), span/step, maxPoints)}
		} else {
			bad = &apiError{errBadData, fmt.Errorf("subquery %s evaluates %d steps over its range and those of the %d subqueries around it, more than %d: widen its step or nest fewer", clip(sq.String()), span/step, around, maxPoints)}
		}
		return nil
	})
	return bad
}

func (a *API) exec(ctx context.Context, qry promql.Query, text string) ([]byte, notes, *apiError) {
	defer qry.Close()
	res := qry.Exec(ctx)
	n := notesOf(res.Warnings, text)
	if res.Err != nil {
		a.cfg.Logger.Debug("query failed", "query", clip(text), "err", res.Err)
		return nil, notes{}, execError(res.Err)
	}
	return appendQueryData(nil, res.Value), n, nil
}

// notes are an answer's "warnings" and "infos", as Prometheus 3 answers them (Grafana shows
// both).
type notes struct{ warn, info []string }

// maxNotes is how many warnings, and how many infos, an answer carries, as Prometheus' API.
const maxNotes = 10

// notesOf are a query's annotations as text, each kind sorted: the annotations are a map,
// and an answer with two warnings (a retention's and an invalid quantile's) came in either
// order.
func notesOf(annos annotations.Annotations, text string) notes {
	warn, info := annos.AsStrings(text, 0, 0)
	return notes{warn: firstNotes(warn, "warning"), info: firstNotes(info, "info")}
}

func firstNotes(s []string, kind string) []string {
	slices.Sort(s)
	if n := len(s) - maxNotes; n > 0 {
		s = append(s[:maxNotes], fmt.Sprintf("%d more %s annotations omitted", n, kind))
	}
	return s
}

// execError maps the engine's errors onto the API's types, as Prometheus does.
func execError(err error) *apiError {
	var (
		canceled promql.ErrQueryCanceled
		timeout  promql.ErrQueryTimeout
		series   promql.ErrTooManySeries
		read     promql.ErrTooManySamplesRead
		st       promql.ErrStorage
	)
	var missing *MissingError
	switch {
	case errors.As(err, &missing):
		return &apiError{errUnavailable, missing}
	case errors.As(err, &canceled), errors.Is(err, context.Canceled):
		return &apiError{errCanceled, err}
	case errors.As(err, &timeout), errors.Is(err, context.DeadlineExceeded):
		return &apiError{errTimeout, err}
	case errors.As(err, &series), errors.As(err, &read):
		return &apiError{errCostLimit, err}
	case errors.As(err, &st):
		return &apiError{errInternal, err}
	}
	return &apiError{errExec, err}
}

// knownMetrics lists the metrics of every instance, nil when they cannot be listed (for a
// hint, which does without).
func (a *API) knownMetrics(ctx context.Context) []string {
	if a.cfg.Cluster == nil {
		return a.cfg.Store.Metrics()
	}
	all, missing := a.cfg.Cluster.Metrics(ctx)
	if noteMissing(ctx, missing) != nil {
		return nil
	}
	return all
}

// metadata answers type, help and unit of every exposed name (metric= one of them),
// sorted by name as Prometheus' map encodes.
func (a *API) metadata(r *http.Request) ([]byte, notes, *apiError) {
	limit := -1
	if v := r.Form.Get("limit"); v != "" {
		l, err := strconv.Atoi(v)
		if err != nil {
			return nil, notes{}, &apiError{errBadData, errors.New("limit must be a number")}
		}
		limit = l
	}
	want := r.Form.Get("metric")
	all := a.cfg.Store.Metrics()
	if a.cfg.Cluster != nil {
		var missing []int32
		all, missing = a.cfg.Cluster.Metrics(r.Context())
		if err := noteMissing(r.Context(), missing); err != nil {
			return nil, notes{}, execError(err)
		}
	}
	type entry struct {
		name string
		k    kind
		m    string
	}
	var es []entry
	for _, m := range all {
		for k := range kindEnd {
			name := m + kindSuffix[k]
			if k != kindHistogram {
				if _, real := slices.BinarySearch(all, name); real {
					continue
				}
			}
			if want == "" || want == name {
				es = append(es, entry{name, k, m})
			}
		}
	}
	slices.SortFunc(es, func(x, y entry) int { return strings.Compare(x.name, y.name) })
	if limit >= 0 && len(es) > limit {
		es = es[:limit]
	}
	b := []byte{'{'}
	for i, e := range es {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, e.name)
		b = append(b, `:[{"type":`...)
		b = jsonenc.AppendString(b, kindType[e.k])
		b = append(b, `,"help":`...)
		b = jsonenc.AppendString(b, fmt.Sprintf(kindHelp[e.k], e.m))
		b = append(b, `,"unit":""}]`...)
	}
	return append(b, '}'), notes{}, nil
}
