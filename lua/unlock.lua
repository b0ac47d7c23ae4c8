-- unlock.lua: release the lock held by ARGV[1]; optionally clear a lock intent.
--
-- KEYS[1]  lock key: a string holding the writer's id, or a set of reader ids
-- KEYS[2]  optional lock-intent key, passed only by a waiting writer that gives up after
--          setting the intent; deleted when it is "1" with a TTL
-- ARGV[1]  lock id: 32 lowercase hex characters
--
-- Replies:
--   1  ARGV[1] held KEYS[1] and was removed: a writer's key is deleted; a reader's id is
--      removed from the set (Redis deletes a set when its last member goes).
--   0  ARGV[1] did not hold KEYS[1]; KEYS[1] was not changed.

local released = 0
local lock_type = redis.call('TYPE', KEYS[1])['ok']

if lock_type == 'string' then
    if redis.call('GET', KEYS[1]) == ARGV[1] then
        redis.call('DEL', KEYS[1])
        released = 1
    end
elseif lock_type == 'set' then
    released = redis.call('SREM', KEYS[1], ARGV[1])
end

-- Only an intent this protocol sets ("1" with a TTL) is deleted; anything else is left.
if KEYS[2] ~= nil and redis.call('TYPE', KEYS[2])['ok'] == 'string'
    and redis.call('GET', KEYS[2]) == '1' and redis.call('PTTL', KEYS[2]) ~= -1 then
    redis.call('DEL', KEYS[2])
end
return released
