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
-- KEYS[4]  fair mode only: the queue "<lock key>:queue" (see shared.lua)
-- KEYS[5]  fair mode only: the queue's deadlines "<lock key>:queue-deadline"
-- ARGV[5]  "1": floor every token at the server clock, not only a restarted counter's
--          (Redis Cluster: a failover can lose the last increments); "0" or absent: don't
--          (it is left out when nothing follows, keeping the call within the 10 arguments
--          that a client may send before it has authenticated)
-- ARGV[6]  fair mode only: "wait" to join the queue (or keep its place) when blocked,
--          "try" not to
--
-- Sent after base.lua and shared.lua, as one script.
--
-- Fair mode (ARGV[4] must be "0"): a reader may join the readers when no writer is ahead
-- of it in the queue; readers queued together go in together. A reader that is not queued
-- counts as last. Waiters whose deadline has passed are dropped first.
--
-- Replies:
--   token (integer > 0)       acquired: ARGV[1] is a member of the set KEYS[1], whose PTTL is
--                             now at least ARGV[2] (it is never shortened: other readers may
--                             need a longer one); token = KEYS[3] + 1, or the server TIME
--                             in microseconds when that is larger and KEYS[3] was absent or
--                             below 10^15 (or ARGV[5] == "1"), now stored in KEYS[3] with PX
--                             ARGV[3]. Also the
--                             reply when ARGV[1] was already a member (a resent request).
--                             In fair mode "r:" .. ARGV[1] has left the queue.
--   -1 - pttl (integer < 0)   blocked: a writer holds KEYS[1] (pttl is its PTTL in ms) or a
--                             writer waits (KEYS[2] exists; pttl is the intent's PTTL in ms).
--                             In fair mode also when a writer is queued ahead (pttl is then
--                             at most ARGV[2]); pttl is then at most the time until the first
--                             queue deadline, and with ARGV[6] == "wait", "r:" .. ARGV[1] is
--                             queued with the deadline now + ARGV[2].
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

-- Blocked by a waiting writer's intent, or an intent key this protocol does not use; nil
-- when there is no intent.
local function intent_blocks()
    local intent, intent_pttl, refusal = lock_intent(KEYS[2])
    return refusal or (intent and -1 - intent_pttl)
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
        if not tostring(added.err):find('WRONGTYPE', 1, true) then
            -- Refused, not a writer's string (OOM, READONLY): nothing was written, so
            -- the same SADD raises it again as the script's error.
            redis.call('SADD', KEYS[1], ARGV[1])
        end
        return refused()
    end
    local blocked = added == 1 and intent_blocks()
    if blocked then
        redis.call('SREM', KEYS[1], ARGV[1])
        return blocked
    end
    local token = redis.pcall('INCR', KEYS[3])
    if type(token) ~= 'number' or token < 1 or token > 2^53 - 1 then
        if added == 1 then
            redis.call('SREM', KEYS[1], ARGV[1])
        end
        return {'unchecked'}
    end
    local floored = at_least_the_clock(token, ARGV[5] == '1')
    if floored ~= token or token < 1e15 then
        -- The counter was gone (it restarts at the clock, with its TTL), or the clock is
        -- ahead of it on a cluster.
        token = floored
        redis.call('SET', KEYS[3], string.format('%.0f', token), 'PX', ARGV[3])
    end
    pttl_at_least(KEYS[1], ttl, pttl)
    return token
end

-- Checked: every check comes before the first write (in fair mode, dropping the waiters
-- whose deadline has passed comes after a write that OOM refuses: shared.lua).
-- The fence: absent, or a token with a TTL.
local last, fence_refusal = fence_last(KEYS[3])
if fence_refusal then
    return fence_refusal
end

-- The lock: absent or a set of readers (SISMEMBER answers), or (it fails) a writer's
-- string or a foreign type. `blocked` is the reply when something keeps this reader out.
local pttl = redis.call('PTTL', KEYS[1])
local member = 0
local blocked
if pttl ~= -2 then
    member = redis.pcall('SISMEMBER', KEYS[1], ARGV[1])
    if type(member) ~= 'number' then
        member = 0
        blocked = refused()
        if type(blocked) == 'table' then
            return blocked
        end
    elseif pttl == -1 then
        return {'noexpiry', KEYS[1]}
    end
end

-- A waiting writer's intent keeps new readers out.
if not blocked and member == 0 then
    blocked = intent_blocks()
    if type(blocked) == 'table' then
        return blocked
    end
end

-- Fair mode: so does a writer queued ahead.
local queue = KEYS[4] ~= nil and fair_queue()
local queued = 'r:' .. ARGV[1]
if queue then
    local now, refusal = queue.open(KEYS[4], KEYS[5])
    if refusal then
        return refusal
    end
    if not blocked and member == 0 then
        for _, ahead in ipairs(queue.ahead(KEYS[4], queued)) do
            if ahead:sub(1, 2) == 'w:' then
                blocked = -1 - ttl
                break
            end
        end
    end
    if blocked then
        local join = ARGV[6] == 'wait'
        return -1 - queue.blocked(KEYS[4], KEYS[5], queued, now, ttl, -1 - blocked, join)
    end
end
if blocked then
    return blocked
end

-- The token: one more than the last, or from the clock (shared.lua). TIME is read before
-- the first write, so an error there (an ACL without TIME) changes nothing. The SADD is
-- the first write (in fair mode after a purge's ZADD that changes nothing and is refused
-- alike), so out of memory (OOM) refuses the reader with nothing changed, fair or not;
-- leaving the queue comes after it (a removal, which OOM allows).
local token = at_least_the_clock(last + 1, ARGV[5] == '1')
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('SET', KEYS[3], string.format('%.0f', token), 'PX', ARGV[3])
pttl_at_least(KEYS[1], ttl, pttl)
if queue then
    queue.leave(KEYS[4], KEYS[5], queued)
end
return token
