-- upgrade.lua: turn the upgradable read lock ARGV[1] holds into the write lock held by
-- the same id, once it is the only reader, in one step, so that no writer comes between
-- the read and the write; or ("plain") give up the right to upgrade and stay a reader.
--
-- KEYS[1]  lock key: a string holding the writer's id, or a set of reader ids
-- KEYS[2]  lock-intent key: "<lock key>:lock-intent"
-- KEYS[3]  fence key: "<lock key>:fence", the last fencing token minted for KEYS[1]
-- KEYS[4]  upgrader key: "<lock key>:upgrader" (see upgradable.lua)
-- ARGV[1]  lock id: 32 lowercase hex characters
-- ARGV[2]  TTL in milliseconds (positive integer)
-- ARGV[3]  fence retention in milliseconds (positive integer): the PX of KEYS[3]
-- ARGV[4]  "wait": upgrade, and while other readers remain set the lock intent so that no
--          new reader joins; "try": upgrade only if no other reader remains, setting
--          nothing; "plain": stay a plain reader (KEYS[4] is deleted)
-- ARGV[5]  release channel: "<lock key>:released"
-- ARGV[6]  "1" to publish with SPUBLISH (Redis Cluster's sharded pub/sub, as in
--          unlock.lua); anything else with PUBLISH
-- ARGV[7]  "1": floor every token at the server clock (Redis Cluster), as in lock.lua;
--          "0" or absent: don't
--
-- Sent after base.lua and shared.lua, as one script.
--
-- Replies:
-- for "wait" and "try":
--   token (integer > 0)       upgraded: KEYS[1] is now a string holding ARGV[1] with PX
--                             ARGV[2]; KEYS[4] is deleted, and KEYS[2] if it held ARGV[1];
--                             the token is minted as lock.lua mints it, larger than every
--                             token of KEYS[3] before. Also the reply when KEYS[1] already
--                             was a string holding ARGV[1] (a resent upgrade): its PTTL is
--                             reset and a new, larger token minted.
--   -1 - pttl (integer < 0)   blocked: other readers are members of KEYS[1], whose PTTL is
--                             pttl ms. With "wait", KEYS[2] holds a writer's id: ARGV[1]
--                             with PX ARGV[2] if it was absent or already ARGV[1]; another
--                             waiting writer's intent is left as it is (it keeps new
--                             readers out all the same).
--   0                         ARGV[1] does not hold KEYS[1]: not a member of it (nor, for
--                             a resent upgrade, its string). Nothing was changed.
--   {"reader"}                ARGV[1] is a member of KEYS[1] but KEYS[4] does not hold it:
--                             a reader, no longer the upgradable one (its upgrader key was
--                             lost, and another may have taken it). Nothing was changed.
-- for "plain":
--   1  ARGV[1] is a member of KEYS[1]: KEYS[4] was deleted if it held ARGV[1] (and
--      ARGV[1] published on ARGV[5], so that a waiting upgradable reader may go in).
--   0  ARGV[1] is not a member of KEYS[1]; nothing was changed.
-- and for every operation:
--   {"wrongtype", key, type}  key holds a type this protocol does not use; nothing changed.
--   {"noexpiry", key}         key exists with no TTL; nothing was changed.
--
-- Every check comes before the first write, so an error (OOM, READONLY) changes nothing;
-- an upgrade's first write is a DEL, which OOM lets through, and every write after it.

local ttl = tonumber(ARGV[2])
local op = ARGV[4]

-- The lock: a string (GET answers), or a set or a foreign type (GET fails).
local holder = redis.pcall('GET', KEYS[1])
local resent = holder == ARGV[1]
if type(holder) == 'table' then
    local lock_type = redis.call('TYPE', KEYS[1])['ok']
    if lock_type ~= 'set' then
        return {'wrongtype', KEYS[1], lock_type}
    end
    if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then
        return 0
    end
elseif not resent or op == 'plain' then
    -- Absent, another writer's string, or (plain) this id's own string: not a reader.
    return 0
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -1 then
    return {'noexpiry', KEYS[1]}
end

-- The upgrader key: a string with a TTL, or absent.
local upgrader, _, upgrader_refusal = lock_intent(KEYS[4])
if upgrader_refusal then
    return upgrader_refusal
end

if op == 'plain' then
    if upgrader == ARGV[1] then
        redis.call('DEL', KEYS[4])
        publish(ARGV[5], ARGV[1], ARGV[6])
    end
    return 1
end
if not resent and upgrader ~= ARGV[1] then
    return {'reader'}
end

-- The intent and the fence, checked before the first write.
local intent, _, intent_refusal = lock_intent(KEYS[2])
if intent_refusal then
    return intent_refusal
end
local last, fence_refusal = fence_last(KEYS[3])
if fence_refusal then
    return fence_refusal
end

if resent or redis.call('SCARD', KEYS[1]) == 1 then
    -- TIME is read before the first write, so an error there changes nothing.
    local token = at_least_the_clock(last + 1, ARGV[7] == '1')
    redis.call('DEL', KEYS[1])
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
    if upgrader == ARGV[1] then
        redis.call('DEL', KEYS[4])
    end
    if intent == ARGV[1] then
        redis.call('DEL', KEYS[2])
    end
    redis.call('SET', KEYS[3], string.format('%.0f', token), 'PX', ARGV[3])
    return token
end

-- Blocked by the other readers: with "wait", keep new readers out while they leave.
if op == 'wait' then
    if intent == nil then
        redis.call('SET', KEYS[2], ARGV[1], 'PX', ttl)
    elseif intent == ARGV[1] then
        redis.call('PEXPIRE', KEYS[2], ttl)
    end
end
return -1 - pttl
