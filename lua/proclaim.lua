-- proclaim.lua: publish the leader's record of an election while ARGV[1] still holds its
-- lock as the writer (Election::campaign, Leadership::proclaim, and the leader's renewal
-- of the record).
--
-- KEYS[1]  lock key: the election's lock, a string holding the leader's id (a write lock)
-- KEYS[2]  record key: "<lock key>:leader", the leader's record (see ARGV[2])
-- ARGV[1]  lock id: 32 lowercase hex characters
-- ARGV[2]  the record: "<fencing token>:<id>:<value>" (the token in decimal, the id as
--          ARGV[1])
-- ARGV[3]  the record's PX in milliseconds (the fence retention: the record lives as long
--          as the fence counter that numbers the terms, and is believed only while
--          KEYS[1] holds the id it names)
-- ARGV[4]  "1" to publish with SPUBLISH (Redis Cluster's sharded pub/sub: the channel
--          carries the lock key's hash tag, so it is in the lock key's slot; by PUBLISH
--          on a server without it, see base.lua); anything else with PUBLISH
--
-- Sent after base.lua, as one script.
--
-- When KEYS[1] holds ARGV[1] as a writer, KEYS[2] is set to ARGV[2] (PX ARGV[3]) and
-- ARGV[2] is published on the channel named KEYS[2]
-- ("<lock key>:leader"; a channel is not a key), so that observers read the record again.
--
-- Replies:
--   an integer, the sum of
--     1  ARGV[1] held KEYS[1] and KEYS[2] was written
--     2  ARGV[2] was published (not added when the publish failed: the record stands,
--        observers find out at their next read)
--   0                         ARGV[1] does not hold KEYS[1] as a writer (the key is gone,
--                             holds another id, or is a readers' set or a sorted set):
--                             nothing was changed.
--   {"wrongtype", key, type}  KEYS[1] holds a type this protocol does not use (neither a
--                             string, a set nor a sorted set), or KEYS[2] holds another
--                             type than a string; nothing was changed.

local holder = redis.pcall('GET', KEYS[1])
if type(holder) == 'table' then
    local lock_type = redis.call('TYPE', KEYS[1])['ok']
    if lock_type == 'set' or lock_type == 'zset' then
        return 0
    end
    return {'wrongtype', KEYS[1], lock_type}
end
if holder ~= ARGV[1] then
    return 0
end
local record_type = redis.call('TYPE', KEYS[2])['ok']
if record_type ~= 'none' and record_type ~= 'string' then
    return {'wrongtype', KEYS[2], record_type}
end

redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])

-- Publishing only helps observers: a failure (no ACL right on the channel) must not turn
-- a record that was written into an error.
local published = publish(KEYS[2], ARGV[2], ARGV[4])
if type(published) == 'number' then
    return 3
end
return 1
