-- Fixed window counter; mirrors fixedWindow.take in limiter/algorithms.go.
-- KEYS[1] = rl:{key}:policy:fw:N, the integer string counting the units of window
-- number N (declared, as Redis wants every key a script touches), which expires at
-- the window's end. The caller names N from its clock (and Redis's last TIME); the
-- script checks it against TIME. One INCRBY decides an admission: the least work Redis
-- can do per decision (envoyproxy/ratelimit's INCRBY + EXPIRE, in one call); the
-- caller derives remaining, retry and reset from the count.
-- ARGV: now_us ('' = Redis TIME), cost (0 = peek), limit, start_us, end_us (window N)
-- returns {now_us, n}: n the count after INCRBY (over limit: denied, and taken back),
-- the count for a peek, or -1 when now is outside window N (nothing is touched: the
-- caller asks again for the window of now_us)
local e = tonumber(ARGV[5])
if now < tonumber(ARGV[4]) or now >= e then
  return {now, -1}
end
local key, cost = KEYS[1], tonumber(ARGV[2])
if cost == 0 then -- peek: read, never create
  return {now, tonumber(redis.call('GET', key) or '0')}
end
local n = redis.call('INCRBY', key, cost)
if n > tonumber(ARGV[3]) then -- denied: nothing is counted
  if n == cost then
    redis.call('DEL', key)
  else
    redis.call('DECRBY', key, cost)
  end
elseif n == cost then -- the window's first units: the key lives until the window ends
  redis.call('PEXPIRE', key, math.max(1, math.ceil((e - now) / 1000)))
end
return {now, n}
