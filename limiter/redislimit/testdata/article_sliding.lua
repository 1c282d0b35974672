-- KEYS[1] = rl:{user}   ARGV: window_ms, limit, request_id
local t = redis.call('TIME')                                  -- one clock: the Redis server's
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window) -- drop entries outside the window
local n = redis.call('ZCARD', KEYS[1])
if n >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, n, tonumber(oldest[2]) + window - now}           -- denied, count, retry-after ms
end
redis.call('ZADD', KEYS[1], now, ARGV[3])                     -- member must be unique
redis.call('PEXPIRE', KEYS[1], window)
return {1, n + 1, 0}
