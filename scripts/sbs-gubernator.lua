-- wrk script of scripts/sbs-gubernator.sh: one rate-limit decision a request, on a key drawn
-- at random from KEYS, with the same limit for both systems (10^9 a minute: every decision
-- is allowed). Arguments after wrk's "--": MODE (slide or gubernator), KEYS, SEED, and
-- "probe" to ask what must not count (slide: an unknown policy, 400; gubernator: a limit of
-- 0 under another name, OVER_LIMIT), with which the harness checks these counts before it measures.
-- It counts the 2xx answers that are not an allowed decision (slide: no "allowed":true;
-- gubernator: OVER_LIMIT or an error in the body) and prints one summary line for the
-- harness: "SBS requests=… duration_us=… non2xx=… notallowed=… sockerr=… p50_us=… p99_us=…".

local mode, nkeys, policy, limit
-- globals, not locals: done() reads each thread's counts with thread:get, which sees only
-- a thread's globals
notallowed = 0
non2xx = 0
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  mode = args[1]
  nkeys = tonumber(args[2])
  math.randomseed(tonumber(args[3]) or os.time())
  policy, limit = "sbs", "1000000000"
  if args[4] == "probe" then
    -- a name of its own: gubernator keeps a bucket asked with limit 0 over the limit
    -- when it is later asked with a higher one
    policy, limit = "sbs-probe", "0"
  end
end

local headers = {["Content-Type"] = "application/json"}

-- Key i of KEYS is 8 hex digits of i times Knuth's multiplicative constant (distinct for
-- every i below 2^32), not "k" .. i: gubernator's default picker hashes with FNV-1, whose
-- last byte moves only the hash's low bits, so keys that differ only at their end all land
-- on one owner; these spread over its three nodes as they do over slide's partitions.
local function keyof(i)
  return string.format("%08x", (i * 2654435761) % 4294967296)
end

function request()
  local key = keyof(math.random(nkeys))
  local body
  if mode == "slide" then
    body = '{"policy":"' .. policy .. '","key":"' .. key .. '"}'
  else
    body = '{"requests":[{"name":"' .. policy .. '","unique_key":"' .. key ..
      '","hits":1,"limit":' .. limit .. ',"duration":60000}]}'
  end
  return wrk.format("POST", nil, headers, body)
end

function response(status, hdrs, body)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
    return
  end
  if mode == "slide" then
    if not string.find(body, '"allowed":true', 1, true) then
      notallowed = notallowed + 1
    end
  elseif string.find(body, "OVER_LIMIT", 1, true) or string.find(body, '"error":"[^"]') then
    notallowed = notallowed + 1
  end
end

function done(summary, latency, requests)
  local bad, non = 0, 0
  for _, t in ipairs(threads) do
    bad = bad + (t:get("notallowed") or 0)
    non = non + (t:get("non2xx") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    "SBS requests=%d duration_us=%d non2xx=%d notallowed=%d sockerr=%d p50_us=%d p99_us=%d\n",
    summary.requests, summary.duration, non, bad, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
