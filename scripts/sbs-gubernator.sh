#!/usr/bin/env bash
# sbs-gubernator.sh GUBERNATOR_SRC — decisions/s of slide's backend: cluster through three
# instances against gubernator's three-node cluster, side by side on this machine (issue #30).
#
# GUBERNATOR_SRC is a checkout of github.com/gubernator-io/gubernator (never copied into this
# repository), e.g.
#   git clone https://github.com/gubernator-io/gubernator /tmp/gubernator
#   make sbs-gubernator GUBERNATOR_SRC=/tmp/gubernator
# It builds gubernator's daemon there (go build ./cmd/gubernator, the module proxy brings its
# dependencies) and slide from this tree, and needs wrk (apt-get install wrk).
#
# Both clusters stay up the whole run, on loopback addresses:
#   slide: `slide broker` (PARTITIONS partitions) and three `slide serve` in one consumer group,
#     the policy {token_bucket, capacity 10^9, backend: cluster, on_backend_error: closed}: a
#     key's owner is the partition owner of murmur2(key), the others forward over the peer
#     channel (a failed hop answers 503, so it cannot pass for a decision);
#   gubernator: three daemons, member-list discovery (each on a loopback address of its own:
#     its member list keys peers by IP), default behavior (BATCHING: a non-owner forwards to
#     the key's owner in batches), TOKEN_BUCKET limit 10^9 a minute, through its HTTP gateway
#     POST /v1/GetRateLimits, one rate limit a request; tracing off (OTEL_TRACES_EXPORTER=none,
#     OTEL_TRACES_SAMPLER=always_off: unset, it exports every request's span to localhost:4317).
# Load: one wrk a node (a third of the load each, as a load balancer sends it), THREADS threads
# and CONNS connections each, the same for both, a key drawn at random from KEYS per request
# (scripts/sbs-gubernator.lua). ROUNDS rounds alternate slide, gubernator (each preceded by a
# WARMUP load); DURATION each. Decisions/s is the sum over the three wrk of the 2xx answers
# that are allowed decisions, per second; anything else is counted and printed. CPU is the
# user+system seconds the three server processes used during the load (slide's broker apart),
# read from /proc, since both share the machine's cores with wrk.
#
# Environment: ROUNDS (3), DURATION (20s), WARMUP (3s), THREADS (1), CONNS (16), KEYS (10000),
# PARTITIONS (12), PORT_BASE (27000: the ports PORT_BASE…PORT_BASE+33 must be free),
# SBS_DIR (work directory, default a new temporary one; logs are there).
set -euo pipefail
trap 'echo "$0: failed at line $LINENO" >&2' ERR

src=${1:-${GUBERNATOR_SRC:-}}
if [ -z "$src" ] || [ ! -f "$src/go.mod" ] || ! grep -q 'gubernator' "$src/go.mod"; then
  echo "usage: $0 GUBERNATOR_SRC   (a checkout of github.com/gubernator-io/gubernator, e.g." >&2
  echo "  git clone https://github.com/gubernator-io/gubernator /tmp/gubernator)" >&2
  exit 2
fi
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 2; }
command -v curl >/dev/null || { echo "curl is missing: apt-get install curl" >&2; exit 2; }

rounds=${ROUNDS:-3}
duration=${DURATION:-20s}
warmup=${WARMUP:-3s}
threads=${THREADS:-1}
conns=${CONNS:-16}
keys=${KEYS:-10000}
partitions=${PARTITIONS:-12}
base=${PORT_BASE:-27000}
repo=$(cd "$(dirname "$0")/.." && pwd)
lua=$repo/scripts/sbs-gubernator.lua
work=${SBS_DIR:-$(mktemp -d /tmp/sbs-gubernator.XXXXXX)}
mkdir -p "$work"
tck=$(getconf CLK_TCK)

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

echo "building gubernator from $src ($(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo 'not a git checkout')) and slide; work directory $work" >&2
(cd "$src" && go build -o "$work/gubernator" ./cmd/gubernator)
(cd "$repo" && go build -o "$work/slide" ./cmd/slide)

# cpu PID… prints the user+system seconds the processes used so far.
cpu() {
  local total=0 t
  for p in "$@"; do
    t=$(awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$p/stat")
    total=$((total + t))
  done
  awk -v t="$total" -v hz="$tck" 'BEGIN { printf "%.2f", t / hz }'
}

# until_ok (lib.sh) retries a command until it succeeds or its seconds run out.
. "$(dirname "$0")/lib.sh"

# ---- slide: a broker and three instances in one group ----
"$work/slide" broker --addr "127.0.0.1:$base" --partitions "$partitions" >"$work/broker.log" 2>&1 &
pids+=($!)
broker_pid=$!
until_ok 15 "the broker" grep -q "broker listening on" "$work/broker.log"
cat >"$work/policies.yaml" <<'EOF'
policies:
  - {name: sbs, algorithm: token_bucket, capacity: 1000000000, refill_per_second: 1000000, backend: cluster, on_backend_error: closed, timeout: 200ms}
EOF
slide_urls=()
slide_pids=()
for i in 1 2 3; do
  port=$((base + i))
  "$work/slide" serve --brokers "127.0.0.1:$base" --group sbs --addr "127.0.0.1:$port" \
    --policies "$work/policies.yaml" --log-level warn >"$work/slide-$i.log" 2>&1 &
  pids+=($!)
  slide_pids+=($!)
  slide_urls+=("http://127.0.0.1:$port")
done
members3() { curl -fsS "$1/metrics" | grep -q '^slide_cluster_members 3$'; }
for u in "${slide_urls[@]}"; do
  until_ok 60 "$u to be ready" curl -fsS "$u/readyz"
  until_ok 60 "$u to see three members" members3 "$u"
done

# ---- gubernator: three daemons, static member list ----
gub_urls=()
gub_pids=()
for i in 1 2 3; do
  # Its member list keys peers by IP, so each node has a loopback address of its own.
  ip=127.0.0.$i http=$((base + 10 + i)) grpc=$((base + 20 + i)) ml=$((base + 30 + i))
  env -i PATH="$PATH" HOME="${HOME:-/tmp}" OTEL_TRACES_EXPORTER=none OTEL_TRACES_SAMPLER=always_off \
    GUBER_HTTP_ADDRESS="$ip:$http" GUBER_GRPC_ADDRESS="$ip:$grpc" \
    GUBER_ADVERTISE_ADDRESS="$ip:$grpc" GUBER_INSTANCE_ID="gubernator-$i" \
    GUBER_PEER_DISCOVERY_TYPE=member-list GUBER_MEMBERLIST_NODE_NAME="gubernator-$i" \
    GUBER_MEMBERLIST_ADDRESS="$ip:$ml" GUBER_MEMBERLIST_BIND_ADDRESS="$ip:$ml" \
    GUBER_MEMBERLIST_KNOWN_NODES="127.0.0.1:$((base + 31))" GUBER_LOG_LEVEL=warn \
    "$work/gubernator" >"$work/gubernator-$i.log" 2>&1 &
  pids+=($!)
  gub_pids+=($!)
  gub_urls+=("http://$ip:$http")
done
peers3() { curl -fsS "$1/v1/HealthCheck" | grep -q '"peer_count":3'; }
for u in "${gub_urls[@]}"; do
  until_ok 60 "$u to see three peers" peers3 "$u"
done

# one decision of each by hand, shown so a reader sees what is measured, and how 300 of the
# keys spread over gubernator's owners (slide's spread by murmur2 over PARTITIONS partitions)
owners=$(for i in $(seq 1 300); do
  k=$(printf '%08x' $(((i * 2654435761) % 4294967296)))
  curl -fsS -X POST -d '{"requests":[{"name":"sbs","unique_key":"'"$k"'","hits":1,"limit":1000000000,"duration":60000}]}' \
    "${gub_urls[0]}/v1/GetRateLimits" | grep -o '"owner":"[^"]*"' || echo '"owner":"the node asked"'
done | sort | uniq -c | awk '{ c = $1; $1 = ""; printf "%s%s%s", sep, c, $0; sep = ", " }')
echo "gubernator owners of 300 keys: $owners" >&2
parts=$(for u in "${slide_urls[@]}"; do curl -fsS "$u/metrics" | grep -c '^slide_ingest_lag{partition=' || true; done | paste -sd, -)
echo "slide partitions owned by each instance: $parts (of $partitions)" >&2
echo "slide:      $(curl -fsS -X POST -d '{"policy":"sbs","key":"k1"}' "${slide_urls[0]}/v1/allow")" >&2
echo "gubernator: $(curl -fsS -X POST -d '{"requests":[{"name":"sbs","unique_key":"k1","hits":1,"limit":1000000000,"duration":60000}]}' "${gub_urls[0]}/v1/GetRateLimits")" >&2

# load SYSTEM DURATION SEED: one wrk a node at once; prints "decisions/s non2xx notallowed
# sockerr p50_ms p99_ms cpu_s wrk_cpu_s decisions_per_cpu_s" (p50/p99 the worst node's; cpu_s
# the three server processes', wrk_cpu_s the three wrk's).
load() {
  local sys=$1 dur=$2 seed=$3 urls path
  if [ "$sys" = slide ]; then
    urls=("${slide_urls[@]}") path=/v1/allow
    set -- "${slide_pids[@]}"
  else
    urls=("${gub_urls[@]}") path=/v1/GetRateLimits
    set -- "${gub_pids[@]}"
  fi
  local before after wcpu
  before=$(cpu "$@")
  # the subshell's `times` after `wait` is the user and system time of its children: the wrk
  wcpu=$(
    for i in 0 1 2; do
      wrk -t "$threads" -c "$conns" -d "$dur" -s "$lua" "${urls[$i]}$path" -- "$sys" "$keys" "$((seed * 10 + i))" \
        >"$work/wrk-$sys-$i.out" 2>&1 &
    done
    wait
    times >"$work/times" # not piped: a pipeline's stage is a subshell without these children
    awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); t += a[1] * 60 + a[2] }; printf "%.2f", t }' "$work/times"
  )
  after=$(cpu "$@")
  cat "$work"/wrk-"$sys"-[012].out | awk -v before="$before" -v after="$after" -v wcpu="$wcpu" '
    /^SBS / {
      for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
      ok = f["requests"] - f["non2xx"] - f["notallowed"]
      rate += ok / (f["duration_us"] / 1e6)
      total += ok
      non += f["non2xx"]; bad += f["notallowed"]; sock += f["sockerr"]; n++
      if (f["p50_us"] > p50) p50 = f["p50_us"]
      if (f["p99_us"] > p99) p99 = f["p99_us"]
    }
    END {
      if (n != 3) { print "missing wrk summaries" > "/dev/stderr"; exit 1 }
      cpu = after - before
      printf "%.0f %d %d %d %.2f %.2f %.2f %s %.0f\n", rate, non, bad, sock, p50 / 1000, p99 / 1000, cpu, wcpu, (cpu > 0 ? total / cpu : 0)
    }'
}

# The counts are checked before they are trusted: a second of answers that must not count
# (scripts/sbs-gubernator.lua's probe) must all be counted out.
for sys in slide gubernator; do
  if [ "$sys" = slide ]; then url=${slide_urls[0]}/v1/allow; else url=${gub_urls[0]}/v1/GetRateLimits; fi
  wrk -t 1 -c 2 -d 1s -s "$lua" "$url" -- "$sys" "$keys" 1 probe >"$work/probe-$sys.out" 2>&1
  if ! awk '/^SBS / { for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
      ok = f["requests"] > 0 && f["non2xx"] + f["notallowed"] == f["requests"] }
      END { exit !ok }' "$work/probe-$sys.out"; then
    echo "the harness counted $sys's refusals as decisions: $(grep '^SBS' "$work/probe-$sys.out")" >&2
    exit 1
  fi
  echo "probe $sys: $(grep '^SBS' "$work/probe-$sys.out" | cut -d' ' -f2,4,5) (all counted out)" >&2
done

echo "warming up ($warmup each)" >&2
load slide "$warmup" 1 >/dev/null
load gubernator "$warmup" 1 >/dev/null

results=$work/results.txt
: >"$results"
for r in $(seq "$rounds"); do
  for sys in slide gubernator; do
    line=$(load "$sys" "$duration" "$((r + 1))")
    echo "round $r $sys: $line" >&2
    echo "$sys $r $line" >>"$results"
  done
done

echo
echo "slide $(git -C "$repo" describe --always --dirty 2>/dev/null) vs gubernator $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '?'): 3 nodes each on loopback, $(nproc) cores; wrk -t $threads -c $conns -d $duration per node, $keys keys; $rounds rounds"
echo
echo "| round | system | decisions/s | non-2xx | 2xx not allowed | socket errors | p50 ms | p99 ms | CPU s (3 servers) | CPU s (3 wrk) | decisions per server CPU s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
awk '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $2, $1, $3, $4, $5, $6, $7, $8, $9, $10, $11 }' "$results"
med() { awk -v s="$1" -v c="$2" '$1 == s { print $c }' "$results" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo
echo "| median of the rounds | decisions/s | p99 ms (worst node) | CPU s (3 servers) | CPU s (3 wrk) | decisions per server CPU s |"
echo "|---|---|---|---|---|---|"
for sys in slide gubernator; do
  echo "| $sys | $(med $sys 3) | $(med $sys 8) | $(med $sys 9) | $(med $sys 10) | $(med $sys 11) |"
done
awk -v sr="$(med slide 3)" -v gr="$(med gubernator 3)" -v sd="$(med slide 11)" -v gd="$(med gubernator 11)" \
  'BEGIN { printf "| slide ÷ gubernator | **%.2f×** | | | | **%.2f×** |\n", sr / gr, sd / gd }'
echo
echo "broker CPU over the whole run (slide's, not counted above): $(cpu "$broker_pid") s; logs and wrk output in $work"
