-- unlock.lua: release the lock held by ARGV[1], optionally clear its lock intent, and
-- tell waiters when the lock may now be taken.
--
-- KEYS[1]  lock key: a string holding the writer's id, or a set of reader ids; or a
--          semaphore key, a sorted set of permit ids scored by their deadline (server ms)
-- KEYS[2]  optional lock-intent key, passed only by a waiting writer that gives up after
--          setting the intent (and by a fair waiter that gives up, and an upgradable
--          reader); deleted only when it holds ARGV[1]
-- KEYS[3]  optional, with KEYS[2] and KEYS[4]: the fair queue "<lock key>:queue", passed
--          by a fair waiter that gives up; "<ARGV[3]>:<ARGV[1]>" leaves it. With ARGV[3]
--          "u" (and no KEYS[4]): the upgrader key "<lock key>:upgrader", deleted only when
--          it holds ARGV[1]
-- KEYS[4]  optional: the queue's deadlines "<lock key>:queue-deadline"
-- ARGV[1]  lock id: 32 lowercase hex characters
-- ARGV[2]  release channel: "<lock key>:released"
-- ARGV[3]  "w" when ARGV[1] is a writer's id, "r" when a reader's, "u" when an upgradable
--          reader's (removed as a reader's), "p" when a permit's
-- ARGV[4]  "1" to publish with SPUBLISH (Redis Cluster's sharded pub/sub: the channel
--          carries the lock key's hash tag, so it is in the lock key's slot; by PUBLISH
--          on a server without it, see base.lua); anything else, or absent, with PUBLISH
-- ARGV[5]  optional: "1" when the last of KEYS (after those above) is the holders'
--          descriptions "<lock key>:holders" (see describe.lua): ARGV[1]'s field is
--          deleted from it (HDEL; a key of another type is left as it is), whether or not
--          ARGV[1] held KEYS[1]. Anything else, or absent: no such key
--
-- Sent after base.lua, as one script.
--
-- Replies: an integer, the sum of
--   1  ARGV[1] held KEYS[1] and was removed: a writer's key is deleted; a reader's id is
--      removed from the set (Redis deletes a set when its last member goes); a permit's
--      id is removed from the sorted set (not counted when its deadline had passed, but
--      removed all the same).
--   2  the lock became free (a writer's key deleted, the last reader gone), one reader
--      is left (an upgradable reader may be waiting to upgrade), a permit was returned,
--      the intent or the upgrader key ARGV[1] held was deleted, or ARGV[1] left the fair
--      queue;
--      and ARGV[1] was published on ARGV[2] (not added when the publish failed: the
--      release stands, waiters find out by their timers).
-- 0 means ARGV[1] did not hold KEYS[1] (which was not changed, but for removing ARGV[1]'s
-- run-out permit) and nothing was published.

local released = 0
local freed = false

-- The holders' descriptions, when passed, are the last key and not one of KEYS[2..4].
local nkeys = #KEYS
if ARGV[5] == '1' then
    redis.pcall('HDEL', KEYS[nkeys], ARGV[1])
    nkeys = nkeys - 1
end

if ARGV[3] == 'w' then
    -- GET fails on a set or a foreign type: then no writer's id is there.
    if redis.pcall('GET', KEYS[1]) == ARGV[1] then
        redis.call('DEL', KEYS[1])
        released = 1
        freed = true
    end
elseif ARGV[3] == 'p' then
    -- ZSCORE fails on another type: then no permit is there.
    local deadline = redis.pcall('ZSCORE', KEYS[1], ARGV[1])
    if type(deadline) == 'string' then
        redis.call('ZREM', KEYS[1], ARGV[1])
        if tonumber(deadline) > now_ms() then
            released = 1
        end
        freed = true
    end
else
    -- SREM fails on a string or a foreign type: then no reader's id is there. One
    -- reader left may be an upgradable reader waiting for the others to leave.
    if redis.pcall('SREM', KEYS[1], ARGV[1]) == 1 then
        released = 1
        freed = redis.call('SCARD', KEYS[1]) <= 1
    end
    if ARGV[3] == 'u' and nkeys >= 3 and redis.pcall('GET', KEYS[3]) == ARGV[1] then
        redis.call('DEL', KEYS[3])
        freed = true
    end
end

-- Only this writer's own intent is deleted: another writer may still need its own.
if nkeys >= 2 and redis.pcall('GET', KEYS[2]) == ARGV[1] then
    redis.call('DEL', KEYS[2])
    freed = true
end

-- A fair waiter that gives up leaves the queue: those behind it may go now.
if nkeys >= 4 then
    local member = ARGV[3] .. ':' .. ARGV[1]
    if redis.pcall('ZREM', KEYS[3], member) == 1 then
        freed = true
    end
    redis.pcall('ZREM', KEYS[4], member)
end

-- Publishing only helps waiters: a failure (no ACL right on the channel) must not turn a
-- release that happened into an error.
if freed then
    local published = publish(ARGV[2], ARGV[1], ARGV[4])
    if type(published) == 'number' then
        return released + 2
    end
end
return released
