#!lua
-- Several fixed-window decisions in one call: fixed_window.lua for each
-- KEYS[i], with ARGV[4i-3..4i] = now_us ('' = Redis TIME, read once for the
-- call), cost, limit, window_us. For a single redis-server only: the keys may
-- be in different hash slots.
-- returns the 5 values of fixed_window.lua for each key, one flat list
local time
local out = {}
for i = 1, #KEYS do
  local now = ARGV[4 * i - 3]
  if now ~= '' then
    now = tonumber(now)
  else
    if not time then
      local t = redis.call('TIME') -- one clock for every pod: the server's
      time = tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
    now = time
  end
  local cost, limit, window = tonumber(ARGV[4 * i - 2]), tonumber(ARGV[4 * i - 1]), tonumber(ARGV[4 * i])
  local idx = math.floor(now / window)
  local key = KEYS[i] .. ':' .. string.format('%.0f', idx) -- %.0f: tostring keeps 14 digits
  local left = (idx + 1) * window - now
  local o = 5 * i - 5
  out[o + 5] = 0
  if cost == 0 then -- peek: read, never create
    local n = tonumber(redis.call('GET', key) or '0')
    if n + 1 > limit then
      out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 0, limit - n, left, left
    else
      out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 1, limit - n, 0, 0
      if n > 0 then out[o + 4] = left end
    end
  else
    local n = redis.call('INCRBY', key, cost)
    if n > limit then -- denied: nothing is counted
      if n == cost then
        redis.call('DEL', key)
        out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 0, limit, left, 0
      else
        redis.call('DECRBY', key, cost)
        out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 0, limit - n + cost, left, left
      end
    else
      if n == cost then -- the window's first units: the key lives until the window ends
        redis.call('PEXPIRE', key, math.max(1, math.ceil(left / 1000)))
      end
      out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 1, limit - n, 0, left
    end
  end
end
return out
