-- refresh.lua: extend a lock that ARGV[1] still holds.
--
-- KEYS[1]  lock key: a string holding the writer's id, or a set of reader ids; or a
--          semaphore key, a sorted set of permit ids scored by their deadline (server ms)
-- ARGV[1]  lock id: 32 lowercase hex characters
-- ARGV[2]  TTL in milliseconds (positive integer)
--
-- Sent after base.lua, as one script.
--
-- Replies:
--   1  ARGV[1] holds KEYS[1]: a writer's key now has PTTL ARGV[2]; a readers' set has a
--      PTTL of at least ARGV[2] (never shortened, other readers may need a longer one); a
--      permit's deadline is now the server TIME + ARGV[2], and the semaphore key's PTTL at
--      least ARGV[2].
--   0  ARGV[1] does not hold KEYS[1]: the key is gone, holds another id, holds a type
--      this protocol does not use, or holds ARGV[1] as a permit whose deadline has passed
--      (it is removed: the permit ran out, and others may have taken it). Nothing else
--      was changed.

local ttl = tonumber(ARGV[2])
local lock_type = redis.call('TYPE', KEYS[1])['ok']

-- Held as a reader or a permit: the key's PTTL is then raised, never shortened (below).
local held = false
if lock_type == 'string' then
    if redis.call('GET', KEYS[1]) == ARGV[1] then
        redis.call('PEXPIRE', KEYS[1], ttl)
        return 1
    end
elseif lock_type == 'set' then
    held = redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1
elseif lock_type == 'zset' then
    local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
    if deadline then
        local now = now_ms()
        held = tonumber(deadline) > now
        if held then
            redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
        else
            redis.call('ZREM', KEYS[1], ARGV[1])
        end
    end
end
if held then
    pttl_at_least(KEYS[1], ttl)
    return 1
end
return 0
