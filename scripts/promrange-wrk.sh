#!/usr/bin/env bash
# promrange-wrk.sh: issue #28's query_range side by side, by hand, with wrk (a load generator
# neither side wrote). It builds slide, generates one hour of 1,000 series (250 keys × 4
# routes, 3 lognormal latencies a series every 10 s, as BenchmarkQueryRangeVsPrometheus
# does), sends the events to `slide serve` through its embedded broker (`slide produce
# --file --timestamps event`) and backfills the same events into Debian's Prometheus 2.42
# (`promtool tsdb create-blocks-from openmetrics`: a classic histogram of 10 buckets, _count
# and _sum every 10 s), then runs wrk, one connection, against both for each query over the
# same hour at 10 s steps, alternating the servers for ROUNDS rounds.
#
#   scripts/promrange-wrk.sh            # ROUNDS=3 DURATION=30s by default
#
# Needs go, wrk, prometheus and promtool (apt-get install wrk prometheus), awk and curl
# (timestamps are printed with %.0f: mawk's %d stops at 2^31).
set -euo pipefail
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-30s}
SLIDE_ADDR=127.0.0.1:18928
KAFKA_ADDR=127.0.0.1:19928
PROM_ADDR=127.0.0.1:19929
dir=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
for t in go wrk prometheus promtool curl awk; do
	command -v "$t" >/dev/null || { echo "$t is not installed (apt-get install wrk prometheus)" >&2; exit 1; }
done

go build -o "$dir/slide" ./cmd/slide

# The hour ends at the last 10 s boundary; the slide ring keeps 90 minutes, so the hour is
# still whole while wrk runs.
end=$(( $(date +%s) / 10 * 10 ))
start=$(( end - 3600 ))
awk -v start="$start" -v end="$end" -v ev="$dir/events.ndjson" -v om="$dir/hour.om" '
function normal() { return sqrt(-2 * log(1 - rand())) * cos(6.283185307179586 * rand()) }
function emit(ts,   i, lbl) {
	lbl = sprintf("key=\"%s\",route=\"%s\"", key, route)
	for (i = 1; i <= 9; i++) printf "latency_ms_bucket{%s,le=\"%s\"} %d %.0f\n", lbl, le[i], b[i], ts > om
	printf "latency_ms_bucket{%s,le=\"+Inf\"} %d %.0f\n", lbl, count, ts > om
	printf "latency_ms_count{%s} %d %.0f\n", lbl, count, ts > om
	printf "latency_ms_sum{%s} %.17g %.0f\n", lbl, sum, ts > om
}
BEGIN {
	srand(28)
	split("10 25 50 100 250 500 1000 2500 5000", le, " ")
	print "# HELP latency_ms Latencies.\n# TYPE latency_ms histogram" > om
	for (k = 0; k < 250; k++) for (r = 0; r < 4; r++) {
		key = sprintf("k%03d", k); route = "/r" r
		count = 0; sum = 0; for (i = 1; i <= 9; i++) b[i] = 0
		emit(start)
		for (t = start; t < end; t += 10) {
			for (j = 0; j < 3; j++) {
				v = sprintf("%.3f", exp(log(80) + 0.8 * normal())) + 0
				ms = t * 1000 + int(rand() * 10000)
				printf "{\"ts\":%.0f,\"key\":\"%s\",\"metric\":\"latency_ms\",\"value\":%.3f,\"labels\":{\"route\":\"%s\"}}\n", ms, key, v, route > ev
				count++; sum += v
				for (i = 1; i <= 9; i++) if (v <= le[i]) b[i]++
			}
			emit(t + 10)
		}
	}
	print "# EOF" > om
}'

promtool tsdb create-blocks-from openmetrics "$dir/hour.om" "$dir/prom" >/dev/null
printf 'global:\n  scrape_interval: 1h\n' >"$dir/prometheus.yml"
prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/prom" \
	--storage.tsdb.retention.time=30d --web.listen-address="$PROM_ADDR" >"$dir/prometheus.log" 2>&1 &
pids+=($!)
"$dir/slide" serve --addr "$SLIDE_ADDR" --embedded-kafka-addr "$KAFKA_ADDR" \
	--rings latency_ms=10s:540 >"$dir/slide.log" 2>&1 &
pids+=($!)
for url in "http://$PROM_ADDR/-/ready" "http://$SLIDE_ADDR/readyz"; do
	for _ in $(seq 120); do curl -fs "$url" >/dev/null && break; sleep 0.5; done
done
"$dir/slide" produce --brokers "$KAFKA_ADDR" --file "$dir/events.ndjson" --timestamps event >/dev/null
want=$(wc -l <"$dir/events.ndjson")
for _ in $(seq 240); do
	got=$(curl -fs "http://$SLIDE_ADDR/api/v1/query" --data-urlencode 'query=sum(latency_ms_count)' |
		sed -n 's/.*"value":\[[^,]*,"\([0-9.e+]*\)".*/\1/p')
	[ "${got:-0}" = "$want" ] && break
	sleep 1
done
[ "${got:-0}" = "$want" ] || { echo "slide holds ${got:-0} events of $want" >&2; exit 1; }

# enc percent-encodes a query for the GET URL.
enc() {
	awk -v s="$1" 'BEGIN { for (i = 32; i < 127; i++) ord[sprintf("%c", i)] = i
		printf "query="; for (i = 1; i <= length(s); i++) { c = substr(s, i, 1)
		if (c ~ /[A-Za-z0-9._~-]/) printf "%s", c; else printf "%%%02X", ord[c] } }'
}
declare -A q
q[rate_slide]='sum by (key) (rate(latency_ms_count[1m]))'
q[rate_prom]=${q[rate_slide]}
q[quantile_slide]='histogram_quantile(0.95, sum by (key) (rate(latency_ms[1m])))'
q[quantile_prom]='histogram_quantile(0.95, sum by (key, le) (rate(latency_ms_bucket[1m])))'
range="start=$start&end=$end&step=10"
echo "hour [$start, $end], $want events; wrk -t1 -c1 -d$DURATION --timeout 120s, $ROUNDS rounds"
for round in $(seq "$ROUNDS"); do
	for what in rate quantile; do
		for side in slide prom; do
			if [ "$side" = slide ]; then addr=$SLIDE_ADDR; else addr=$PROM_ADDR; fi
			query=${q[${what}_$side]}
			url="http://$addr/api/v1/query_range?$(enc "$query")&$range"
			out=$(wrk -t1 -c1 -d"$DURATION" --timeout 120s "$url")
			echo "round $round $what $side: $(echo "$out" | awk '/Requests\/sec/ {print $2 " req/s"} /Latency/ {print "mean " $2}' | tr '\n' ' ')"
			if echo "$out" | grep -q 'Non-2xx'; then
				echo "non-2xx answers from $side" >&2
				exit 1
			fi
		done
	done
done
