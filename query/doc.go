// Package query is slide's HTTP API: window reads, top lists and series listing over a
// window.Store, event intake for users without Kafka, the limiter's allow route, health,
// Prometheus exposition and a one-page dashboard. Build a Server with New(Config) and serve
// its Handler.
//
// # Routes
//
//	GET  /v1/window?metric=latency_ms&key=tenant-42&window=5m&q=0.5,0.95,0.99[&match=..][&by=code]
//	GET  /v1/range?metric=latency_ms&key=tenant-42&window=1m&step=10s[&q=0.5,0.95][&match=..][&by=code]
//	GET  /v1/top?metric=latency_ms&by=p95&window=5m&k=10[&q=0.5,0.99][&key=tenant-*][&match=..]
//	GET  /v1/series?[metric=latency_ms][&prefix=tenant-][&match=..][&limit=100][&cursor=...]
//	GET  /v1/metrics
//	GET  /v1/status      readiness, restore progress, ingest lag, limiter decisions (answers while restoring)
//	POST /v1/events      NDJSON body, one event a line          (bearer token when configured)
//	POST /v1/traces      OTLP/HTTP traces (Config.Traces)         (bearer token when configured)
//	POST /v1/logs        OTLP/HTTP logs (Config.Logs)             (bearer token when configured)
//	POST /api/v2/spans   Zipkin's span API (Config.Zipkin)        (bearer token when configured)
//	POST /v1/allow       the limiter's handler (Config.Allow)     (bearer token when configured)
//	GET  /v1/quota       a key's quota left (Config.Quota)        (bearer token with AuthReads, as the other reads)
//	GET  /healthz        liveness: 200 while the process serves
//	GET  /readyz         readiness: 503 while Config.Ready fails (windows being restored at
//	                     the start, Kafka unreachable); with Config.Backends, each backend's
//	                     state too; a 200 names Config.Restoring's partitions and
//	                     Config.RestoringLimits'
//	GET  /metrics        Prometheus exposition of Config.Gatherer
//	GET  /               the dashboard (below)
//
// A new route is a file of its own (read.go, range.go, top.go are the pattern): its handler
// reads its parameters through parseParams and the shared parsers (params.go: parseWindow
// reads lengths with window.ParseWindow, keys and patterns go to window.Store.ReadKey),
// writes its answer with jsonenc into a pooled buffer, and refuses through the one error
// writer; it is added to Server.routes (server.go), which gives it authentication, limits
// and metrics, and to the list above and the README's API section.
//
// # Authentication
//
// With Config.AuthToken set, the write routes (POST /v1/events, /v1/allow) require
// "Authorization: Bearer TOKEN"; with Config.AuthReads as well, so do the data reads
// (/v1/window, /v1/range, /v1/top, /v1/series, /v1/metrics, /v1/status) and /metrics (a Prometheus scrape config
// then needs authorization: {credentials_file: ...}). A missing header or another scheme
// is 401 with WWW-Authenticate: Bearer realm="slide"; a wrong token is 401 with
// error="invalid_token". The probes never need a token. The dashboard page is public,
// static HTML; under AuthReads its data calls get 401 and it shows that error, since a
// browser page cannot attach the token: put an authenticating proxy in front to use it.
//
// # Parameters
//
// Every read route refuses what it does not understand rather than guess: an unknown
// parameter ("windw=5m") is 400 naming it, a single-valued parameter given twice is 400,
// q may be repeated (its lists are joined), a malformed query string or a parameter with
// an empty name ("=5") is 400 with param "query"; empty pairs ("&&") are nothing. Empty values count as absent except q, where
// an empty item is a bad quantile. Keys and metric names are opaque bytes: a key that no
// series has (whatever its length) is 404, never a 400, since the event decoder
// decides which keys exist (at most 256 bytes by default). But they are UTF-8: a value that
// is not ("key=t%FF") is 400 naming its parameter, since the decoder refuses such keys
// rather than rewrite them to U+FFFD, so it can name no series; likewise a key, metric or
// prefix failing window.ValidName (a C0 or C1 control, DEL, a bidi override: the key rule
// of every door). /v1/metrics costs one pass
// over the series (window.Store.MetricSeries) and stops when the request's context ends;
// so do glob /v1/window and /v1/range, /v1/top and /v1/series, which look at the context
// every 256 series they visit and then answer nothing (the store's scans take no context:
// their key filter matches nothing from then on). /v1/series without metric is one pass
// and a sort, not a pass per metric. A request line or header block
// over the http.Server's MaxHeaderBytes (1 MiB by default) is refused by net/http itself
// with 431 before it reaches the API.
//
// # Window answers
//
// /v1/window answers
//
//	{"metric":"latency_ms","key":"tenant-42","window":"5m","from":1764489300000,"to":1764489610000,
//	 "series":1,"count":1200,"sum":104400,"avg":87,"min":3,"max":912,"rate_per_s":4.1,
//	 "elapsed_s":292.7,"quantiles":{"0.5":71.2,"0.95":402.7,"0.99":811.3}}
//
// from and to (unix ms) are the span [from, to) the window covered: the current slot and
// the window/slot − 1 slots before it (see package window), so an exact oracle over the
// same events gives the same count and sum. count, sum, min and max are exact; quantiles
// are within the sketch's relative accuracy (1% with the default DDSketch), except q=0 and
// q=1, which answer the exact min and max. rate_per_s is count / elapsed_s, and elapsed_s
// the seconds of the span already elapsed (the current slot is still running). The span
// starts where the window says even when this process started later (or its log begins
// later): a fresh instance without history divides a 5m window's few seconds of events by
// up to 300 s, and elapsed_s shows it. /v1/top entries carry both as well. An empty window
// has count 0, sum 0, rate 0 and null avg, min, max and quantiles (JSON has no NaN).
//
// window defaults to the metric's retention and must be a multiple of its slot width; q
// takes fractions (0.95) or percentiles (p95, p999 = 0.999) and defaults to
// Config.Quantiles. A key holding '*' is a glob ('*' matches any run of characters,
// including '/'): the answer merges every matching series, exactly for count, sum, min and
// max and by merging sketches for quantiles, and "series" says how many matched. An unknown
// series (or a glob matching none) is 404.
//
// /v1/range is a series' history from its rings alone: the window ending at the current
// slot and at every step before it, oldest first, as far back as a whole window fits in the
// retention ((retention − window) / step + 1 points), each point the /v1/window answer of
// that slot with its own from and to. window and step default to the slot width, so a bare
// /v1/range?metric=&key= gives every slot of the retention. A glob key merges slot by slot.
// span= (default the retention, or the window when longer) reaches further back into a
// tiered ring's tiers (--rings cost=1m:60+1h:48+1d:36), up to its reach: span=7d&window=1h&step=1h
// gives the hours of the last week. The points for a step come from the finest tier that
// covers them: the ring's own slots within the retention, then the hour tier, then the day
// tier, and a point older than the retention covers whole slots of its tier (its from
// rounds down and its to down to a tier slot boundary; a tier's newest slot ends where the
// finer slots begin), so its count, sum, min and max are exact over its [from, to) and
// points there are a tier slot apart at least (window's range_tiers.go states the rule).
// A point is kept when its window, ending where it ends, lies within span. An instance
// holding only some partitions composes the same points from every owner's slots of the
// selected series (Cluster.VisitSlotsKey, window.RangeSlots); tiers do not travel, so there
// a span past the retention answers the retention with a "warnings" entry, and a window past
// it is refused.
//
//	{"metric":"latency_ms","key":"tenant-42","window":"1m","step":"10s","from":..,"to":..,
//	 "series":1,"points":[{"from":..,"to":..,"count":..,"sum":..,"avg":..,"min":..,"max":..,
//	 "rate_per_s":..,"quantiles":{"0.5":..}},...]}
//
// # Labels: match= and by=
//
// A series is a metric and labels, key the default one (issue #27; see window's "Labels").
// /v1/window, /v1/range, /v1/top and /v1/series take match=: PromQL label matchers as
// written inside a selector's braces, route="/pay",code=~"5..",span_kind!="CLIENT" (=, !=,
// =~, !~; regexps fully anchored; a label a series lacks reads as "", so code="" selects
// the series without code). Prometheus' own parser reads them (promql/parser, the
// selector "{"+match+"}", so its error positions count that brace) and window.CompileSelector
// compiles them; a matcher that does not parse or compile, or one of __name__ (the metric
// is metric=), is 400 naming match. match= is at most MaxMatchBytes. key= is one more
// constraint on the key label: exact selects every series of that key, labelled or not; a
// glob matches keys, never the labels after them. With match= or by=, key= may be left out
// (any key). The reads go through window.Store.ReadSelected and ReadRangeSelected always,
// which keep the one lookup of an exact key while the metric has no labelled series, so an
// unlabelled answer is byte for byte what it was. "match" is echoed after "window" (after
// "step" on /v1/range) when given.
//
// /v1/window and /v1/range take by=label,label (window.CheckBy: label names or key, none
// twice, at most 16): one answer per group of the selected series, each merged exactly as a
// glob is (window.Store.ReadGroups, ReadRangeGroups), sorted by their labels:
//
//	{"metric":"latency_ms","key":"","window":"5m","match":"route=\"/pay\"","by":["code"],
//	 "groups":[{"labels":{},"from":..,"to":..,"series":1,"count":..,...,"quantiles":{..}},
//	           {"labels":{"code":"200"},...},...]}
//
// A group's members are those of a /v1/window answer's aggregate (from .. quantiles), or of
// a /v1/range answer's (from, to, series, points). A label the group's series lack is left
// out of "labels", as Prometheus drops empty labels: {"labels":{}} above is the series
// without code. Past window.MaxGroups groups (fewer for a range read over rings of many
// slots) the read is 400 naming by. /v1/top and /v1/series list a labelled series as its
// "key" followed by "labels":{name:value,...}; an unlabelled series as before.
//
// /v1/top ranks the series of a metric by count, sum, avg, min, max, rate or a quantile
// (pNN) over the window (by=, count when absent; `slide query top` asks for p95 unless told),
// largest first, ties by key; series with an empty window are left out. It reads every series of the metric, so it costs one window read per series.
// /v1/series pages through series sorted by metric and key; "next" is an opaque cursor that
// continues after the last series returned, stable while series come and go.
//
// # Several instances
//
// With Config.Cluster set and this instance not holding every partition of the topic
// (Cluster.Local false), /v1/window, /v1/range, /v1/top, /v1/series and /v1/metrics read
// through the cluster: this instance's series merged with the partial aggregates of the
// partitions' owners (for /v1/range, their slots), equal to one instance holding them all. A match= or by= read of /v1/window asks
// each owner for its groups (Cluster.MergeGroups: one partial per group, the matchers sent
// along) and merges them group by group; /v1/top with match= filters the owners'
// per-series partials with the selector here; /v1/series asks for one page and one more
// after the cursor (Cluster.Keys, match= sent along), and each owner answers that many at
// most. When some partitions have no reachable,
// restored owner the read answers 503 {"error":{"code":"unavailable","message":...,
// "missing_partitions":[5,6]}} with Retry-After: 1; with partial=allow (the dashboard's
// reads, /v1/metrics included, all ask so) it answers 200 over the others, flagged
// "partial":true, "missing_partitions":[5,6]. partial=deny is the default. See package cluster.
//
// # Errors
//
// Every error is JSON, {"error":{"code":"bad_parameter","message":"parameter \"window\": ...",
// "param":"window"}}: 400 bad_parameter for a missing, malformed, unknown or repeated
// parameter (the message and "param" name it), 401 unauthorized, 404 not_found, 405
// method_not_allowed, 413 body_too_large, 501 not_configured, 503 not_ready, 503
// unavailable (several instances, an owner missing), each 503 with Retry-After: 1. The
// codes and the writer are package httperr's, shared with the limiter's handler. Clients decode answers into WindowResponse,
// TopResponse and ErrorResponse (response.go), as slide query does.
//
// # Events
//
// POST /v1/events takes NDJSON in the Kafka record format through the same intake, decoder
// and refusal reasons as Kafka records (Config.Events, an event.Intake). The whole body is read first: a body over
// Config.MaxBodyBytes (1 MiB by default) is refused with 413 and records nothing, at once
// when its Content-Length says so. Up to MaxDrainBytes (32 MiB) more of a refused body are
// read and discarded after the 413 is sent, so that clients which write the whole request
// before reading (Python's urllib and requests) see the 413 rather than a connection reset;
// beyond that, or after 10 s, the connection is closed. The answer
// is {"accepted":n,"rejected":{"reason":n,...}}, and when a line was refused "first" says
// the first refusal of each reason, its line (from 1, blank lines counted) and what is
// wrong, as event.Intake.Explain says it: "first":{"missing_field":"line 1: no field
// \"value\""}. Refused lines do not fail the request.
//
// The body's Content-Type picks its format (Config.EventsByType): with slide serve,
// application/x-protobuf is OTLP/protobuf (one ExportTraceServiceRequest, each span an
// event, package event's otlp_proto), application/x-ndjson slide's JSON events, and
// application/json, or any other type, the format serve reads Kafka records in
// (--event-format): slide's JSON events by default, OTLP/JSON under --event-format
// otlp_json. A JSON body is not sniffed: an OTLP/JSON request to a server reading slide's
// events is refused line by line, as any JSON that is not an event is. A span's refusal says
// "span N" (from 1, in the request's order) where a line's says "line N", and a body that is
// not a request is one bad_record, "the record: malformed protobuf: …".
//
// # Metrics
//
// The server registers slide_http_requests_total{route,code} and
// slide_http_request_duration_seconds{route} (ingest exports the store's series count and
// refusals as slide_ingest_*). /metrics negotiates OpenMetrics, the Prometheus protobuf
// format (which carries native histograms) or the classic text format with the scraper.
//
// With Config.Export (--export-windows "latency_ms:5m:0.95,0.99;cost:1h:sum") it also
// publishes window aggregates read at scrape time, in families promtool check metrics
// accepts: count, sum and quantiles form one summary per series,
// slide_window{metric,key,window,quantile} with slide_window_count and slide_window_sum
// (a summary always carries both; quantiles of an empty window are left out), and avg, min,
// max and rate are the gauges slide_window_avg, _min, _max and _rate_per_second. The
// summary is not cumulative: its count and sum are the window's and go down as it slides.
//
// With Config.ExportHistograms (--export-histograms "latency_ms:5m") each series' window is
// a native histogram, slide_window_values{metric,key,window} (in the protobuf format;
// the text formats show only its count and sum), so histogram_quantile(0.95,
// slide_window_values{metric="latency_ms",key="tenant-1"}) is the window's p95 and
// sum by (metric) (...) merges keys and instances. Over a native sketch kind (native:5, what
// slide serve gives these metrics) the buckets are the bins themselves: exact, a p95 within
// Prometheus' interpolation inside one 2.2% bucket; other kinds are re-bucketed into
// schema 5 (see HistogramSpec). Exports take at most Config.ExportMaxSeries series per
// scrape together (in key order; slide_window_export_skipped_series counts the rest). A
// series that cannot be exported (a key that is not UTF-8, which no door admits but a store
// fed around them can hold, and which client_golang panics on and Prometheus refuses a whole
// protobuf scrape for) is left out and counted in slide_window_export_errors_total{reason},
// and the scrape goes on with the others. With Config.ExportExemplars and a store
// that keeps exemplars (window.StoreConfig.Exemplars), each histogram carries those of the
// slots its window reads, in the protobuf format only (histogram_exemplar.go).
//
// A labelled series (issue #27) is exported with key="<its key>" and one label per label of
// its series: slide_window_count{key="tenant-1",metric="latency_ms",route="/pay",window="5m"}.
// Each series carries its own labels only (the metrics of a family may differ in label
// names), so a scrape grows with the series' labels, not with series × the names of all,
// and a series' exported labels do not depend on which other series exist. A series label
// named as one the exports set themselves (metric, window, quantile, le) is exported as
// exported_<name> (prefixed again while the series has that name), Prometheus' own rule for
// a scraped label that collides with a target label. The descriptors of each set of label
// names are built at scrape time: register the server with a plain registry, not a
// pedantic one.
//
// # Dashboard
//
// GET / is one self-contained page (dashboard.html, embedded in the binary: inline script
// and style, SVG charts drawn by plain JavaScript, nothing loaded from elsewhere, a CSP that
// allows only this server). For every metric of /v1/metrics it draws the per-slot history of
// its keys from /v1/range and a top-keys table from /v1/top, with the unit its name carries.
// A window typed in the box applies to each metric whose ring can give it; another metric
// shows its own retention and says so, so one metric's limit never blanks the page. The
// header shows readiness and restore progress, ingest lag and series from /v1/status, and a
// panel the limiter's decisions by policy and result. Each panel fails on its own. A
// refresh that gets no answer leaves what is shown greyed out and dated, the badge saying
// "unreachable": a wall screen never shows old numbers as new.
//
// What a metric is decides how it is drawn and ranked ("sort by auto", the default). A
// latency — a name ending in a time unit (_ms, _seconds, _us, …) or holding latency or
// duration as a word — is drawn as p50/p95/p99 per slot and ranked by p95. Anything else is
// an amount (cost, tokens, bytes, requests): drawn as its sum per slot and ranked by sum,
// since what is asked of an amount is who spends most; a p95 of cost says which key sends
// the largest single events. The name decides, not the sketch: every ring has one, so its
// presence tells nothing. Choosing p95, sum, rate, … in the page ranks every metric by it.
//
// The keys box takes a key or a glob (tenant-1*, *-eu): the charts merge and the tables
// list only the keys it matches (key= of /v1/range and /v1/top). A key in a table links to
// its page, ?view=key&key=tenant-1: for each metric the key has series of (from /v1/series),
// its history (quantiles or sum, events per second), the same by one of its labels (group
// by: a status label first, else the first name; the eight largest groups) from /v1/range
// by=, and its errors per second and error share when its series carry a status label (code,
// status, status_code, grpc_code, …): values 5xx, error, failed or a gRPC server error. The
// page's state is its address (?key=tenant-2*&window=1h&by=sum&k=5, ?view=key&key=..&group=code),
// rewritten as the controls change and offered as "link to this view". internal/looktest
// drives it in headless Chromium.
//
// # Concurrency and time
//
// A Server is safe for concurrent use. Every read passes Config.Now to the store, so tests
// drive time explicitly. Timeouts belong to the http.Server that serves the handler (slide
// serve sets read, write and idle timeouts).
package query
