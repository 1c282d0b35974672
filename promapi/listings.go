package promapi

// The listings (/api/v1/labels, /api/v1/label/NAME/values, /api/v1/series): their match[]
// sets, their bounds (limit=, a query's timeout, an evaluation slot) and their answers.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/slide-metrics/slide/readgate"
)

// errEmptyMatchSet is Prometheus' refusal of a match[] set that every series satisfies.
var errEmptyMatchSet = errors.New("match[] must contain at least one non-empty matcher")

// matchers reads match[] (none: every series). A set whose every matcher matches "" ({code=""},
// {route=~".*"}) would list the whole store; Prometheus refuses it, and so does this, with its
// words (ParseMetricSelectors does not check it, the query parser does).
func (a *API) matchers(r *http.Request) ([][]*labels.Matcher, error) {
	ms := r.Form["match[]"]
	if len(ms) == 0 {
		return [][]*labels.Matcher{nil}, nil
	}
	sets, err := a.parser.ParseMetricSelectors(ms)
	if err != nil {
		return nil, err
	}
	for _, set := range sets {
		if !slices.ContainsFunc(set, func(m *labels.Matcher) bool { return !m.Matches("") }) {
			return nil, errEmptyMatchSet
		}
	}
	return sets, nil
}

// limit is the listing cap: limit= when smaller than Config.MaxLabelValues.
func (a *API) limit(r *http.Request) (int, *apiError) {
	n := a.cfg.MaxLabelValues
	if v := r.Form.Get("limit"); v != "" {
		l, err := strconv.Atoi(v)
		if err != nil || l < 0 {
			return 0, badParam("limit", errors.New("limit must be a non-negative number"))
		}
		if l > 0 && l < n {
			n = l
		}
	}
	return n, nil
}

// bounds reads a listing's limit= and takes its context, bounded by a query's timeout (each
// match[] set scans the store, and without a bound a few hundred of them ran past the
// server's write deadline), and an evaluation slot; done gives both back.
func (a *API) bounds(r *http.Request) (limit int, ctx context.Context, done func(), aerr *apiError) {
	if limit, aerr = a.limit(r); aerr != nil {
		return 0, nil, nil, aerr
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.Timeout)
	release, aerr := a.slot(ctx)
	if aerr != nil {
		cancel()
		return 0, nil, nil, aerr
	}
	return limit, ctx, func() { release(); cancel() }, nil
}

// slot waits for one of the gate's slots (Config.Gate, MaxConcurrent), at most a query's
// timeout, and returns what gives it back. A wait that reaches the timeout is errorType
// "timeout" (with Retry-After: writeError), as Prometheus answers it.
func (a *API) slot(ctx context.Context) (func(), *apiError) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	done, err := a.gate.Start(ctx)
	switch {
	case errors.Is(err, readgate.ErrBusy):
		return nil, &apiError{errTimeout, fmt.Errorf("query timed out waiting for a slot: %w", err)}
	case err != nil:
		return nil, execError(err)
	}
	return done, nil
}

// listed is the querier of a listing: of the series with samples in [start, end] (ms; the
// whole store without them), as Prometheus lists.
func (a *API) listed(r *http.Request) (*querier, *apiError) {
	mint, maxt := int64(math.MinInt64), int64(math.MaxInt64)
	for _, p := range []struct {
		name string
		ms   *int64
	}{{"start", &mint}, {"end", &maxt}} {
		if r.Form.Get(p.name) == "" {
			continue
		}
		t, aerr := a.timeParam(r, p.name, time.Time{})
		if aerr != nil {
			return nil, aerr
		}
		*p.ms = t.UnixMilli()
	}
	q, _ := a.q.Querier(mint, maxt)
	return q.(*querier), nil
}

// listing answers a sorted, bounded list of strings gathered over each match[] set.
func (a *API) listing(r *http.Request, list func(ctx context.Context, q storage.Querier, ms []*labels.Matcher) ([]string, annotations.Annotations, error)) ([]byte, notes, *apiError) {
	q, aerr := a.listed(r)
	if aerr != nil {
		return nil, notes{}, aerr
	}
	sets, err := a.matchers(r)
	if err != nil {
		return nil, notes{}, &apiError{errBadData, err}
	}
	limit, ctx, done, aerr := a.bounds(r)
	if aerr != nil {
		return nil, notes{}, aerr
	}
	defer done()
	first := firstN[string]{n: limit, cmp: strings.Compare}
	for _, ms := range sets {
		vs, _, err := list(ctx, q, ms)
		if err != nil {
			return nil, notes{}, execError(err)
		}
		for _, v := range vs {
			first.add(v)
		}
	}
	all, warn := first.result()
	return appendStrings(nil, all), notes{warn: warn}, nil
}

func (a *API) labelNames(r *http.Request) ([]byte, notes, *apiError) {
	return a.listing(r, func(ctx context.Context, q storage.Querier, ms []*labels.Matcher) ([]string, annotations.Annotations, error) {
		return q.LabelNames(ctx, nil, ms...)
	})
}

func (a *API) labelValues(r *http.Request) ([]byte, notes, *apiError) {
	name := r.PathValue("name")
	if strings.HasPrefix(name, "U__") {
		name = model.UnescapeName(name, model.ValueEncodingEscaping)
	}
	if !model.UTF8Validation.IsValidLabelName(name) {
		return nil, notes{}, &apiError{errBadData, fmt.Errorf("invalid label name: %q", clip(name))}
	}
	return a.listing(r, func(ctx context.Context, q storage.Querier, ms []*labels.Matcher) ([]string, annotations.Annotations, error) {
		return q.LabelValues(ctx, name, nil, ms...)
	})
}

func (a *API) series(r *http.Request) ([]byte, notes, *apiError) {
	if len(r.Form["match[]"]) == 0 {
		return nil, notes{}, &apiError{errBadData, errors.New("no match[] parameter provided")}
	}
	qr, aerr := a.listed(r)
	if aerr != nil {
		return nil, notes{}, aerr
	}
	// Prometheus names the parameter here, not in the listings.
	sets, err := a.matchers(r)
	if err != nil {
		return nil, notes{}, badParam("match[]", err)
	}
	limit, ctx, done, aerr := a.bounds(r)
	if aerr != nil {
		return nil, notes{}, aerr
	}
	defer done()
	first := firstN[labels.Labels]{n: limit, cmp: labels.Compare}
	lb := labels.NewScratchBuilder(8)
	for _, ms := range sets {
		err := qr.eachLabelled(ctx, ms, func(name, series string) {
			first.add(labelsOf(&lb, name, series))
		})
		if err != nil {
			return nil, notes{}, execError(err)
		}
	}
	all, warn := first.result()
	b := []byte{'['}
	for i, ls := range all {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendLabels(b, ls)
	}
	return append(b, ']'), notes{warn: warn}, nil
}
