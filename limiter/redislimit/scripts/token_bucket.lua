-- Token bucket with lazy refill; mirrors tokenBucket.take in limiter/algorithms.go.
-- KEYS[1] = rl:{key}:policy:tb, a hash {tokens = fractional tokens as a
--           string (a Lua number returned to Redis would be cut to an
--           integer), ts = time of tokens (µs)}
-- ARGV: now_us ('' = Redis TIME), cost (0 = peek), capacity, refill_per_second
-- returns {allowed, remaining, retry_after_us, reset_after_us, delay_us}
local cost, cap, rate = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local function int(x) return string.format('%.0f', x) end
-- tokens a bucket may be short of a whole number and hold it: tokenSlack in algorithms.go
local slack = 1e-9 + cap * 2^-50
local function holds(tokens, want) return tokens >= want - slack end
local function whole(tokens) return math.floor(tokens + slack) end

-- one formula for refilling and for checking a computed wait
local function refill(tokens, elapsed)
  return math.min(cap, tokens + elapsed * rate / 1e6)
end
local function wait_for(tokens, want)
  if holds(tokens, want) then return 0 end
  local d = math.ceil((want - tokens) * 1e6 / rate)
  -- float rounding can put the estimate off either way: settle on the
  -- smallest d the refill formula itself accepts
  local step = 1
  while not holds(refill(tokens, d), want) do
    d = d + step
    step = step * 2
  end
  local i = 0
  while i < 64 and d > 1 and holds(refill(tokens, d - 1), want) do
    d = d - 1
    i = i + 1
  end
  return d
end

-- time to full: a hint (headers, TTL), so no exactness steps
local function until_full(tokens)
  if tokens >= cap then return 0 end
  return math.ceil((cap - tokens) * 1e6 / rate)
end

local s = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(s[1]) or cap
local ts = tonumber(s[2]) or now
if now < ts then now = ts end
tokens = refill(tokens, now - ts)
if cost == 0 then
  local ok, retry = 0, 0
  if holds(tokens, 1) then ok = 1 else retry = wait_for(tokens, 1) end
  return {ok, whole(tokens), retry, until_full(tokens), 0}
end
local ok = 0
if holds(tokens, cost) then
  tokens = math.max(tokens - cost, 0) -- within the slack below cost: none left
  ok = 1
end
local reset = until_full(tokens)
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', int(now))
redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil(reset / 1000)))
local retry = 0
if ok == 0 then retry = wait_for(tokens, cost) end
return {ok, whole(tokens), retry, reset, 0}
