-- Sliding window counter; mirrors slidingCounter.take in limiter/algorithms.go.
-- KEYS[1] = rl:{key}:policy:sc, a hash {w = window index, c = units in w,
--           p = units in w - 1}
-- ARGV: now_us ('' = Redis TIME), cost (0 = peek), limit, window_us
-- estimate = floor(p * (window - elapsed) / window) + c; admit while
-- estimate + cost <= limit. limit * window_us < 2^53 keeps this exact.
-- returns {allowed, remaining, retry_after_us, reset_after_us, delay_us}
local cost, limit, window = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local function int(x) return string.format('%.0f', x) end

local s = redis.call('HMGET', KEYS[1], 'w', 'c', 'p')
local w, cur, prev = tonumber(s[1]), tonumber(s[2]) or 0, tonumber(s[3]) or 0
local idx = math.floor(now / window)
if w == nil or (cur == 0 and prev == 0) then
  w = idx
elseif idx == w + 1 then
  w, prev, cur = idx, cur, 0
elseif idx > w + 1 then
  w, prev, cur = idx, 0, 0
elseif idx < w then
  now = w * window -- the clock went back
end
idx = w
local e = now - idx * window
local est = math.floor(prev * (window - e) / window) + cur
local want = cost
if cost == 0 then want = 1 end
local ok = est + want <= limit
if ok and cost > 0 then
  cur = cur + cost
  est = est + cost
end
local expires = now
if cur > 0 then
  expires = (idx + 2) * window
elseif prev > 0 then
  expires = (idx + 1) * window
end
if ok then
  if cost > 0 then
    redis.call('HSET', KEYS[1], 'w', int(w), 'c', int(cur), 'p', int(prev))
    redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil((expires - now) / 1000)))
  end
  return {1, limit - est, 0, expires - now, 0}
end
-- smallest elapsed in [0, window] at which floor(n * (window - e) / window) <= k
local function decayed_below(n, k)
  if n == 0 then return 0 end
  local q = math.floor(((k + 1) * window - 1) / n)
  if q >= window then return 0 end
  return window - q
end
local retry = 0
local k = limit - want - cur
if k >= 0 and prev > 0 then
  local at = decayed_below(prev, k)
  if at < window then retry = at - e end
end
if retry <= 0 then
  -- not within this window: at the next one, cur becomes prev and decays
  retry = window - e + decayed_below(cur, limit - want)
end
return {0, limit - est, retry, expires - now, 0}
