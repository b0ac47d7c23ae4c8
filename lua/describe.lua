-- describe.lua: record who holds a lock, beside it and with its lifetime (a handle with
-- Builder::describe_holder), right after the attempt that may have taken it.
--
-- KEYS[1..n]          the lock keys the attempt asked for (one, or a set's)
-- KEYS[n+i]           "<KEYS[i]>:holders": the holders' descriptions, a hash, id -> text
-- ARGV[1]             the lock id: 32 lowercase hex characters
-- ARGV[2]             TTL in milliseconds (positive integer)
-- ARGV[3]             the description, but its last field, ending in a tab:
--                     "1\t<host>\t<pid>\t<process start, unix ms, or empty>\t<program>\t<label or empty>\t"
--
-- Sent after base.lua, as one script, in the same request as (pipelined after) each
-- acquire attempt of a describing handle, so it adds no round trip: it describes only
-- what the attempt took.
--
-- For each i whose KEYS[i] ARGV[1] holds now, in any form (the writer's string; a member
-- of the readers' set; a permit whose deadline is after the server clock), the field
-- ARGV[1] of KEYS[n+i] is set to ARGV[3] followed by the server clock in milliseconds
-- (the acquisition time), and KEYS[n+i]'s PTTL raised to at least KEYS[i]'s (ARGV[2]
-- for a KEYS[i] without one): the description lives as long as the lock, and no longer
-- (the attempt that took the lock set its TTL a moment before). A KEYS[n+i]
-- of another type than a hash is left as it is. And for each i whose KEYS[i] is a
-- semaphore's sorted set, the fields of KEYS[n+i] whose id is no longer a permit there,
-- or whose permit's deadline is not after the server clock, are deleted: semaphore.lua
-- purges run-out permits, and their descriptions go with them. Any other key is not
-- changed.
--
-- Replies:
--   an integer: how many keys were described.

local id = ARGV[1]
local ttl = tonumber(ARGV[2])
local n = #KEYS / 2
local now = now_ms()

-- Whether `id` holds `key`, of TYPE `lock_type`, now, in any form.
local function holds(key, lock_type)
    if lock_type == 'string' then
        return redis.call('GET', key) == id
    elseif lock_type == 'set' then
        return redis.call('SISMEMBER', key, id) == 1
    elseif lock_type == 'zset' then
        local deadline = redis.call('ZSCORE', key, id)
        return deadline ~= false and tonumber(deadline) > now
    end
    return false
end

-- Deletes the descriptions in the hash `holders` of the permits of `key` that ran out
-- or are gone.
local function prune(key, holders)
    for _, field in ipairs(redis.call('HKEYS', holders)) do
        local deadline = redis.call('ZSCORE', key, field)
        if deadline == false or tonumber(deadline) <= now then
            redis.call('HDEL', holders, field)
        end
    end
end

local described = 0
for i = 1, n do
    local holders = KEYS[n + i]
    local lock_type = redis.call('TYPE', KEYS[i])['ok']
    if lock_type == 'zset' and redis.call('TYPE', holders)['ok'] == 'hash' then
        prune(KEYS[i], holders)
    end
    if holds(KEYS[i], lock_type) then
        -- HSET fails on a key of another type: then it is not ours to write.
        local set = redis.pcall('HSET', holders, id, ARGV[3] .. string.format('%.0f', now))
        if type(set) == 'number' then
            local lock_pttl = redis.call('PTTL', KEYS[i])
            pttl_at_least(holders, lock_pttl > 0 and lock_pttl or ttl)
            described = described + 1
        end
    end
end
return described
