package query

import (
	_ "embed"
	"net/http"
)

// dashboardHTML is the whole dashboard: one page, inline CSS and script, no external
// assets, reading /v1/metrics and /v1/top every few seconds.
//
//go:embed dashboard.html
var dashboardHTML []byte

// dashboardCSP allows the page's own inline script and style and requests to this server
// only: nothing is loaded from elsewhere.
const dashboardCSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func handleDashboard(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	_, _ = w.Write(dashboardHTML)
}
