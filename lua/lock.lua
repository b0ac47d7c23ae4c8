-- lock.lua: take the write lock (one writer, no readers).
--
-- KEYS[1]  lock key: a string holding the writer's id, or a set of reader ids
-- KEYS[2]  lock-intent key: "<lock key>:lock-intent"
-- ARGV[1]  lock id: 32 lowercase hex characters
-- ARGV[2]  TTL in milliseconds (positive integer)
-- ARGV[3]  "1": on failure, set the lock intent so new readers stay out; "0": don't
--
-- Replies:
--   {"acquired"}              KEYS[1] now holds ARGV[1] with PX ARGV[2]; KEYS[2] is deleted.
--                             Also the reply when KEYS[1] already holds ARGV[1] (a resent
--                             request), whose TTL is then reset to ARGV[2].
--   {"blocked", pttl}         another writer or readers hold KEYS[1]; pttl is its PTTL in ms.
--                             With ARGV[3] == "1", KEYS[2] = "1" with a PTTL of at least ARGV[2].
--   {"wrongtype", key, type}  key (KEYS[1] or KEYS[2]) holds a type this protocol does not
--                             use; nothing was changed.
--   {"noexpiry", key}         key (KEYS[1] or KEYS[2]) exists with no TTL, so it would never
--                             free; nothing was changed.

local ttl = tonumber(ARGV[2])

local intent_type = redis.call('TYPE', KEYS[2])['ok']
if intent_type ~= 'none' then
    if intent_type ~= 'string' then
        return {'wrongtype', KEYS[2], intent_type}
    end
    if redis.call('PTTL', KEYS[2]) == -1 then
        return {'noexpiry', KEYS[2]}
    end
end

local lock_type = redis.call('TYPE', KEYS[1])['ok']
if lock_type == 'none' then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
    if intent_type == 'string' then
        redis.call('DEL', KEYS[2])
    end
    return {'acquired'}
end

if lock_type == 'string' then
    if redis.call('GET', KEYS[1]) == ARGV[1] then
        redis.call('PEXPIRE', KEYS[1], ttl)
        if intent_type == 'string' then
            redis.call('DEL', KEYS[2])
        end
        return {'acquired'}
    end
elseif lock_type ~= 'set' then
    return {'wrongtype', KEYS[1], lock_type}
end

local pttl = redis.call('PTTL', KEYS[1])
if pttl == -1 then
    return {'noexpiry', KEYS[1]}
end

if ARGV[3] == '1' and redis.call('PTTL', KEYS[2]) < ttl then
    redis.call('SET', KEYS[2], '1', 'PX', ttl)
end
return {'blocked', pttl}
