-- Sliding window log; mirrors slidingLog.take in limiter/algorithms.go.
-- KEYS[1] = rl:{key}:policy:sl, a sorted set of admitted requests, one member
--           per request whatever its cost (so one call adds at most one entry):
--           score = admission time (µs), member = "<cum>:<cost>" where cum is
--           the running total of units admitted up to this request, zero-padded
--           so members of one instant sort by it (and are unique).
-- ARGV: now_us ('' = Redis TIME), cost (0 = peek), limit, window_us, request id
--       (unused: cum makes members unique)
-- returns {allowed, remaining, retry_after_us, reset_after_us, delay_us}
local cost, limit, window = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local key = KEYS[1]
local function int(x) return string.format('%.0f', x) end
-- cum and cost of a member
local function parse(m)
  local c, k = string.match(m, '^(%d+):(%d+)$')
  return tonumber(c), tonumber(k)
end

local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
local newest = tonumber(last[2])
if newest ~= nil and newest > now then now = newest end -- clock went back: keep order
-- The window is (now - window, now]: an entry exactly window old has left.
-- Each entry is removed once: O(log N) per call, amortized.
redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - window))
local card = redis.call('ZCARD', key)
local n, total, base = 0, 0, 0
if card > 0 then
  local oldest = redis.call('ZRANGE', key, 0, 0)
  local c0, k0 = parse(oldest[1])
  local cN = parse(last[1]) -- the newest is still in the window
  if c0 == nil or cN == nil then
    -- A log written by an older slide (one member per unit): restarted, once.
    redis.call('DEL', key)
    card, newest = 0, nil
  else
    base = c0 - k0
    total = cN
    n = total - base
  end
end
local reset = 0
if card > 0 then reset = newest + window - now end
local want = cost
if cost == 0 then want = 1 end
if n + want > limit then
  -- The (n + want - limit)-th oldest unit has to leave the window first: the
  -- first entry whose running total reaches it, by binary search over ranks.
  local k = n + want - limit
  local lo, hi = 0, card - 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local c = parse(redis.call('ZRANGE', key, mid, mid)[1])
    if c - base >= k then hi = mid else lo = mid + 1 end
  end
  local e = redis.call('ZRANGE', key, lo, lo, 'WITHSCORES')
  return {0, limit - n, tonumber(e[2]) + window - now, reset, 0}
end
if cost == 0 then
  return {1, limit - n, 0, reset, 0}
end
redis.call('ZADD', key, int(now), string.format('%020d:%d', total + cost, cost))
redis.call('PEXPIRE', key, math.max(1, math.ceil(window / 1000)))
return {1, limit - n - cost, 0, window, 0}
