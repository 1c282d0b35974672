#!lua
-- Fixed window counter; mirrors fixedWindow.take in limiter/algorithms.go.
-- KEYS[1] = rl:{key}:policy:fw, a hash {w = window index, n = units counted}
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
-- Lua's tostring keeps 14 digits; µs timestamps have 16.
local function int(x) return string.format('%.0f', x) end

local idx = math.floor(now / window)
local s = redis.call('HMGET', KEYS[1], 'w', 'n')
local w, n = tonumber(s[1]), tonumber(s[2]) or 0
if w == nil or n == 0 or idx > w then
  w, n = idx, 0
end -- idx < w: the clock went back; stay in the newer window
local finish = (w + 1) * window
local reset = 0
if n > 0 then reset = finish - now end
local want = cost
if cost == 0 then want = 1 end
if n + want > limit then
  return {0, limit - n, finish - now, reset, 0}
end
if cost == 0 then
  return {1, limit - n, 0, reset, 0}
end
n = n + cost
redis.call('HSET', KEYS[1], 'w', int(w), 'n', int(n))
redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil((finish - now) / 1000)))
return {1, limit - n, 0, finish - now, 0}
