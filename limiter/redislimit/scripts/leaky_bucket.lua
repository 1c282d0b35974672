-- Leaky bucket as a meter (GCRA, as nginx limit_req and redis_rate); mirrors
-- gcra.take in limiter/algorithms.go.
-- KEYS[1] = rl:{key}:policy:lb, a string: the theoretical arrival time (µs,
--           fractional, kept as a string)
-- ARGV: now_us ('' = Redis TIME), cost (0 = peek), capacity (burst),
--       leak_per_second, max_delay_us (0 = police; > 0 = shape: admit with
--       a delay up to this bound instead of denying)
-- returns {allowed, remaining, retry_after_us, reset_after_us, delay_us}
-- (No local functions: a closure per call costs the Lua GC on a hot path.)
local cost, burst, rate, max_delay = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local interval = 1e6 / rate
local burst_off = burst * interval
local ceil, floor = math.ceil, math.floor

local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local want = cost
if cost == 0 then want = 1 end
local new_tat = tat + want * interval
local allow_at = new_tat - burst_off
-- integer replies truncate: durations are rounded up so a wait is never short
if now >= allow_at or allow_at - now <= max_delay then
  local delay = allow_at - now
  if delay < 0 then delay = 0 end
  local t = tat -- a peek reports the state as it is
  if cost > 0 then
    t = new_tat
    local ttl = ceil((new_tat - now) / 1000)
    if ttl < 1 then ttl = 1 end
    redis.call('SET', KEYS[1], string.format('%.17g', new_tat), 'PX', ttl)
  end
  local rem = floor((now - t + burst_off) / interval)
  if rem < 0 then rem = 0 end
  return {1, rem, 0, ceil(t - now), ceil(delay)}
end
local rem = floor((now - tat + burst_off) / interval)
if rem < 0 then rem = 0 end
return {0, rem, ceil(allow_at - now - max_delay), ceil(tat - now), 0}
