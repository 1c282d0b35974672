// Package query is slide's HTTP API: window reads, top lists and series listing over a
// window.Store, event intake for users without Kafka, the limiter's allow route, health,
// Prometheus exposition and a one-page dashboard. Build a Server with New(Config) and serve
// its Handler.
//
// # Routes
//
//	GET  /v1/window?metric=latency_ms&key=tenant-42&window=5m&q=0.5,0.95,0.99
//	GET  /v1/top?metric=latency_ms&by=p95&window=5m&k=10[&q=0.5,0.99][&key=tenant-*]
//	GET  /v1/series?[metric=latency_ms][&prefix=tenant-][&limit=100][&cursor=...]
//	GET  /v1/metrics
//	POST /v1/events      NDJSON body, one event a line          (bearer token when configured)
//	POST /v1/allow       the limiter's handler (Config.Allow)     (bearer token when configured)
//	GET  /healthz        liveness: 200 while the process serves
//	GET  /readyz         readiness: 503 while Config.Ready fails (windows being restored,
//	                     Kafka unreachable); with Config.Backends, each backend's state too
//	GET  /metrics        Prometheus exposition of Config.Gatherer
//	GET  /               the dashboard
//
// # Authentication
//
// With Config.AuthToken set, the write routes (POST /v1/events, /v1/allow) require
// "Authorization: Bearer TOKEN"; with Config.AuthReads as well, so do the data reads
// (/v1/window, /v1/top, /v1/series, /v1/metrics) and /metrics (a Prometheus scrape config
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
// series has (whatever its length or bytes) is 404, never a 400, since the ingest decoder
// decides which keys exist (at most 256 bytes by default). A request line or header block
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
// /v1/top ranks the series of a metric by count, sum, avg, min, max, rate or a quantile
// (pNN) over the window, largest first, ties by key; series with an empty window are left
// out. It reads every series of the metric, so it costs one window read per series.
// /v1/series pages through series sorted by metric and key; "next" is an opaque cursor that
// continues after the last series returned, stable while series come and go.
//
// # Errors
//
// Every error is JSON, {"error":{"code":"bad_parameter","message":"parameter \"window\": ...",
// "param":"window"}}: 400 bad_parameter for a missing, malformed, unknown or repeated
// parameter (the message and "param" name it), 401 unauthorized, 404 not_found, 405
// method_not_allowed, 413 body_too_large, 501 not_configured, 503 not_ready.
//
// # Events
//
// POST /v1/events takes NDJSON in the Kafka record format and goes through the same decoder
// and refusal reasons (Config.Events). The whole body is read first: a body over
// Config.MaxBodyBytes (1 MiB by default) is refused with 413 and records nothing, at once
// when its Content-Length says so. Up to MaxDrainBytes (32 MiB) more of a refused body are
// read and discarded after the 413 is sent, so that clients which write the whole request
// before reading (Python's urllib and requests) see the 413 rather than a connection reset;
// beyond that, or after 10 s, the connection is closed. The answer
// is {"accepted":n,"rejected":{"reason":n,...}}; refused lines do not fail the request.
//
// # Metrics
//
// The server registers slide_http_requests_total{route,code} and
// slide_http_request_duration_seconds{route} (ingest exports the store's series count and
// refusals as slide_ingest_*). With Config.Export (--export-windows
// "latency_ms:5m:0.95,0.99") it also publishes window aggregates read at scrape time:
// slide_window_quantile{metric,key,window,quantile}, slide_window_count, _sum, _avg, _min,
// _max and _rate_per_second, at most Config.ExportMaxSeries series per scrape (in key order;
// slide_window_export_skipped_series counts the rest).
//
// # Concurrency and time
//
// A Server is safe for concurrent use. Every read passes Config.Now to the store, so tests
// drive time explicitly. Timeouts belong to the http.Server that serves the handler (slide
// serve sets read, write and idle timeouts).
package query
