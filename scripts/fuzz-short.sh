#!/usr/bin/env bash
# fuzz-short.sh runs the fuzz targets that guard hostile input briefly, one after the other:
# the event decoder (Kafka records and POST /v1/events), the query parameter parser of the
# read routes, the policy-file parser, the rate limit service config loader and its
# ShouldRateLimit handler, the decoder of peers' partial answers, the bounded decompression
# of Kafka batches (seeded with compression bombs), the /v1/allow body parser, and the batch
# job's gzip/zstd and Parquet readers. It stops at the first failure (go test has then
# written the failing input under the package's testdata/fuzz/<Target>/) and prints one line
# per target; a target may name its own budget. FUZZTIME_SHORT sets the budget per target (default 50000x: executions, about
# 10 s here); GO the go command. The budget is a count, not a duration: with a duration, Go
# 1.26's fuzz coordinator can fail a clean run with "context deadline exceeded" as the time
# runs out (golang/go#75804, fixed in Go 1.27), which made make test fail at random.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
fuzztime=${FUZZTIME_SHORT:-50000x}
targets=(
	"./ingest FuzzDecode"
	"./query FuzzQueryParams"
	"./limiter FuzzParsePolicies"
	"./ingest FuzzInflate"
	"./limiter FuzzParseAllowFast"
	"./rls FuzzParse"
	"./rls FuzzShouldRateLimit"
	"./cluster FuzzDecodeAnswer"
	"./batch FuzzCompressed"
	"./batch FuzzParquet 10000x"
)

for t in "${targets[@]}"; do
	read -r pkg target budget <<<"$t"
	budget=${budget:-$fuzztime} # a slow target (Parquet: ~1,000 execs/s) names its own
	log=$(mktemp)
	start=$(date +%s)
	if ! "$GO" test -run '^$' -fuzz "^${target}\$" -fuzztime "$budget" "$pkg" >"$log" 2>&1; then
		echo "FAIL $target ($pkg) after $(($(date +%s) - start))s:"
		cat "$log"
		rm -f "$log"
		exit 1
	fi
	execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
	rm -f "$log"
	echo "ok   $target ($pkg) ${budget}, ${execs:-?} execs, $(($(date +%s) - start))s"
done
