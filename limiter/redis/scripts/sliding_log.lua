-- Sliding window log; mirrors slidingLog.take in limiter/algorithms.go.
-- KEYS[1] = rl:{key}:policy:sl, a sorted set: score = admission time (µs),
--           member = unique request id (a timestamp member would let two
--           requests in the same instant overwrite each other)
-- ARGV: now_us ('' = Redis TIME), cost (0 = peek), limit, window_us, member id
-- returns {allowed, remaining, retry_after_us, reset_after_us, delay_us}
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local cost, limit, window = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local key = KEYS[1]
local function int(x) return string.format('%.0f', x) end

local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
local newest = tonumber(last[2])
if newest ~= nil and newest > now then now = newest end -- clock went back: keep order
-- The window is (now - window, now]: an entry exactly window old has left.
redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - window))
local n = redis.call('ZCARD', key)
local reset = 0
if n > 0 then reset = newest + window - now end
local want = cost
if cost == 0 then want = 1 end
if n + want > limit then
  -- the (n + want - limit)-th oldest entry has to leave the window first
  local i = n + want - limit - 1
  local e = redis.call('ZRANGE', key, i, i, 'WITHSCORES')
  return {0, limit - n, tonumber(e[2]) + window - now, reset, 0}
end
if cost == 0 then
  return {1, limit - n, 0, reset, 0}
end
local score, args = int(now), {}
for i = 1, cost do
  args[#args + 1] = score
  args[#args + 1] = ARGV[5] .. ':' .. i
  if #args >= 1000 or i == cost then -- bounded unpack: Lua's C stack is small
    redis.call('ZADD', key, unpack(args))
    args = {}
  end
end
redis.call('PEXPIRE', key, math.max(1, math.ceil(window / 1000)))
return {1, limit - n - cost, 0, window, 0}
