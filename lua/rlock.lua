-- rlock.lua: take a read lock (many readers, no writer).
--
-- KEYS[1]  lock key: a string holding the writer's id, or a set of reader ids
-- KEYS[2]  lock-intent key: "<lock key>:lock-intent"
-- ARGV[1]  lock id: 32 lowercase hex characters
-- ARGV[2]  TTL in milliseconds (positive integer)
--
-- Replies:
--   {"acquired"}              ARGV[1] is a member of the set KEYS[1], whose PTTL is now at
--                             least ARGV[2] (it is never shortened: other readers may need a
--                             longer one). Also the reply when ARGV[1] was already a member
--                             (a resent request).
--   {"blocked", pttl}         a writer holds KEYS[1] (pttl is its PTTL in ms) or a writer
--                             waits (KEYS[2] exists; pttl is the intent's PTTL in ms).
--   {"wrongtype", key, type}  key (KEYS[1] or KEYS[2]) holds a type this protocol does not
--                             use; nothing was changed.
--   {"noexpiry", key}         key (KEYS[1] or KEYS[2]) exists with no TTL, so it would never
--                             free; nothing was changed.

local ttl = tonumber(ARGV[2])

local lock_type = redis.call('TYPE', KEYS[1])['ok']
local pttl = -2
if lock_type == 'string' or lock_type == 'set' then
    pttl = redis.call('PTTL', KEYS[1])
    if pttl == -1 then
        return {'noexpiry', KEYS[1]}
    end
    if lock_type == 'string' then
        return {'blocked', pttl}
    end
    if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then
        if pttl < ttl then
            redis.call('PEXPIRE', KEYS[1], ttl)
        end
        return {'acquired'}
    end
elseif lock_type ~= 'none' then
    return {'wrongtype', KEYS[1], lock_type}
end

local intent_type = redis.call('TYPE', KEYS[2])['ok']
if intent_type == 'string' then
    local intent_pttl = redis.call('PTTL', KEYS[2])
    if intent_pttl == -1 then
        return {'noexpiry', KEYS[2]}
    end
    return {'blocked', intent_pttl}
elseif intent_type ~= 'none' then
    return {'wrongtype', KEYS[2], intent_type}
end

redis.call('SADD', KEYS[1], ARGV[1])
if pttl < ttl then
    redis.call('PEXPIRE', KEYS[1], ttl)
end
return {'acquired'}
