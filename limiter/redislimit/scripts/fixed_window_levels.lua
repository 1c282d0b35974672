-- A fixed window over the levels of one key (limiter.Levels), decided whole: every level
-- is charged, and when any of them is over its limit every charge is taken back in the
-- same script, so a denial at any level charges none (mirrors takeLevels in
-- limiter/memory_levels.go). An admission costs one INCRBY per level, as fixed_window.lua.
-- KEYS[i] = level i's counter of window N, rl:{level 1}:policy:fwl:N:level i: one hash
-- tag, the first level's, so the keys share a Cluster slot and one script may touch them.
-- ARGV: now_us ('' = Redis TIME), cost (0 = peek), start_us, end_us (window N), then
-- limit_i for each KEYS[i]
-- returns {now_us, denied, n_1, ..., n_k}: denied 0 (admitted, or a peek) or the first
-- level without room (1-based), -1 when now is outside window N (nothing touched); n_i the
-- counts, after charging when admitted, as they stand otherwise
local e = tonumber(ARGV[4])
if now < tonumber(ARGV[3]) or now >= e then
  return {now, -1}
end
local cost = tonumber(ARGV[2])
local out = {now, 0}
if cost == 0 then -- peek: read, never create
  for i = 1, #KEYS do
    local n = tonumber(redis.call('GET', KEYS[i]) or '0')
    out[i + 2] = n
    if out[2] == 0 and n + 1 > tonumber(ARGV[4 + i]) then
      out[2] = i
    end
  end
  return out
end
for i = 1, #KEYS do
  local n = redis.call('INCRBY', KEYS[i], cost)
  out[i + 2] = n
  if out[2] == 0 and n > tonumber(ARGV[4 + i]) then
    out[2] = i
  end
end
if out[2] == 0 then
  local ttl = math.max(1, math.ceil((e - now) / 1000))
  for i = 1, #KEYS do
    if out[i + 2] == cost then -- the window's first units: the key lives until it ends
      redis.call('PEXPIRE', KEYS[i], ttl)
    end
  end
  return out
end
for i = 1, #KEYS do -- denied: every charge taken back
  if out[i + 2] == cost then
    redis.call('DEL', KEYS[i])
  else
    redis.call('DECRBY', KEYS[i], cost)
  end
  out[i + 2] = out[i + 2] - cost
end
return out
