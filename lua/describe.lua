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
-- (the acquisition time), and KEYS[n+i]'s PTTL raised to at least ARGV[2]. A KEYS[n+i]
-- of another type than a hash is left as it is. Any other key is not changed.
--
-- Replies:
--   an integer: how many keys were described.

local id = ARGV[1]
local ttl = tonumber(ARGV[2])
local n = #KEYS / 2
local now = now_ms()

-- Whether `id` holds `key` now, in any form.
local function holds(key)
    local lock_type = redis.call('TYPE', key)['ok']
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

local described = 0
for i = 1, n do
    local holders = KEYS[n + i]
    if holds(KEYS[i]) then
        -- HSET fails on a key of another type: then it is not ours to write.
        local set = redis.pcall('HSET', holders, id, ARGV[3] .. string.format('%.0f', now))
        if type(set) == 'number' then
            pttl_at_least(holders, ttl)
            described = described + 1
        end
    end
end
return described
