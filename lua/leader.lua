-- leader.lua: read who leads an election, in one step that writes nothing
-- (Election::leader, Election::observe).
--
-- KEYS[1]  lock key: the election's lock, a string holding the leader's id (a write lock)
-- KEYS[2]  record key: "<lock key>:leader", the record proclaim.lua writes:
--          "<fencing token>:<id>:<value>"
--
-- Sent after base.lua, as one script. Every command it runs is a read.
--
-- Replies:
--   {holder, pttl, record}
--     holder  the writer's id in KEYS[1]; "" when KEYS[1] does not exist or is a readers'
--             set or a sorted set (no writer holds it)
--     pttl    KEYS[1]'s PTTL in milliseconds; -2 when it does not exist
--     record  the string at KEYS[2]; "" when it does not exist
--   The record names the leader only when its id is the holder: a record left by an
--   earlier leader (whose lock expired or was released) names an id KEYS[1] no longer
--   holds.
--   {"wrongtype", key, type}  KEYS[1] holds a type this protocol does not use (neither a
--                             string, a set nor a sorted set), or KEYS[2] holds another
--                             type than a string
--   {"noexpiry", key}         KEYS[1] exists with no TTL

local holder = redis.pcall('GET', KEYS[1])
if type(holder) == 'table' then
    local lock_type = redis.call('TYPE', KEYS[1])['ok']
    if lock_type ~= 'set' and lock_type ~= 'zset' then
        return {'wrongtype', KEYS[1], lock_type}
    end
    holder = ''
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -1 then
    return {'noexpiry', KEYS[1]}
end
local record = redis.pcall('GET', KEYS[2])
if type(record) == 'table' then
    return {'wrongtype', KEYS[2], redis.call('TYPE', KEYS[2])['ok']}
end
return {holder or '', pttl, record or ''}
