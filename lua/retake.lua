-- retake.lua: take a lock back under the same id on a node of a quorum that lost it (the
-- key expired there, or the node restarted empty), unless the node's fence counter has
-- granted a larger token since (quorum mode's refresh).
--
-- KEYS[1]  lock key: a string holding the writer's id, or a set of reader ids
-- KEYS[2]  lock-intent key: "<lock key>:lock-intent"
-- KEYS[3]  fence key: "<lock key>:fence", the last fencing token minted for KEYS[1]
-- KEYS[4]  granted key: "<lock key>:fence-granted", the last token granted to a holder
--          on this node (fence.lua), or the mark of a forced release (force_unlock.lua)
-- ARGV[1]  lock id: 32 lowercase hex characters
-- ARGV[2]  TTL in milliseconds (positive integer)
-- ARGV[3]  "w" to take it back as the writer, "r" as a reader
-- ARGV[4]  the guard's token: its fencing token, or a larger token this node minted for
--          ARGV[1] (positive integer below 2^53 - 1)
-- ARGV[5]  fence retention in milliseconds (positive integer): the PX of KEYS[3]
--
-- Sent after base.lua and shared.lua, as one script. Rust only (quorum mode).
--
-- After the guard's acquisition, every node it holds has a granted token of at most
-- ARGV[4] (the second round raised them to the guard's token, fence.lua). A node
-- restarted empty has none, or a smaller one, and is taken back. A granted token larger
-- than ARGV[4] means the lock was released by force there (force_unlock.lua marks it) or
-- another holder was granted it since: it is not taken back. The counter alone (KEYS[3])
-- does not refuse: every first round raises it, also another candidate's that won no
-- majority and released what it took, which leaves the lock ours to take back. No token
-- is minted: KEYS[3] and KEYS[4] are raised to ARGV[4] if they are below, as fence.lua
-- does.
--
-- Replies:
--   1                         KEYS[1] holds ARGV[1] (as ARGV[3] says) with a PTTL of at
--                             least ARGV[2]: taken back, or it already did; KEYS[3] and
--                             KEYS[4] hold at least ARGV[4] (set with PX ARGV[5] if they
--                             were below). As the writer, KEYS[2] is deleted if it held
--                             ARGV[1].
--   0                         not taken back, nothing changed: KEYS[4] holds a token
--                             larger than ARGV[4]; or another writer holds KEYS[1]; or, as
--                             the writer, readers hold it.
--   {"wrongtype", key, type}  key (any of KEYS) holds a type this protocol does not use
--                             (for KEYS[3]: anything but a decimal integer below 2^53 - 1,
--                             "exhausted counter" for 2^53 - 1); nothing was changed.
--   {"noexpiry", key}         key (any of KEYS) exists with no TTL; nothing was changed.
--
-- Every check comes before the first write, so an error (OOM, READONLY) changes nothing.

local ttl = tonumber(ARGV[2])
local token = tonumber(ARGV[4])
local writer = ARGV[3] == 'w'

-- The fence and the granted token: absent, or a token with a TTL; a token granted past
-- the guard's, the lock stays lost.
local last, fence_refusal = fence_last(KEYS[3])
if fence_refusal then
    return fence_refusal
end
local granted, granted_refusal = fence_last(KEYS[4])
if granted_refusal then
    return granted_refusal
end
if granted > token then
    return 0
end

-- The intent: absent (the common case), or a string with a TTL.
local intent, _, intent_refusal = lock_intent(KEYS[2])
if intent_refusal then
    return intent_refusal
end

-- The lock: absent, the writer's string or the readers' set; `mine` when it holds ARGV[1]
-- as ARGV[3] says.
local pttl = redis.call('PTTL', KEYS[1])
local mine = false
if pttl ~= -2 then
    local lock_type = redis.call('TYPE', KEYS[1])['ok']
    if lock_type ~= 'string' and lock_type ~= 'set' then
        return {'wrongtype', KEYS[1], lock_type}
    end
    if pttl == -1 then
        return {'noexpiry', KEYS[1]}
    end
    if writer then
        if lock_type == 'set' or redis.call('GET', KEYS[1]) ~= ARGV[1] then
            return 0
        end
        mine = true
    else
        if lock_type == 'string' then
            return 0
        end
        mine = redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1
    end
end
-- A waiting writer's intent keeps new readers out, not this one: it holds the lock on a
-- majority of the nodes already, and the writer waits for its release either way.

if writer then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
    if intent == ARGV[1] then
        redis.call('DEL', KEYS[2])
    end
else
    redis.call('SADD', KEYS[1], ARGV[1])
    pttl_at_least(KEYS[1], ttl, pttl)
end
if last < token then
    redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[5])
end
if granted < token then
    redis.call('SET', KEYS[4], ARGV[4], 'PX', ARGV[5])
end
return 1
