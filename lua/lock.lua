-- lock.lua: take the write lock (one writer, no readers) and mint its fencing token.
--
-- KEYS[1]  lock key: a string holding the writer's id, or a set of reader ids
-- KEYS[2]  lock-intent key: "<lock key>:lock-intent"
-- KEYS[3]  fence key: "<lock key>:fence", the last fencing token minted for KEYS[1]
-- ARGV[1]  lock id: 32 lowercase hex characters
-- ARGV[2]  TTL in milliseconds (positive integer)
-- ARGV[3]  "1": on failure, set the lock intent so new readers stay out; "0": don't
-- ARGV[4]  fence retention in milliseconds (positive integer): the PX of KEYS[3]
--
-- Replies:
--   {"acquired", token}       KEYS[1] now holds ARGV[1] with PX ARGV[2]; KEYS[2] is deleted;
--                             token = max(KEYS[3] + 1, server TIME in microseconds), now
--                             stored in KEYS[3] with PX ARGV[4]. Also the reply when KEYS[1]
--                             already holds ARGV[1] (a resent request), whose TTL is then
--                             reset to ARGV[2] (and a new, larger token minted).
--   {"blocked", pttl}         another writer or readers hold KEYS[1]; pttl is its PTTL in ms.
--                             With ARGV[3] == "1", KEYS[2] = "1" with a PTTL of at least ARGV[2].
--   {"wrongtype", key, type}  key (any of KEYS) holds a type this protocol does not use
--                             (for KEYS[3]: anything but a decimal integer below 2^53 - 1,
--                             "exhausted counter" for 2^53 - 1);
--                             nothing was changed.
--   {"noexpiry", key}         key (any of KEYS) exists with no TTL, so it would never free;
--                             nothing was changed.
--
-- Every check comes before the first write, so an error (OOM, READONLY) changes nothing.

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

local fence_type = redis.call('TYPE', KEYS[3])['ok']
local last = 0
if fence_type ~= 'none' then
    local fence = fence_type == 'string' and redis.call('GET', KEYS[3])
    -- Only what these scripts store: a decimal integer with no sign, point or leading
    -- zero, at most 2^53 - 1, the largest integer a Lua number holds exactly.
    if not fence or not fence:match('^[1-9]%d*$') or #fence > 16
        or tonumber(fence) > 2^53 - 1 then
        return {'wrongtype', KEYS[3], fence_type == 'string' and 'non-integer string' or fence_type}
    end
    if tonumber(fence) == 2^53 - 1 then
        return {'wrongtype', KEYS[3], 'exhausted counter'}
    end
    if redis.call('PTTL', KEYS[3]) == -1 then
        return {'noexpiry', KEYS[3]}
    end
    last = tonumber(fence)
end

local lock_type = redis.call('TYPE', KEYS[1])['ok']
local mine = false
if lock_type == 'string' then
    mine = redis.call('GET', KEYS[1]) == ARGV[1]
elseif lock_type ~= 'set' and lock_type ~= 'none' then
    return {'wrongtype', KEYS[1], lock_type}
end

if lock_type == 'none' or mine then
    -- The token: one more than the last, and at least the server clock in microseconds,
    -- so tokens keep growing after KEYS[3] expires or the server restarts empty. TIME is
    -- read before the first write, so an error there (an ACL without TIME) changes nothing.
    local time = redis.call('TIME')
    local token = math.max(last + 1, tonumber(time[1]) * 1000000 + tonumber(time[2]))
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
    if intent_type == 'string' then
        redis.call('DEL', KEYS[2])
    end
    redis.call('SET', KEYS[3], string.format('%.0f', token), 'PX', ARGV[4])
    return {'acquired', token}
end

local pttl = redis.call('PTTL', KEYS[1])
if pttl == -1 then
    return {'noexpiry', KEYS[1]}
end

if ARGV[3] == '1' and redis.call('PTTL', KEYS[2]) < ttl then
    redis.call('SET', KEYS[2], '1', 'PX', ttl)
end
return {'blocked', pttl}
