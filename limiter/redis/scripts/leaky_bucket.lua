-- Leaky bucket as a meter (GCRA, as nginx limit_req and redis_rate); mirrors
-- gcra.take in limiter/algorithms.go.
-- KEYS[1] = rl:{key}:policy:lb, a string: the theoretical arrival time (µs,
--           fractional, kept as a string)
-- ARGV: now_us ('' = Redis TIME), cost (0 = peek), capacity (burst),
--       leak_per_second, max_delay_us (0 = police; > 0 = shape: admit with
--       a delay up to this bound instead of denying)
-- returns {allowed, remaining, retry_after_us, reset_after_us, delay_us}
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local cost, burst, rate, max_delay = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local interval = 1e6 / rate
local burst_off = burst * interval

local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local want = cost
if cost == 0 then want = 1 end
local new_tat = tat + want * interval
local allow_at = new_tat - burst_off
local function remaining(t)
  local r = math.floor((now - t + burst_off) / interval)
  if r < 0 then r = 0 end
  return r
end
-- integer replies truncate: round durations up so a wait is never short
local c = math.ceil
if now >= allow_at or allow_at - now <= max_delay then
  local delay = allow_at - now
  if delay < 0 then delay = 0 end
  if cost == 0 then
    return {1, remaining(tat), 0, c(tat - now), c(delay)}
  end
  redis.call('SET', KEYS[1], string.format('%.17g', new_tat), 'PX', math.max(1, c((new_tat - now) / 1000)))
  return {1, remaining(new_tat), 0, c(new_tat - now), c(delay)}
end
return {0, remaining(tat), c(allow_at - now - max_delay), c(tat - now), 0}
