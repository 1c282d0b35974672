// Package looktest holds the process tests of what users look at: a real Prometheus
// (Debian's prometheus package, native histograms on, a scrape every second) scraping a
// real `slide serve` and answering histogram_quantile and histogram_count, promtool check
// metrics over /metrics with every export on, and the dashboard in headless Chromium
// (Debian's chromium package): with data, narrowed by a key glob, a key's page, and while
// windows are being restored; and the alert rules of deploy/prometheus under promtool test
// rules, their metrics and docs/operating.md's against a scrape of slide serve --demo, and
// the Grafana dashboards of deploy/grafana against its PromQL API, variables resolved as Grafana does.
// `make deps` installs both; a test without them fails and says what to install. The package has no code of its own besides this comment.
package looktest
