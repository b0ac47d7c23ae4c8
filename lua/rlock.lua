-- rlock.lua: take a read lock (many readers, no writer) and mint its fencing token.
--
-- KEYS[1]  lock key: a string holding the writer's id, or a set of reader ids
-- KEYS[2]  lock-intent key: "<lock key>:lock-intent"
-- KEYS[3]  fence key: "<lock key>:fence", the last fencing token minted for KEYS[1]
-- ARGV[1]  lock id: 32 lowercase hex characters
-- ARGV[2]  TTL in milliseconds (positive integer)
-- ARGV[3]  fence retention in milliseconds (positive integer): the PX of KEYS[3]
-- ARGV[4]  "1": the caller saw KEYS[3] hold a valid token before, so it is taken as a
--          counter (INCR) without reading it first; "0": it is checked first
-- ARGV[5]  "1": floor every token at the server clock, not only a restarted counter's
--          (Redis Cluster: a failover can lose the last increments); absent: don't (it is
--          left out then, keeping the call within the 10 arguments that a client may send
--          before it has authenticated)
--
-- Replies:
--   token (integer > 0)       acquired: ARGV[1] is a member of the set KEYS[1], whose PTTL is
--                             now at least ARGV[2] (it is never shortened: other readers may
--                             need a longer one); token = KEYS[3] + 1, or the server TIME
--                             in microseconds when that is larger and KEYS[3] was absent or
--                             below 10^15 (or ARGV[5] == "1"), now stored in KEYS[3] with PX
--                             ARGV[3]. Also the
--                             reply when ARGV[1] was already a member (a resent request).
--   -1 - pttl (integer < 0)   blocked: a writer holds KEYS[1] (pttl is its PTTL in ms) or a
--                             writer waits (KEYS[2] exists; pttl is the intent's PTTL in ms).
--   {"unchecked"}             with ARGV[4] == "1" only: KEYS[3] was not a counter below
--                             2^53 - 1 after all (an integer there was incremented, nothing
--                             else changed); call again with ARGV[4] == "0" for the typed
--                             error.
--   {"wrongtype", key, type}  key (any of KEYS) holds a type this protocol does not use
--                             (for KEYS[3]: anything but a decimal integer below 2^53 - 1,
--                             "exhausted counter" for 2^53 - 1);
--                             nothing was changed.
--   {"noexpiry", key}         key (any of KEYS) exists with no TTL, so it would never free;
--                             nothing was changed.
--
-- With ARGV[4] == "0" every check comes before the first write, so an error (OOM,
-- READONLY) changes nothing. With "1" the SADD comes first and is undone when a check
-- refuses; the INCR of KEYS[3] is not undone (it only makes a later token larger), and
-- KEYS[3]'s TTL is left as it is unless the counter restarts from the clock.

local ttl = tonumber(ARGV[2])

-- A token counted up from `token`, or from the server clock in microseconds when that
-- is larger and `token` is below 10^15: tokens minted from the clock are above 10^15
-- (microseconds since 2001), so a smaller count means the counter was (re)created since
-- (it expired, or the server restarted empty). With ARGV[5] == "1" (a cluster, where a
-- failover may have lost the last increments) every token is floored at the clock.
local function at_least_the_clock(token)
    if token >= 1e15 and ARGV[5] ~= '1' then
        return token
    end
    local time = redis.call('TIME')
    return math.max(token, tonumber(time[1]) * 1000000 + tonumber(time[2]))
end

-- Blocked by a writer's key, or a key this protocol does not use; nothing was changed.
local function refused()
    local lock_type = redis.call('TYPE', KEYS[1])['ok']
    if lock_type ~= 'string' then
        return {'wrongtype', KEYS[1], lock_type}
    end
    local pttl = redis.call('PTTL', KEYS[1])
    if pttl == -1 then
        return {'noexpiry', KEYS[1]}
    end
    return -1 - pttl
end

-- Blocked by a waiting writer's intent, or an intent key this protocol does not use.
local function intent_blocks()
    local intent_type = redis.call('TYPE', KEYS[2])['ok']
    if intent_type ~= 'string' then
        return {'wrongtype', KEYS[2], intent_type}
    end
    local intent_pttl = redis.call('PTTL', KEYS[2])
    if intent_pttl == -1 then
        return {'noexpiry', KEYS[2]}
    end
    return -1 - intent_pttl
end

if ARGV[4] == '1' then
    -- Counting: SADD before the other checks (it fails on a writer's string), undone if
    -- one of them refuses. A script's writes all succeed or the first fails (OOM,
    -- READONLY).
    local pttl = redis.call('PTTL', KEYS[1])
    if pttl == -1 then
        local lock_type = redis.call('TYPE', KEYS[1])['ok']
        if lock_type ~= 'string' and lock_type ~= 'set' then
            return {'wrongtype', KEYS[1], lock_type}
        end
        return {'noexpiry', KEYS[1]}
    end
    local added = redis.pcall('SADD', KEYS[1], ARGV[1])
    if type(added) ~= 'number' then
        return refused()
    end
    if added == 1 and redis.call('EXISTS', KEYS[2]) == 1 then
        redis.call('SREM', KEYS[1], ARGV[1])
        return intent_blocks()
    end
    local token = redis.pcall('INCR', KEYS[3])
    if type(token) ~= 'number' or token < 1 or token > 2^53 - 1 then
        if added == 1 then
            redis.call('SREM', KEYS[1], ARGV[1])
        end
        return {'unchecked'}
    end
    local floored = at_least_the_clock(token)
    if floored ~= token or token < 1e15 then
        -- The counter was gone (it restarts at the clock, with its TTL), or the clock is
        -- ahead of it on a cluster.
        token = floored
        redis.call('SET', KEYS[3], string.format('%.0f', token), 'PX', ARGV[3])
    end
    if pttl < ttl then
        redis.call('PEXPIRE', KEYS[1], ttl)
    end
    return token
end

-- Checked: every check comes before the first write.
-- The fence: absent, or a canonical decimal integer below 2^53 - 1 with a TTL.
local fence = redis.pcall('GET', KEYS[3])
local token = 1
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
    token = tonumber(fence) + 1
end

-- The lock: absent or a set of readers (SISMEMBER answers), or (it fails) a writer's
-- string or a foreign type.
local pttl = redis.call('PTTL', KEYS[1])
local member = 0
if pttl ~= -2 then
    member = redis.pcall('SISMEMBER', KEYS[1], ARGV[1])
    if type(member) ~= 'number' then
        return refused()
    end
    if pttl == -1 then
        return {'noexpiry', KEYS[1]}
    end
end

-- A waiting writer's intent keeps new readers out.
if member == 0 and redis.call('EXISTS', KEYS[2]) == 1 then
    return intent_blocks()
end

-- The token: one more than the last, or from the clock. TIME is read before the first
-- write, so an error there (an ACL without TIME) changes nothing.
token = at_least_the_clock(token)
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('SET', KEYS[3], string.format('%.0f', token), 'PX', ARGV[3])
if pttl < ttl then
    redis.call('PEXPIRE', KEYS[1], ttl)
end
return token
