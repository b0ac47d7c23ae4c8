-- rlock.lua: take a read lock (many readers, no writer) and mint its fencing token.
--
-- KEYS[1]  lock key: a string holding the writer's id, or a set of reader ids
-- KEYS[2]  lock-intent key: "<lock key>:lock-intent"
-- KEYS[3]  fence key: "<lock key>:fence", the last fencing token minted for KEYS[1]
-- ARGV[1]  lock id: 32 lowercase hex characters
-- ARGV[2]  TTL in milliseconds (positive integer)
-- ARGV[3]  fence retention in milliseconds (positive integer): the PX of KEYS[3]
--
-- Replies:
--   {"acquired", token}       ARGV[1] is a member of the set KEYS[1], whose PTTL is now at
--                             least ARGV[2] (it is never shortened: other readers may need a
--                             longer one); token = max(KEYS[3] + 1, server TIME in
--                             microseconds), now stored in KEYS[3] with PX ARGV[3]. Also the
--                             reply when ARGV[1] was already a member (a resent request).
--   {"blocked", pttl}         a writer holds KEYS[1] (pttl is its PTTL in ms) or a writer
--                             waits (KEYS[2] exists; pttl is the intent's PTTL in ms).
--   {"wrongtype", key, type}  key (any of KEYS) holds a type this protocol does not use
--                             (for KEYS[3]: anything but a decimal integer below 2^53 - 1,
--                             "exhausted counter" for 2^53 - 1);
--                             nothing was changed.
--   {"noexpiry", key}         key (any of KEYS) exists with no TTL, so it would never free;
--                             nothing was changed.
--
-- Every check comes before the first write, so an error (OOM, READONLY) changes nothing.

local ttl = tonumber(ARGV[2])

-- The fence: absent, or a canonical decimal integer below 2^53 - 1 with a TTL.
local fence = redis.pcall('GET', KEYS[3])
local last = 0
if fence then
    -- Only what these scripts store: a decimal integer with no sign, point or leading
    -- zero, at most 2^53 - 1, the largest integer a Lua number holds exactly.
    if type(fence) ~= 'string' or not fence:match('^[1-9]%d*$') or #fence > 16
        or tonumber(fence) > 2^53 - 1 then
        local found = type(fence) == 'string' and 'non-integer string'
            or redis.call('TYPE', KEYS[3])['ok']
        return {'wrongtype', KEYS[3], found}
    end
    if tonumber(fence) == 2^53 - 1 then
        return {'wrongtype', KEYS[3], 'exhausted counter'}
    end
    if redis.call('PTTL', KEYS[3]) == -1 then
        return {'noexpiry', KEYS[3]}
    end
    last = tonumber(fence)
end

-- The lock: absent or a set of readers (SISMEMBER answers), or (it fails) a writer's
-- string or a foreign type.
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -1 then
    local lock_type = redis.call('TYPE', KEYS[1])['ok']
    if lock_type ~= 'string' and lock_type ~= 'set' then
        return {'wrongtype', KEYS[1], lock_type}
    end
    return {'noexpiry', KEYS[1]}
end
local member = 0
if pttl ~= -2 then
    member = redis.pcall('SISMEMBER', KEYS[1], ARGV[1])
    if type(member) == 'table' then
        local lock_type = redis.call('TYPE', KEYS[1])['ok']
        if lock_type == 'string' then
            return {'blocked', pttl}
        end
        return {'wrongtype', KEYS[1], lock_type}
    end
end

if member == 0 then
    local intent_pttl = redis.call('PTTL', KEYS[2])
    if intent_pttl ~= -2 then
        local intent_type = redis.call('TYPE', KEYS[2])['ok']
        if intent_type ~= 'string' then
            return {'wrongtype', KEYS[2], intent_type}
        end
        if intent_pttl == -1 then
            return {'noexpiry', KEYS[2]}
        end
        return {'blocked', intent_pttl}
    end
end

-- The token, as in lock.lua; TIME is read before the first write.
local time = redis.call('TIME')
local token = math.max(last + 1, tonumber(time[1]) * 1000000 + tonumber(time[2]))
redis.call('SADD', KEYS[1], ARGV[1])
if pttl < ttl then
    redis.call('PEXPIRE', KEYS[1], ttl)
end
redis.call('SET', KEYS[3], string.format('%.0f', token), 'PX', ARGV[3])
return {'acquired', token}
