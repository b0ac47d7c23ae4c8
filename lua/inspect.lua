-- inspect.lua: read the whole state of one lock or semaphore key at once, writing nothing
-- (RwMutex::inspect, Semaphore::inspect).
--
-- KEYS[1]  lock key: a string holding the writer's id, or a set of reader ids; or a
--          semaphore key, a sorted set of permit ids scored by their deadline (server ms)
-- KEYS[2]  lock-intent key: "<lock key>:lock-intent", the id of the writer waiting
--          (or "1", set by the Go package's writers)
-- KEYS[3]  fence key: "<lock key>:fence", the last fencing token minted for KEYS[1]
-- KEYS[4]  the fair queue "<lock key>:queue" (see shared.lua): waiters scored by their
--          arrival ticket
-- KEYS[5]  the queue's deadlines "<lock key>:queue-deadline": the same waiters scored by
--          the server time (ms) by which each must attempt again
-- KEYS[6]  optional: the holders' descriptions "<lock key>:holders" (see describe.lua)
-- ARGV[1]  "lock": KEYS[1] is a read-write lock's (a string or a set); "semaphore": a
--          semaphore's (a sorted set)
--
-- Sent after base.lua, as one script. Every command it runs is a read. It reads the
-- server clock (TIME) once, and compares every deadline with that one reading.
--
-- Replies:
--   {type, pttl, intent, fence, holders, queue, now, intent_value, pttls, permits,
--    tickets, deadlines, descriptions}
--     type          KEYS[1]'s Redis TYPE: "none", "string", "set" or "zset"
--     pttl          KEYS[1]'s PTTL in milliseconds; -2 when it does not exist
--     intent        1 when KEYS[2] exists, else 0
--     fence         the token stored in KEYS[3]; 0 when it does not exist
--     holders       the writer's id ("string"); the readers' ids ("set"), in no order;
--                   the ids of the permits whose deadline is after `now` ("zset"), first
--                   to run out first
--     queue         the members of KEYS[4] in queue order, but those whose deadline in
--                   KEYS[5] is not after `now` (the next fair request drops them); empty
--                   when KEYS[4] does not exist
--     now           the server clock (TIME) in whole milliseconds, as base.lua's now_ms
--                   reads it: the time every deadline above and below is compared with
--     intent_value  KEYS[2]'s value; "" when it does not exist
--     pttls         {PTTL of KEYS[2], of KEYS[3], of KEYS[4], of KEYS[5]}, each in
--                   milliseconds; -2 for a key that does not exist
--     permits       every member of KEYS[1] with its score (its deadline), expired or
--                   not, flat: {id, score, id, score, ...}, lowest score first ("zset");
--                   else empty
--     tickets       every member of KEYS[4] with its score (its arrival ticket), flat, in
--                   queue order, whatever its deadline; empty when it does not exist
--     deadlines     every member of KEYS[5] with its score (its deadline), flat, earliest
--                   first; empty when it does not exist
--     descriptions  the descriptions in KEYS[6] of the ids in `holders` only, flat:
--                   {id, text, id, text, ...}, in `holders`' order; an id without one is
--                   left out; empty when KEYS[6] is not passed, absent or not a hash
--     (each score as Redis gives it: a decimal string, or "inf" / "-inf")
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

-- Every member of the sorted set `key` with its score, flat, lowest score first; empty
-- when `key` does not exist.
local function scored(key)
    return redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
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
local fence_pttl = -2
local fence_value = redis.pcall('GET', KEYS[3])
if fence_value then
    if type(fence_value) ~= 'string' or not fence_value:match('^[1-9]%d*$')
        or #fence_value > 16 or tonumber(fence_value) > 2^53 - 1 then
        local found = type(fence_value) == 'string' and 'non-integer string'
            or redis.call('TYPE', KEYS[3])['ok']
        return {'wrongtype', KEYS[3], found}
    end
    fence_pttl = redis.call('PTTL', KEYS[3])
    if fence_pttl == -1 then
        return {'noexpiry', KEYS[3]}
    end
    fence = tonumber(fence_value)
end

local queue_pttl, queue_refusal = usable(KEYS[4], zset_type)
if queue_refusal then
    return queue_refusal
end
local deadline_pttl, deadline_refusal = usable(KEYS[5], zset_type)
if deadline_refusal then
    return deadline_refusal
end

local now = now_ms()
local holders = {}
local permits = {}
if lock_type == 'string' then
    holders = {redis.call('GET', KEYS[1])}
elseif lock_type == 'set' then
    holders = redis.call('SMEMBERS', KEYS[1])
elseif lock_type == 'zset' then
    holders = redis.call('ZRANGEBYSCORE', KEYS[1], string.format('(%.0f', now), '+inf')
    permits = scored(KEYS[1])
end

local tickets = scored(KEYS[4])
local queue = {}
if #tickets > 0 then
    local gone = {}
    local passed = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', string.format('%.0f', now))
    for _, member in ipairs(passed) do
        gone[member] = true
    end
    for at = 1, #tickets, 2 do
        if not gone[tickets[at]] then
            queue[#queue + 1] = tickets[at]
        end
    end
end

-- The current holders' descriptions only: a field of an id that holds nothing is not read.
local descriptions = {}
if KEYS[6] ~= nil and #holders > 0 then
    local texts = redis.pcall('HMGET', KEYS[6], unpack(holders))
    if type(texts) == 'table' and texts.err == nil then
        for i, holder in ipairs(holders) do
            if texts[i] then
                descriptions[#descriptions + 1] = holder
                descriptions[#descriptions + 1] = texts[i]
            end
        end
    end
end

local intent = 0
local intent_value = ''
if intent_pttl ~= -2 then
    intent = 1
    intent_value = redis.call('GET', KEYS[2])
end
return {lock_type, pttl, intent, fence, holders, queue, now, intent_value,
    {intent_pttl, fence_pttl, queue_pttl, deadline_pttl}, permits, tickets,
    scored(KEYS[5]), descriptions}
