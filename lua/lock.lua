-- lock.lua: take the write lock (one writer, no readers) and mint its fencing token.
--
-- KEYS[1]  lock key: a string holding the writer's id, or a set of reader ids
-- KEYS[2]  lock-intent key: "<lock key>:lock-intent", the id of the writer waiting
--          (or "1", set by the Go package's writers)
-- KEYS[3]  fence key: "<lock key>:fence", the last fencing token minted for KEYS[1]
-- ARGV[1]  lock id: 32 lowercase hex characters
-- ARGV[2]  TTL in milliseconds (positive integer)
-- ARGV[3]  "1": on failure, set the lock intent so new readers stay out; "0": don't
-- ARGV[4]  fence retention in milliseconds (positive integer): the PX of KEYS[3]
-- ARGV[5]  "1": floor every token at the server clock, not only a restarted counter's
--          (Redis Cluster: a failover can lose the last increments); absent: don't (it is
--          left out then, keeping the call within the 10 arguments that a client may send
--          before it has authenticated)
--
-- Replies:
--   token (integer > 0)       acquired: KEYS[1] now holds ARGV[1] with PX ARGV[2]; KEYS[2] is
--                             deleted if it held ARGV[1]; token = KEYS[3] + 1, or the server
--                             TIME in microseconds when that is larger and KEYS[3] was absent
--                             or below 10^15 (or ARGV[5] == "1"), now stored in KEYS[3] with
--                             PX ARGV[4].
--                             Also the reply when KEYS[1] already holds ARGV[1] (a resent
--                             request, or a lock taken without a usable token), whose TTL is
--                             then reset to ARGV[2] (and a new, larger token minted).
--   -1 - pttl (integer < 0)   blocked: another writer or readers hold KEYS[1], whose PTTL is
--                             pttl ms. With ARGV[3] == "1", KEYS[2] holds a writer's id:
--                             ARGV[1] with PX ARGV[2] if it was absent or already ARGV[1];
--                             another waiting writer's intent is left as it is.
--   {"wrongtype", key, type}  key (any of KEYS) holds a type this protocol does not use
--                             (for KEYS[3]: anything but a decimal integer below 2^53 - 1,
--                             "exhausted counter" for 2^53 - 1);
--                             nothing was changed.
--   {"noexpiry", key}         key (any of KEYS) exists with no TTL, so it would never free;
--                             nothing was changed.
--
-- Every check comes before the first write, so an error (OOM, READONLY) changes nothing.

local ttl = tonumber(ARGV[2])

-- The intent: absent (PTTL -2, the common case), or a string with a TTL.
local intent_pttl = redis.call('PTTL', KEYS[2])
local intent
if intent_pttl ~= -2 then
    intent = redis.pcall('GET', KEYS[2])
    if type(intent) ~= 'string' then
        return {'wrongtype', KEYS[2], redis.call('TYPE', KEYS[2])['ok']}
    end
    if intent_pttl == -1 then
        return {'noexpiry', KEYS[2]}
    end
end

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

-- The lock: absent (false), a writer's id, or (GET fails) a set of readers.
local holder = redis.pcall('GET', KEYS[1])
if type(holder) == 'table' then
    local lock_type = redis.call('TYPE', KEYS[1])['ok']
    if lock_type ~= 'set' then
        return {'wrongtype', KEYS[1], lock_type}
    end
end

if holder == false or holder == ARGV[1] then
    -- The token: one more than the last. Tokens minted from the clock are above 10^15
    -- (microseconds since 2001), so a smaller count means the counter was (re)created
    -- since: it restarts at the server clock in microseconds, so tokens keep growing after
    -- KEYS[3] expires or the server restarts empty. TIME is read before the first write,
    -- so an error there (an ACL without TIME) changes nothing. On a cluster every token is
    -- floored at the clock: a failover may have lost the last increments of KEYS[3].
    local token = last + 1
    if token < 1e15 or ARGV[5] == '1' then
        local time = redis.call('TIME')
        token = math.max(token, tonumber(time[1]) * 1000000 + tonumber(time[2]))
    end
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
    if intent == ARGV[1] then
        redis.call('DEL', KEYS[2])
    end
    redis.call('SET', KEYS[3], string.format('%.0f', token), 'PX', ARGV[4])
    return token
end

local pttl = redis.call('PTTL', KEYS[1])
if pttl == -1 then
    return {'noexpiry', KEYS[1]}
end

if ARGV[3] == '1' then
    if intent == nil then
        redis.call('SET', KEYS[2], ARGV[1], 'PX', ttl)
    elseif intent == ARGV[1] then
        redis.call('PEXPIRE', KEYS[2], ttl)
    end
end
return -1 - pttl
