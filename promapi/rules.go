package promapi

import (
	"fmt"
	"net/http"
	"strings"
)

// rules is /api/v1/rules: slide evaluates no recording or alerting rules, so it answers
// as a Prometheus without rule files does, an empty list of groups, once the request is
// one Prometheus answers (a known type=, match[] that parse). Grafana asks every
// Prometheus data source for its rules (the alerting page, whose 404 was an error there,
// and the query editor's recording rules).
func (a *API) rules(r *http.Request) ([]byte, notes, *apiError) {
	if typ := strings.ToLower(r.Form.Get("type")); typ != "" && typ != "alert" && typ != "record" {
		return nil, notes{}, badParam("type", fmt.Errorf("not supported value %q", typ))
	}
	if _, err := a.matchers(r); err != nil {
		return nil, notes{}, &apiError{errBadData, err}
	}
	return []byte(`{"groups":[]}`), notes{}, nil
}

// alerts is /api/v1/alerts: no rules, so no alerts firing or pending.
func (a *API) alerts(*http.Request) ([]byte, notes, *apiError) {
	return []byte(`{"alerts":[]}`), notes{}, nil
}
