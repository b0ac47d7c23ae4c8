-- upgradable.lua: take an upgradable read lock: a read lock (the reader's id joins the
-- readers' set, as rlock.lua adds it) that at most one reader of the key holds at a time,
-- marked by the upgrader key, and that upgrade.lua can turn into the write lock.
--
-- KEYS[1]  lock key: a string holding the writer's id, or a set of reader ids
-- KEYS[2]  lock-intent key: "<lock key>:lock-intent"
-- KEYS[3]  fence key: "<lock key>:fence", the last fencing token minted for KEYS[1]
-- KEYS[4]  upgrader key: "<lock key>:upgrader", the id of the upgradable reader; it
--          counts only while that id is a member of KEYS[1] (a departed upgrader's key
--          is ignored, and expires)
-- ARGV[1]  lock id: 32 lowercase hex characters
-- ARGV[2]  TTL in milliseconds (positive integer)
-- ARGV[3]  fence retention in milliseconds (positive integer): the PX of KEYS[3]
-- ARGV[4]  "1": floor every token at the server clock (Redis Cluster), as in rlock.lua;
--          "0" or absent: don't
--
-- Sent after base.lua and shared.lua, as one script.
--
-- Replies:
--   token (integer > 0)       acquired: ARGV[1] is a member of the set KEYS[1], whose PTTL
--                             is now at least ARGV[2] (never shortened), and KEYS[4] holds
--                             ARGV[1] with PX ARGV[2]; the token is minted as rlock.lua
--                             mints it. Also the reply when ARGV[1] already was a member
--                             and KEYS[4] held it (a resent request).
--   -1 - pttl (integer < 0)   blocked: a writer holds KEYS[1] (pttl is its PTTL in ms), a
--                             writer waits (KEYS[2] exists; pttl is its PTTL), or another
--                             upgradable reader holds KEYS[4] while its id is a member of
--                             KEYS[1] (pttl is KEYS[4]'s PTTL). Nothing was changed.
--   {"wrongtype", key, type}  key (any of KEYS) holds a type this protocol does not use
--                             (for KEYS[3]: anything but a decimal integer below 2^53 - 1);
--                             nothing was changed.
--   {"noexpiry", key}         key (any of KEYS) exists with no TTL; nothing was changed.
--
-- Every check comes before the first write, so an error (OOM, READONLY) changes nothing.

local ttl = tonumber(ARGV[2])

-- The fence: absent, or a token with a TTL.
local last, fence_refusal = fence_last(KEYS[3])
if fence_refusal then
    return fence_refusal
end

-- The lock: absent, a set of readers (SISMEMBER answers), or (it fails) a writer's
-- string or a foreign type.
local pttl = redis.call('PTTL', KEYS[1])
local member = 0
if pttl ~= -2 then
    member = redis.pcall('SISMEMBER', KEYS[1], ARGV[1])
    if type(member) ~= 'number' then
        local lock_type = redis.call('TYPE', KEYS[1])['ok']
        if lock_type ~= 'string' then
            return {'wrongtype', KEYS[1], lock_type}
        end
        if pttl == -1 then
            return {'noexpiry', KEYS[1]}
        end
        return -1 - pttl
    end
    if pttl == -1 then
        return {'noexpiry', KEYS[1]}
    end
end

-- The upgrader: another upgradable reader that still reads keeps this one out.
local upgrader, upgrader_pttl, upgrader_refusal = lock_intent(KEYS[4])
if upgrader_refusal then
    return upgrader_refusal
end
if upgrader ~= nil and upgrader ~= ARGV[1] and pttl ~= -2
    and redis.call('SISMEMBER', KEYS[1], upgrader) == 1 then
    return -1 - upgrader_pttl
end

-- A waiting writer's intent keeps new readers out.
if member == 0 then
    local intent, intent_pttl, intent_refusal = lock_intent(KEYS[2])
    if intent_refusal then
        return intent_refusal
    end
    if intent then
        return -1 - intent_pttl
    end
end

-- The token: one more than the last, or from the clock (shared.lua), read before the
-- first write. The SADD is the first write, so OOM refuses with nothing changed.
local token = at_least_the_clock(last + 1, ARGV[4] == '1')
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('SET', KEYS[4], ARGV[1], 'PX', ttl)
redis.call('SET', KEYS[3], string.format('%.0f', token), 'PX', ARGV[3])
pttl_at_least(KEYS[1], ttl, pttl)
return token
