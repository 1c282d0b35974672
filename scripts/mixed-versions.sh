#!/usr/bin/env bash
# mixed-versions.sh [OLD_REF] — a rolling upgrade's half-way point, with real binaries: one
# `slide serve` built from OLD_REF (default ed71e12, the commit before the peer protocol's
# page pushdown, opExtents and the limiter restore that no longer holds readiness) and one
# built from this tree, in one consumer group, asked the same reads; their answers must be
# equal.
#
# It builds slide from OLD_REF (a `git worktree add` into the work directory, `go build
# ./cmd/slide`, the worktree removed after) and from this tree, then runs twice: without and
# with --peer-key-file (the same file for both instances, as a signed group is upgraded). Each
# run starts `slide broker` (4 partitions, in memory) and the two instances on loopback (each
# its own --addr and --advertise-addr), produces EVENTS events of KEYS×5 series of latency_ms
# (labels route and code) and KEYS series of cost (`slide produce --file`, keyed by the event's
# key, so both instances own some), waits until both are ready, see 2 members and read every
# event, and asks BOTH:
#   - /v1/series paged with limit=7 to the end (all, metric=, metric= with match=, match=
#     alone), each page's series concatenated; and paged asking old and new in turn, each
#     with the other's cursor (as behind a load balancer), which must equal the plain pages;
#   - the PromQL listings /api/v1/labels, /api/v1/label/{key,route,code}/values and
#     /api/v1/series?match[]=latency_ms (its data sorted), at one fixed start= and end=;
#   - a /v1/window glob read (its time fields from, to, elapsed_s and rate_per_s left out: the
#     route takes no instant, and the two are asked a few ms apart) and two PromQL instant
#     queries (histogram_quantile of a rate, answered by the pushdown, and an increase of
#     M_count, by the engine) at a fixed time=, as controls that the two agree at all;
#   - decisions of a backend: cluster policy (both instances run it, so both became ready
#     with a cluster limiter to restore): 20 keys, each decided at the instance asked, then
#     at the other, must give the same answers (the same buckets, whichever owns the key).
# It prints one line per check, "ok" or "DIFFERENT" with the first lines of a diff, and exits
# 1 if any differ (2 on bad usage, other non-zero codes when the setup fails).
#
# Environment: KEYS (60), EVENTS (4000), PORT_BASE (28100: PORT_BASE…PORT_BASE+2 must be
# free), MIXED_DIR (work directory, default a new temporary one; logs and answers are there).
set -euo pipefail
trap 'echo "$0: failed at line $LINENO" >&2' ERR

old_ref=${1:-ed71e12}
for c in curl jq git go; do
  command -v "$c" >/dev/null || { echo "$c is missing" >&2; exit 2; }
done
repo=$(cd "$(dirname "$0")/.." && pwd)
if ! old_sha=$(git -C "$repo" rev-parse --verify --quiet "$old_ref^{commit}"); then
  echo "usage: $0 [OLD_REF]   ($old_ref is no commit of $repo)" >&2
  exit 2
fi
keys=${KEYS:-60}
events=${EVENTS:-4000}
base=${PORT_BASE:-28100}
work=${MIXED_DIR:-$(mktemp -d /tmp/mixed-versions.XXXXXX)}
mkdir -p "$work"

pids=()
old_src=$work/old-src
# stop_all stops the instances, then the broker (pids[0]): they write their last limiter
# checkpoints and snapshots to it as they stop.
stop_all() {
  local p
  for p in "${pids[@]:1}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]:1}"; do wait "$p" 2>/dev/null || true; done
  for p in "${pids[@]:0:1}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  pids=()
}
cleanup() {
  stop_all
  if [ -d "$old_src" ]; then git -C "$repo" worktree remove --force "$old_src" 2>/dev/null || true; fi
}
trap cleanup EXIT

echo "building slide from $old_ref ($(git -C "$repo" rev-parse --short "$old_sha")) and from $repo ($(git -C "$repo" describe --always --dirty)); work directory $work" >&2
git -C "$repo" worktree add --detach --quiet "$old_src" "$old_sha"
(cd "$old_src" && go build -o "$work/slide-old" ./cmd/slide)
git -C "$repo" worktree remove --force "$old_src"
(cd "$repo" && go build -o "$work/slide-new" ./cmd/slide)

# until_ok (lib.sh) retries a command until it succeeds or its seconds run out.
. "$(dirname "$0")/lib.sh"

# The events: KEYS keys × 5 routes of latency_ms (code 200 or 500 by route) and one cost
# series per key, values and order fixed, stamped now (the record's time) so that every
# window holds them.
awk -v n="$events" -v k="$keys" 'BEGIN {
  for (i = 0; i < n; i++) {
    key = "tenant-" (i * 7 % k + 1)
    if (i % 5 == 4) {
      printf "{\"key\":\"tenant-%d\",\"metric\":\"cost\",\"value\":%d}\n", int(i / 5) % k + 1, i % 13 + 1
    } else {
      r = int(i / k) % 5
      printf "{\"key\":\"%s\",\"metric\":\"latency_ms\",\"value\":%.1f,\"labels\":{\"route\":\"/r%d\",\"code\":\"%s\"}}\n", key, (i * 37 % 1000) / 2 + 1, r, (r == 4 ? "500" : "200")
    }
  }
}' >"$work/events.ndjson"
cat >"$work/policies.yaml" <<'EOF'
policies:
  - {name: mixed, algorithm: token_bucket, capacity: 100, refill_per_second: 1, backend: cluster, on_backend_error: closed, timeout: 500ms}
EOF
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/peer.key"

for p in "$base" $((base + 1)) $((base + 2)); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    echo "port $p is in use (PORT_BASE=$base): a slide of an earlier run?" >&2
    exit 3
  fi
done
old_url=http://127.0.0.1:$((base + 1))
new_url=http://127.0.0.1:$((base + 2))
differ=0

# check NAME CMD…: runs CMD against each instance (its URL appended as the last argument),
# prints ok or DIFFERENT with the first lines of the diff; the answers stay in the run's dir.
check() {
  local name=$1 f
  shift
  f=$(answer_file "$name")
  # a read that fails is an answer too: its error body and exit status are compared
  "$@" "$old_url" >"$f.old" 2>&1 || echo "FAILED (exit $?)" >>"$f.old"
  "$@" "$new_url" >"$f.new" 2>&1 || echo "FAILED (exit $?)" >>"$f.new"
  compare "$name" "$f.old" "$f.new" "old < > new"
}
# answer_file NAME: where check keeps NAME's answers (.old and .new appended).
answer_file() { printf '%s/%s' "$run_dir" "$(printf '%s' "$1" | tr -c 'A-Za-z0-9_.-' '_')"; }
# compare NAME FILE FILE WHAT: prints ok, or DIFFERENT with the first lines of the diff.
compare() {
  if cmp -s "$2" "$3"; then
    printf 'ok         %-62s (%s bytes, %s lines)\n' "$1" "$(wc -c <"$2")" "$(grep -c '' "$2")"
  else
    differ=1
    printf 'DIFFERENT  %s (%s)\n' "$1" "$4"
    diff <(lines_view "$2") <(lines_view "$3") | head -6 | cut -c1-200 | sed 's/^/    /' || true
    if diff -q <(lines_view "$2") <(lines_view "$3") >/dev/null; then
      echo "    (equal as JSON, different bytes: $(cmp "$2" "$3" 2>&1 | head -1))"
    fi
  fi
}
# lines_view FILE: an answer as a diff should show it: a PromQL answer's data (or result)
# one element a line; a line that is not JSON (curl's error, FAILED) as it is.
lines_view() {
  jq -rcR '. as $raw | try (fromjson |
    if type == "object" and (.data | type) == "array" then del(.data), .data[]
    elif type == "object" and (.data | type) == "object" and (.data.result | type) == "array" then del(.data.result), .data.result[]
    else . end) catch $raw' "$1"
}

# ask CURL_ARG…: curl that fails on an HTTP error but writes its body (slide's error JSON).
ask() { curl -sS --fail-with-body "$@"; }
# series_pages [PARAM…] URL: every page of /v1/series at limit=7, one series a line. With
# TURNS set, the pages are asked of URL and the other instance in turn, each page with the
# cursor the other gave, as a client behind a load balancer pages during an upgrade.
series_pages() {
  local url=${*: -1} args=("${@:1:$#-1}") cursor='' page n=0 next=${*: -1}
  if [ -n "${TURNS:-}" ]; then
    if [ "$url" = "$old_url" ]; then next=$new_url; else next=$old_url; fi
  fi
  while :; do
    page=$(ask -G "$url/v1/series" -d limit=7 "${args[@]}" ${cursor:+--data-urlencode "cursor=$cursor"}) || {
      printf '%s\n' "$page"
      return 1
    }
    jq -c '.series[]' <<<"$page"
    cursor=$(jq -r '.next // empty' <<<"$page")
    [ -n "$cursor" ] || break
    set -- "$next" && next=$url && url=$1
    n=$((n + 1))
    if [ "$n" -gt 10000 ]; then echo "over 10000 pages" >&2; exit 3; fi
  done
}
series_in_turn() { TURNS=1 series_pages "$@"; }
# prom PATH [PARAM…] URL: a PromQL API answer, as it came.
prom() {
  local url=${*: -1} path=$1
  ask -G "$url$path" "${@:2:$#-2}"
}
# prom_sorted PATH [PARAM…] URL: the same with its data sorted (a series listing's order is
# not Prometheus' contract).
prom_sorted() {
  local out
  out=$(prom "$@") || { printf '%s\n' "$out"; return 1; }
  jq -cS '.data |= sort_by(tostring)' <<<"$out"
}
# window_glob URL: a /v1/window glob read without its time fields.
window_glob() {
  local out
  out=$(ask -G "$1/v1/window" -d metric=latency_ms -d 'key=tenant-*' -d window=5m -d q=0.5,0.99) || {
    printf '%s\n' "$out"
    return 1
  }
  jq -cS 'del(.from, .to, .elapsed_s, .rate_per_s)' <<<"$out"
}
# decisions URL: 20 keys of the cluster policy, each decided at URL (cost 1) then at the
# other instance (cost 2), whichever owns it; what a decision says but its times. Both
# instances print the same when they share each key's bucket (99 then 97).
decisions() {
  local url=$1 other=$old_url i
  [ "$url" = "$old_url" ] && other=$new_url
  for i in $(seq 20); do
    decide "$url" "k$i-via-${url##*:}" 1 || return 1
    decide "$other" "k$i-via-${url##*:}" 2 || return 1
  done
}
# decide URL KEY COST: one decision of the cluster policy, without its times.
decide() {
  local out
  out=$(ask -X POST -d '{"policy":"mixed","key":"'"$2"'","cost":'"$3"'}' "$1/v1/allow") || {
    printf '%s\n' "$out"
    return 1
  }
  jq -c '{allowed, policy, limit, remaining}' <<<"$out"
}
# peer_reads URL: the peer reads the instance asked, by result, and its served 401s.
peer_reads() {
  curl -fsS "$1/metrics" | awk '
    /^slide_cluster_peer_requests_total\{/ { match($0, /result="[^"]*"/); r[substr($0, RSTART + 8, RLENGTH - 9)] += $NF }
    /^slide_cluster_peer_served_total\{code="401"\}/ { u = $NF }
    END { printf "ok %d, older_version %d, error %d, unauthenticated %d; served 401 %d", r["ok"], r["older_version"], r["error"], r["unauthenticated"], u }'
}
past() { [ "$(date +%s)" -gt "$1" ]; }
members2() { curl -fsS "$1/metrics" | grep -q '^slide_cluster_members 2$'; }
# has_all URL: the instance reads every produced event through the group.
has_all() {
  curl -fsS -G "$1/v1/window" -d metric=latency_ms -d 'key=tenant-*' -d window=5m | jq -e --argjson n "$latency" '.count == $n' >/dev/null &&
    curl -fsS -G "$1/v1/window" -d metric=cost -d 'key=tenant-*' -d window=5m | jq -e --argjson n "$cost" '.count == $n' >/dev/null
}
latency=$(grep -c '"latency_ms"' "$work/events.ndjson")
cost=$(grep -c '"cost"' "$work/events.ndjson")

for mode in unsigned signed; do
  run_dir=$work/$mode
  mkdir -p "$run_dir"
  keyflag=()
  if [ "$mode" = signed ]; then keyflag=(--peer-key-file "$work/peer.key"); fi
  "$work/slide-new" broker --addr "127.0.0.1:$base" --partitions 4 >"$run_dir/broker.log" 2>&1 &
  pids+=($!)
  until_ok 15 "the broker" grep -q "broker listening on" "$run_dir/broker.log" || exit 3
  for v in old new; do
    if [ "$v" = old ]; then port=$((base + 1)); else port=$((base + 2)); fi
    "$work/slide-$v" serve --brokers "127.0.0.1:$base" --group mixed --addr "127.0.0.1:$port" \
      --advertise-addr "127.0.0.1:$port" --policies "$work/policies.yaml" "${keyflag[@]}" --log-level warn >"$run_dir/serve-$v.log" 2>&1 &
    pids+=($!)
  done
  for u in "$old_url" "$new_url"; do
    until_ok 60 "$u to be ready" curl -fsS "$u/readyz" || exit 3
    until_ok 60 "$u to see two members" members2 "$u" || exit 3
  done
  "$work/slide-new" produce --brokers "127.0.0.1:$base" --file "$work/events.ndjson" >"$run_dir/produce.log" 2>&1
  for u in "$old_url" "$new_url"; do
    until_ok 60 "$u to read all $latency+$cost events" has_all "$u" || exit 3
  done
  parts=$(for u in "$old_url" "$new_url"; do curl -fsS "$u/metrics" | grep -c '^slide_ingest_lag{partition=' || true; done | paste -sd/ -)
  # One instant for every PromQL read: the end of the current 10 s slot (latency_ms's default
  # ring), after every event was read, waited for: a native histogram's sample is at its
  # slot's end, so a rate at an instant inside the events' slot has nothing to read.
  at=$((($(date +%s) / 10 + 1) * 10))
  until_ok 15 "the clock to pass $at" past "$at" || exit 3
  echo
  echo "== $mode peer reads$([ "$mode" = signed ] && echo ' (--peer-key-file, the same file for both)'): old $old_url, new $new_url, partitions owned $parts of 4; $latency latency_ms and $cost cost events; time=$at"

  check "/v1/series limit=7, all pages" series_pages
  check "/v1/series limit=7, pages asked of old and new in turn" series_in_turn
  compare "/v1/series limit=7, in turn from old = old's own pages" "$(answer_file "/v1/series limit=7, all pages").old" \
    "$(answer_file "/v1/series limit=7, pages asked of old and new in turn").old" "one instance < > in turn"
  check "/v1/series limit=7 metric=latency_ms" series_pages -d metric=latency_ms
  check "/v1/series limit=7 metric=latency_ms match=route=\"/r2\"" series_pages -d metric=latency_ms --data-urlencode 'match=route="/r2"'
  check "/v1/series limit=7 match=code=\"500\",key=~\"tenant-1.*\"" series_pages --data-urlencode 'match=code="500",key=~"tenant-1.*"'
  check "/api/v1/labels" prom /api/v1/labels -d "start=$((at - 3600))" -d "end=$at"
  check "/api/v1/label/key/values" prom /api/v1/label/key/values -d "start=$((at - 3600))" -d "end=$at"
  check "/api/v1/label/route/values" prom /api/v1/label/route/values -d "start=$((at - 3600))" -d "end=$at"
  check "/api/v1/label/code/values match[]=latency_ms{route=\"/r4\"}" prom /api/v1/label/code/values -d "start=$((at - 3600))" -d "end=$at" --data-urlencode 'match[]=latency_ms{route="/r4"}'
  check "/api/v1/series match[]=latency_ms (sorted)" prom_sorted /api/v1/series -d "start=$((at - 3600))" -d "end=$at" --data-urlencode 'match[]=latency_ms'
  check "/v1/window latency_ms key=tenant-* (time fields left out)" window_glob
  check "/api/v1/query histogram_quantile by route" prom /api/v1/query -d "time=$at" --data-urlencode 'query=histogram_quantile(0.9, sum by (route) (rate(latency_ms[5m])))'
  check "/api/v1/query sum by (code) (increase(latency_ms_count[5m]))" prom /api/v1/query -d "time=$at" --data-urlencode 'query=sum by (code) (increase(latency_ms_count[5m]))'
  check "/v1/allow, a cluster policy's key decided at each instance in turn" decisions
  echo "peer reads asked by old: $(peer_reads "$old_url"); by new: $(peer_reads "$new_url")"
  stop_all
done

echo
if [ "$differ" -ne 0 ]; then
  echo "some answers differ (answers and logs in $work)"
  exit 1
fi
echo "every answer equal (answers and logs in $work)"
