#!lua
-- Fixed window counter; mirrors fixedWindow.take in limiter/algorithms.go.
-- KEYS[1] = rl:{key}:policy:fw; the units counted in window number idx are the
-- integer string KEYS[1]:idx (same hash tag, so the same Cluster slot), which
-- expires at the window's end. One INCRBY decides an admission: the least work
-- Redis can do per decision (envoyproxy/ratelimit's INCRBY + EXPIRE, in one call).
-- ARGV: now_us ('' = Redis TIME), cost (0 = peek), limit, window_us
-- returns {allowed, remaining, retry_after_us, reset_after_us, delay_us}
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME') -- one clock for every pod: the server's
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local cost, limit, window = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local idx = math.floor(now / window)
local key = KEYS[1] .. ':' .. string.format('%.0f', idx) -- %.0f: tostring keeps 14 digits
local left = (idx + 1) * window - now
if cost == 0 then -- peek: read, never create
  local n = tonumber(redis.call('GET', key) or '0')
  if n + 1 > limit then
    return {0, limit - n, left, left, 0}
  end
  local reset = 0
  if n > 0 then reset = left end
  return {1, limit - n, 0, reset, 0}
end
local n = redis.call('INCRBY', key, cost)
if n > limit then -- denied: nothing is counted
  if n == cost then
    redis.call('DEL', key)
    return {0, limit, left, 0, 0}
  end
  redis.call('DECRBY', key, cost)
  return {0, limit - n + cost, left, left, 0}
end
if n == cost then -- the window's first units: the key lives until the window ends
  redis.call('PEXPIRE', key, math.max(1, math.ceil(left / 1000)))
end
return {1, limit - n, 0, left, 0}
