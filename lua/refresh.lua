-- refresh.lua: extend a lock that ARGV[1] still holds.
--
-- KEYS[1]  lock key: a string holding the writer's id, or a set of reader ids
-- ARGV[1]  lock id: 32 lowercase hex characters
-- ARGV[2]  TTL in milliseconds (positive integer)
--
-- Replies:
--   1  ARGV[1] holds KEYS[1]: a writer's key now has PTTL ARGV[2]; a readers' set has a
--      PTTL of at least ARGV[2] (never shortened, other readers may need a longer one).
--   0  ARGV[1] does not hold KEYS[1]: the key is gone, holds another id, or holds a type
--      this protocol does not use. Nothing was changed.

local ttl = tonumber(ARGV[2])
local lock_type = redis.call('TYPE', KEYS[1])['ok']

if lock_type == 'string' then
    if redis.call('GET', KEYS[1]) == ARGV[1] then
        redis.call('PEXPIRE', KEYS[1], ttl)
        return 1
    end
elseif lock_type == 'set' then
    if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then
        if redis.call('PTTL', KEYS[1]) < ttl then
            redis.call('PEXPIRE', KEYS[1], ttl)
        end
        return 1
    end
end
return 0
