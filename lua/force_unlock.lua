-- force_unlock.lua: remove every holder of a lock at once, whoever they are (an
-- operator's forced release, RwMutex::force_unlock and Semaphore::force_unlock), and tell
-- waiters that the lock may now be taken.
--
-- KEYS[1]  lock key: a string holding the writer's id, or a set of reader ids; or a
--          semaphore key, a sorted set of permit ids scored by their deadline (server ms)
-- KEYS[2]  fence key: "<lock key>:fence", the last fencing token minted for KEYS[1]
-- KEYS[3]  granted key: "<lock key>:fence-granted", the last token granted to a holder
--          in quorum mode (fence.lua, retake.lua)
-- KEYS[4]  optional: the holders' descriptions "<lock key>:holders" (see describe.lua),
--          deleted with KEYS[1] when it is a hash: every holder it describes is removed
-- ARGV[1]  release channel: "<lock key>:released"
-- ARGV[2]  the message published on ARGV[1]: an id of 32 lowercase hex characters, drawn
--          for this call (it names no holder: waiters only look again)
-- ARGV[3]  "1" to publish with SPUBLISH (Redis Cluster's sharded pub/sub: the channel
--          carries the lock key's hash tag, so it is in the lock key's slot; by PUBLISH
--          on a server without it, see base.lua); anything else, or absent, with PUBLISH
--
-- Sent after base.lua, as one script.
--
-- KEYS[1] is deleted, and the fence counter at KEYS[2] raised by one (INCR, its TTL
-- kept) when KEYS[1] existed and KEYS[2] holds a counter (a decimal integer below
-- 2^53 - 1); an absent fence key is not created, and anything else there is left as it
-- is. The raise marks the forced release: KEYS[3] is set to the raised counter, with the
-- counter's TTL, so that it is larger than the token of every holder that was removed and
-- quorum mode's refresh does not take the lock back on this node (retake.lua); and the
-- next token is larger than every earlier one. The
-- lock-intent key and the fair queue belong to waiters and are left as they are.
--
-- Replies:
--   an integer, the sum of (KEYS[2] raised as said above whenever it is not 0)
--     1  something was held: KEYS[1] was a writer's string, a readers' set, or a sorted
--        set with at least one entry whose deadline is after the server TIME.
--     2  KEYS[1] was deleted (a sorted set whose entries had all run out too) and
--        ARGV[2] was published on ARGV[1] (not added when the publish failed: the
--        release stands, waiters find out by their timers).
--   0                         KEYS[1] does not exist: nothing was changed.
--   {"wrongtype", key, type}  KEYS[1] holds a type this protocol does not use (neither a
--                             string, a set nor a sorted set); nothing was changed.
--   {"noexpiry", key}         KEYS[1] exists with no TTL: no request of the crate left it
--                             (each sets a TTL), so it is not one of its locks; nothing
--                             was changed.
--
-- Every check comes before the first write, so an error (OOM, READONLY) changes nothing.

local lock_type = redis.call('TYPE', KEYS[1])['ok']
if lock_type == 'none' then
    return 0
end
if lock_type ~= 'string' and lock_type ~= 'set' and lock_type ~= 'zset' then
    return {'wrongtype', KEYS[1], lock_type}
end
if redis.call('PTTL', KEYS[1]) == -1 then
    return {'noexpiry', KEYS[1]}
end

-- A writer's string and a readers' set are held while they exist; a semaphore while one
-- of its permits has a deadline after the server's clock.
local held = 1
if lock_type == 'zset' then
    local live = redis.call('ZCOUNT', KEYS[1], '(' .. now_ms(), '+inf')
    if live == 0 then
        held = 0
    end
end

-- The mark of a forced release: the counter, if there is one, goes up by one (INCR keeps
-- its TTL), and the granted token follows it. Before the DEL, so that an error there
-- (OOM, READONLY) changes nothing of the lock.
local fence = redis.pcall('GET', KEYS[2])
if type(fence) == 'string' and fence:match('^[1-9]%d*$') and #fence <= 16
    and tonumber(fence) < 2^53 - 1 then
    local fence_pttl = redis.call('PTTL', KEYS[2])
    if fence_pttl > 0 then
        redis.call('SET', KEYS[3], string.format('%.0f', tonumber(fence) + 1), 'PX', fence_pttl)
    end
    redis.call('INCR', KEYS[2])
end
redis.call('DEL', KEYS[1])
if KEYS[4] ~= nil and redis.call('TYPE', KEYS[4])['ok'] == 'hash' then
    redis.call('DEL', KEYS[4])
end

-- Publishing only helps waiters: a failure (no ACL right on the channel) must not turn a
-- release that happened into an error.
local published = publish(ARGV[1], ARGV[2], ARGV[3])
if type(published) == 'number' then
    return held + 2
end
return held
