-- Several fixed-window decisions in one call: fixed_window.lua for each KEYS[i]
-- (rl:{key}:policy:fw:N, declared). ARGV[1] = '' (Redis TIME, read once for the
-- call by prelude.lua) or 'c' (the caller's clock: now stays nil); ARGV[2] = P, the
-- number of windows, then P triples limit, lo_us, end_us: window j is [start, end)
-- with lo its start (or with 'c', the decisions' now); then for each KEYS[i], j
-- (cost 1) or -j and its cost.
-- For a single redis-server only: the keys may be in different hash slots.
-- returns {now_us (0 with 'c'), n_1, ..., n_k}: each n as fixed_window.lua's
-- (-1: KEYS[i] is not the window of now, untouched)
local limit, ttl = {}, {} -- ttl false: window j is not now's
local a = 3
for j = 1, tonumber(ARGV[2]) do
  local lo, e = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local t = now or lo
  limit[j] = tonumber(ARGV[a])
  ttl[j] = t >= lo and t < e and math.max(1, math.ceil((e - t) / 1000))
  a = a + 3
end
local out = {now or 0}
for i = 1, #KEYS do
  local j, cost = tonumber(ARGV[a]), 1
  a = a + 1
  if j < 0 then
    j, cost = -j, tonumber(ARGV[a])
    a = a + 1
  end
  if not ttl[j] then
    out[i + 1] = -1
  elseif cost == 0 then -- peek: read, never create
    out[i + 1] = tonumber(redis.call('GET', KEYS[i]) or '0')
  else
    -- fixed_window.lua's INCRBY and take-back, written again: a shared local function
    -- would be a closure per call (see leaky_bucket.lua)
    local key = KEYS[i]
    local n = redis.call('INCRBY', key, cost)
    if n > limit[j] then -- denied: nothing is counted
      if n == cost then
        redis.call('DEL', key)
      else
        redis.call('DECRBY', key, cost)
      end
    elseif n == cost then -- the window's first units: the key lives until the window ends
      redis.call('PEXPIRE', key, ttl[j])
    end
    out[i + 1] = n
  end
end
return out
