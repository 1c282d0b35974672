#!/usr/bin/env bash
# Runs every benchmark pair side by side in one run and writes BENCHMARKS.md.
# BENCHTIME (default 1s), COUNT (runs of each benchmark, default 3; the report takes the
# median) and BENCH (regexp, default .) narrow a run.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
benchtime=${BENCHTIME:-1s}
count=${COUNT:-3}
pattern=${BENCH:-.}
raw=bin/bench.txt
extra=bin/bench-extra.md
: > "$extra"
echo "running go benchmarks ($count rounds of -benchtime $benchtime; the report takes medians); raw output in $raw" >&2
# Rounds of -count 1, not one -count N: go test runs a sub-benchmark N times before the next,
# so ours and its anchor would be measured minutes apart; rounds keep each pair side by side
# in time on this shared machine, and the report's medians are over the rounds.
for round in $(seq "$count"); do
  echo "round $round of $count" >&2
  go test -run '^$' -bench "$pattern" -benchmem -benchtime "$benchtime" -count 1 -timeout 60m ./... || exit 1
done | tee /dev/stderr |
  go run ./internal/benchreport -raw "$raw" -extra "$extra" -cmd "make bench" > BENCHMARKS.md.tmp
if [ -x testdata/duckdb/compare.sh ]; then
  echo "running the slide batch vs DuckDB comparison" >&2
  {
    echo "## slide batch against DuckDB (#2)"
    echo
    echo "Goal: \`slide batch --size 1000 --agg sum\` end to end on a 10M-row CSV at least 10× faster than"
    echo "DuckDB's \`sum(amount) OVER (ROWS BETWEEN 999 PRECEDING AND CURRENT ROW)\` over \`read_csv\` of the"
    echo "same file; both must find the same best window. Best of 3 wall-clock runs each, from"
    echo "\`testdata/duckdb/compare.sh\` (run by \`make bench\`)."
    echo
    echo "| job | slide | anchor | anchor time | ratio |"
    echo "|---|---|---|---|---|"
  } >> "$extra"
  testdata/duckdb/compare.sh >> "$extra" || echo "DuckDB comparison failed; see above" >&2
  go run ./internal/benchreport -extra "$extra" -cmd "make bench" < "$raw" > BENCHMARKS.md.tmp
fi
# The side-by-side runs make bench cannot repeat (peers built from source) are kept by hand.
cat internal/benchreport/by-hand.md >> BENCHMARKS.md.tmp
mv BENCHMARKS.md.tmp BENCHMARKS.md
echo "wrote BENCHMARKS.md" >&2
