-- inspect.lua: read the whole state of one lock or semaphore key at once, writing nothing
-- (RwMutex::inspect, Semaphore::inspect).
--
-- KEYS[1]  lock key: a string holding the writer's id, or a set of reader ids; or a
--          semaphore key, a sorted set of permit ids scored by their deadline (server ms)
-- KEYS[2]  lock-intent key: "<lock key>:lock-intent", the id of the writer waiting
--          (or "1", set by the Go package's writers)
-- KEYS[3]  fence key: "<lock key>:fence", the last fencing token minted for KEYS[1]
-- KEYS[4]  the fair queue "<lock key>:queue" (see shared.lua)
-- KEYS[5]  the queue's deadlines "<lock key>:queue-deadline"
-- ARGV[1]  "lock": KEYS[1] is a read-write lock's (a string or a set); "semaphore": a
--          semaphore's (a sorted set)
--
-- Sent after base.lua, as one script. Every command it runs is a read.
--
-- Replies:
--   {type, pttl, intent, fence, holders, queue}
--     type      KEYS[1]'s Redis TYPE: "none", "string", "set" or "zset"
--     pttl      KEYS[1]'s PTTL in milliseconds; -2 when it does not exist
--     intent    1 when KEYS[2] exists, else 0
--     fence     the token stored in KEYS[3]; 0 when it does not exist
--     holders   the writer's id ("string"); the readers' ids ("set"), in no order; the
--               ids of the permits whose deadline is after the server TIME ("zset"),
--               first to run out first
--     queue     the members of KEYS[4] in queue order, but those whose deadline in
--               KEYS[5] is not after the server TIME (the next fair request drops
--               them); empty when KEYS[4] does not exist
--   {"wrongtype", key, type}  key (any of KEYS) holds a type this protocol does not use
--                             (for KEYS[1]: a sorted set with ARGV[1] == "lock", a string
--                             or a set with ARGV[1] == "semaphore"; for KEYS[3]: anything
--                             but a decimal integer below 2^53, "non-integer string")
--   {"noexpiry", key}         key (any of KEYS) exists with no TTL

-- The PTTL of `key` (-2 when it does not exist), nil and its TYPE ("none" when it does
-- not exist); or nil and the error reply when it exists with a type `types` does not
-- name, or with no TTL.
local function usable(key, types)
    local pttl = redis.call('PTTL', key)
    if pttl == -2 then
        return pttl, nil, 'none'
    end
    local found = redis.call('TYPE', key)['ok']
    if not types[found] then
        return nil, {'wrongtype', key, found}
    end
    if pttl == -1 then
        return nil, {'noexpiry', key}
    end
    return pttl, nil, found
end

local lock_types = {string = true, set = true}
if ARGV[1] == 'semaphore' then
    lock_types = {zset = true}
end
local string_type = {string = true}
local zset_type = {zset = true}

local pttl, refusal, lock_type = usable(KEYS[1], lock_types)
if refusal then
    return refusal
end
local intent_pttl, intent_refusal = usable(KEYS[2], string_type)
if intent_refusal then
    return intent_refusal
end

-- The fence: absent, or a decimal integer as the scripts write one (shared.lua).
local fence = 0
local fence_value = redis.pcall('GET', KEYS[3])
if fence_value then
    if type(fence_value) ~= 'string' or not fence_value:match('^[1-9]%d*$')
        or #fence_value > 16 or tonumber(fence_value) > 2^53 - 1 then
        local found = type(fence_value) == 'string' and 'non-integer string'
            or redis.call('TYPE', KEYS[3])['ok']
        return {'wrongtype', KEYS[3], found}
    end
    if redis.call('PTTL', KEYS[3]) == -1 then
        return {'noexpiry', KEYS[3]}
    end
    fence = tonumber(fence_value)
end

local queue_pttl, queue_refusal = usable(KEYS[4], zset_type)
if queue_refusal then
    return queue_refusal
end
local _, deadline_refusal = usable(KEYS[5], zset_type)
if deadline_refusal then
    return deadline_refusal
end

local holders = {}
local now = nil
if lock_type == 'string' then
    holders = {redis.call('GET', KEYS[1])}
elseif lock_type == 'set' then
    holders = redis.call('SMEMBERS', KEYS[1])
elseif lock_type == 'zset' then
    now = now_ms()
    holders = redis.call('ZRANGEBYSCORE', KEYS[1], string.format('(%.0f', now), '+inf')
end

local queue = {}
if queue_pttl ~= -2 then
    now = now or now_ms()
    local gone = {}
    local passed = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', string.format('%.0f', now))
    for _, member in ipairs(passed) do
        gone[member] = true
    end
    for _, member in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
        if not gone[member] then
            queue[#queue + 1] = member
        end
    end
end

local intent = 0
if intent_pttl ~= -2 then
    intent = 1
end
return {lock_type, pttl, intent, fence, holders, queue}
