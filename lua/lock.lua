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
-- Fair mode: the lock goes to the writer first in the queue. A writer that is not queued
-- counts as last, so it takes a free lock only when nobody waits; a writer that already
-- holds KEYS[1] (a resent request) keeps it. Waiters whose deadline has passed are dropped
-- first.
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
--                             In fair mode "w:" .. ARGV[1] has left the queue.
--   -1 - pttl (integer < 0)   blocked: another writer or readers hold KEYS[1], whose PTTL is
--                             pttl ms. With ARGV[3] == "1", KEYS[2] holds a writer's id:
--                             ARGV[1] with PX ARGV[2] if it was absent or already ARGV[1];
--                             another waiting writer's intent is left as it is. In fair
--                             mode also when waiters are ahead (pttl is then at most ARGV[2],
--                             and at most the time until the first queue deadline), and with
--                             ARGV[6] == "wait", "w:" .. ARGV[1] is queued with the deadline
--                             now + ARGV[2].
--   {"wrongtype", key, type}  key (any of KEYS) holds a type this protocol does not use
--                             (for KEYS[3]: anything but a decimal integer below 2^53 - 1,
--                             "exhausted counter" for 2^53 - 1);
--                             nothing was changed.
--   {"noexpiry", key}         key (any of KEYS) exists with no TTL, so it would never free;
--                             nothing was changed.
--
-- Every check comes before the first write, so an error (OOM, READONLY) changes nothing.

local ttl = tonumber(ARGV[2])

-- The intent: absent (the common case), or a string with a TTL.
local intent, _, intent_refusal = lock_intent(KEYS[2])
if intent_refusal then
    return intent_refusal
end

-- The fence: absent, or a token with a TTL.
local last, fence_refusal = fence_last(KEYS[3])
if fence_refusal then
    return fence_refusal
end

-- The lock: absent (false), a writer's id, or (GET fails) a set of readers.
local holder = redis.pcall('GET', KEYS[1])
if type(holder) == 'table' then
    local lock_type = redis.call('TYPE', KEYS[1])['ok']
    if lock_type ~= 'set' then
        return {'wrongtype', KEYS[1], lock_type}
    end
end
-- Another holder's PTTL: how long it blocks.
local pttl = ttl
if holder ~= false and holder ~= ARGV[1] then
    pttl = redis.call('PTTL', KEYS[1])
    if pttl == -1 then
        return {'noexpiry', KEYS[1]}
    end
end

-- Fair mode: the queue, checked before the first write; TIME is read here too.
local fair = KEYS[4] ~= nil
local queue = fair and fair_queue()
local member = 'w:' .. ARGV[1]
local now
if fair then
    local refusal
    now, refusal = queue.open(KEYS[4], KEYS[5])
    if refusal then
        return refusal
    end
end

if holder == ARGV[1] or (holder == false and (not fair or queue.rank(KEYS[4], member) == 0)) then
    -- The token: one more than the last, or from the clock (shared.lua). TIME is read
    -- before the first write (in fair mode by now_ms), so an error there (an ACL without
    -- TIME) changes nothing.
    local token = at_least_the_clock(last + 1, ARGV[5] == '1')
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
    if intent == ARGV[1] then
        redis.call('DEL', KEYS[2])
    end
    redis.call('SET', KEYS[3], string.format('%.0f', token), 'PX', ARGV[4])
    if fair then
        queue.leave(KEYS[4], KEYS[5], member)
    end
    return token
end

-- Blocked: by a holder, or in fair mode by the waiters ahead of a free lock. Joining the
-- queue comes before the intent's PEXPIRE (which OOM allows, and after which Redis lets
-- every write through), so OOM refuses a blocked request that would join the queue or
-- set an intent with nothing changed; renewing its own intent needs no memory.
if fair then
    pttl = queue.blocked(KEYS[4], KEYS[5], member, now, ttl, pttl, ARGV[6] == 'wait')
end
if ARGV[3] == '1' then
    if intent == nil then
        redis.call('SET', KEYS[2], ARGV[1], 'PX', ttl)
    elseif intent == ARGV[1] then
        redis.call('PEXPIRE', KEYS[2], ttl)
    end
end
return -1 - pttl
