-- downgrade.lua: turn the write lock ARGV[1] holds into a read lock held by the same id,
-- in one step, so that no other writer can take the lock in between.
--
-- KEYS[1]  lock key: a string holding the writer's id, or a set of reader ids
-- ARGV[1]  lock id: 32 lowercase hex characters
-- ARGV[2]  TTL in milliseconds (positive integer)
-- ARGV[3]  release channel: "<lock key>:released"
-- ARGV[4]  "1" to publish with SPUBLISH (Redis Cluster's sharded pub/sub, as in
--          unlock.lua; by PUBLISH on a server without it, see base.lua); anything else,
--          or absent, with PUBLISH
--
-- Sent after base.lua, as one script.
--
-- Replies: an integer, the sum of
--   1  ARGV[1] now holds KEYS[1] as a reader: the string holding ARGV[1] was replaced by
--      a set holding only ARGV[1], with PTTL ARGV[2] (the key layout of a read lock, so
--      other readers, Go's too, can join it). Also the reply when KEYS[1] already was a
--      set holding ARGV[1] (a resent request): its PTTL is raised to ARGV[2] if lower,
--      and nothing else is changed or published.
--   2  added when the string was replaced and ARGV[1] was published on ARGV[3]: waiting
--      readers may now share the lock (a waiting writer that looks finds it read-held
--      and waits on). Not added when the publish failed: the downgrade stands.
-- 0 means ARGV[1] held KEYS[1] in neither form (the key is gone, holds another id, or
-- holds a type this protocol does not use); nothing was changed.
--
-- DEL comes before SADD, so a server out of memory (maxmemory, noeviction) lets the
-- script finish: Redis refuses a command that needs memory only while the script has
-- written nothing yet, and DEL needs none. On a read-only replica the DEL is refused, so
-- nothing changes.

local ttl = tonumber(ARGV[2])

-- GET fails on a set or a foreign type: then no writer's id is there.
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
    redis.call('DEL', KEYS[1])
    redis.call('SADD', KEYS[1], ARGV[1])
    redis.call('PEXPIRE', KEYS[1], ttl)
    -- Publishing only helps waiters: a failure (no ACL right on the channel) must not
    -- turn a downgrade that happened into an error.
    local published = publish(ARGV[3], ARGV[1], ARGV[4])
    if type(published) == 'number' then
        return 3
    end
    return 1
end

-- SISMEMBER fails on a string or a foreign type: then no reader's id is there.
if redis.pcall('SISMEMBER', KEYS[1], ARGV[1]) == 1 then
    pttl_at_least(KEYS[1], ttl)
    return 1
end
return 0
