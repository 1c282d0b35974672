#!lua
-- The opening of every script: redis.go joins it to the front of each of the
-- others, so the shebang and the clock are written once.
-- The shebang (Redis 7) makes Redis refuse a script with OOM before its first
-- write when it is over maxmemory; without it, a script whose first write is a
-- trim was let through to its ZADD past maxmemory.
-- now: ARGV[1] in µs, the caller's clock (Config.ClientClock), or '' for Redis
-- TIME, one clock for every pod: the server's. (fixed_window_batch.lua passes
-- 'c' for the caller's clock, and now stays nil.)
local now = tonumber(ARGV[1])
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
