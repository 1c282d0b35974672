#!/usr/bin/env bash
# fuzz-short.sh runs the fuzz targets that guard hostile input briefly, one after the other:
# the event decoder (Kafka records and POST /v1/events) and the event map's (--event-map: access
# logs and any JSON, against encoding/json), the query parameter parser of the
# read routes, the policy-file parser and the plans-file parser, the rate limit service config loader and its
# ShouldRateLimit handler, the decoder of peers' partial answers and of their signature headers, the bounded decompression
# of Kafka batches (seeded with compression bombs) and the consumer's own reading of fetch responses, the /v1/allow body parser, the batch
# job's gzip/zstd and Parquet readers and its time windows over any timestamps, the window snapshot decoder (snapshots are read
# back from a topic anyone with write access can fill), and textparse's JSON scanner that the
# event decoder, the NDJSON reader and the /v1/allow fast path share, and the event decoder's
# one-pass fast paths against its scanner path, with the textparse readers they stand on, and
# the one parser of window lengths (window= of the API, policy files, rls limits), and the
# label selectors' fast paths against the regexp (match= of the read routes), the OTLP trace
# readers (otlp_proto and otlp_json records, against pdata where it reads them), the OTLP logs one (otlp_logs) and the Zipkin one
# (against the Collector's zipkin receiver), the PromQL
# API, and the batches and answers of the limiter's cluster backend (decisions forwarded to a
# key's owner) and the key states its checkpoints restore. It stops at the first failure (go test has then
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
	"./event FuzzDecode"
	# 20000 for query parameters: each input builds and serves whole requests (58 s at 50000).
	"./query FuzzQueryParams 20000x"
	"./limiter FuzzParsePolicies 20000x"
	"./limiter FuzzParsePlans 20000x"
	"./ingest FuzzInflate 20000x"
	"./ingest FuzzOwnFetch 3000x"
	"./limiter/limithttp FuzzParseAllowFast 20000x"
	"./rls FuzzParse 10000x"
	"./rls FuzzShouldRateLimit 20000x"
	"./cluster FuzzDecodeAnswer 20000x"
	"./cluster FuzzPeerStamp 20000x"
	"./batch FuzzCompressed 20000x"
	"./batch FuzzParquet 10000x"
	"./batch FuzzJobTimeWindow 10000x"
	"./window FuzzLoadSnapshot 20000x"
	"./textparse FuzzScanner 20000x"
	"./event FuzzDecodeFast 20000x"
	"./event FuzzEventMap 20000x"
	"./event FuzzOTLPLogs 10000x"
	"./textparse FuzzFast 10000x"
	"./window FuzzParseDuration 10000x"
	"./window FuzzSelectorMatch 20000x"
	"./event FuzzOTLPProto 20000x"
	"./event FuzzOTLPJSON 20000x"
	"./event FuzzZipkinJSON 20000x"
	"./event FuzzZipkinProto 20000x"
	"./promapi FuzzAPI 5000x"
	"./limiter/clusterlimit FuzzDecode 10000x"
	"./limiter/clusterlimit FuzzFrame 10000x"
	"./limiter FuzzImportState 10000x"
)

for t in "${targets[@]}"; do
	read -r pkg target budget <<<"$t"
	budget=${budget:-$fuzztime} # a target may name its own: the slow Parquet one, and this
	# round's newer targets at 20000x, so that make test stays near six minutes on two cores
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
