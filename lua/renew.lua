-- renew.lua: extend many locks at once, each exactly as refresh.lua extends one.
--
-- KEYS[1..n] the lock keys, each as refresh.lua's KEYS[1] (on a cluster, all in one slot)
-- KEYS[n+j]  the lock keys' other keys, in KEYS order of the lock keys they belong to:
--            for a lock key whose character in ARGV[2] is `u` or `U`, its upgrader key
--            ("<lock key>:upgrader", see upgradable.lua); then for a lock key whose
--            character is a capital letter, its holders' descriptions
--            ("<lock key>:holders", see describe.lua)
-- ARGV[1]    TTL in milliseconds (positive integer), the same for every key
-- ARGV[2]    one character per lock key: `w` when the lock id is a writer's (its key is
--            read with GET first, two calls instead of three), `u` when it is an
--            upgradable reader's (its upgrader key is renewed with it), any other
--            lowercase character otherwise; the same in capitals (`W`, `U`, `R`) when
--            the holder is described: its holders key is renewed with it
-- ARGV[2+i]  the lock id that should hold KEYS[i]: 32 lowercase hex characters
--
-- Sent after base.lua, as one script. The refresher of a mutex sends it with up to a few
-- hundred keys, so one round trip renews that many locks.
--
-- Replies:
--   an array with one integer per lock key, in KEYS order: what refresh.lua would reply
--   for KEYS[i], ARGV[2+i] and ARGV[1] (1 held and extended, 0 not held, nothing
--   changed; for a `u` key held, its upgrader key's PTTL is also set to ARGV[1] when it
--   holds ARGV[2+i]; for a capital key held, its holders key's PTTL is raised to at
--   least ARGV[1]);
--   then one more: the server's clock (TIME) in microseconds, which the refresher
--   compares with its own monotonic clock between renewals to see the server's clock
--   jump.

local ttl = tonumber(ARGV[1])
local writers = ARGV[2]

-- refresh.lua for one key; `writer` when the id is likely the string at the key.
local function renew(key, id, writer)
    if writer then
        -- A pcall: the key may hold another type (another holder's set).
        local value = redis.pcall('GET', key)
        if value == id then
            redis.call('PEXPIRE', key, ttl)
            return 1
        end
        if type(value) ~= 'table' then
            return 0
        end
    end
    local lock_type = redis.call('TYPE', key)['ok']
    local held = false
    if lock_type == 'string' then
        if redis.call('GET', key) == id then
            redis.call('PEXPIRE', key, ttl)
            return 1
        end
    elseif lock_type == 'set' then
        held = redis.call('SISMEMBER', key, id) == 1
    elseif lock_type == 'zset' then
        local deadline = redis.call('ZSCORE', key, id)
        if deadline then
            local now = now_ms()
            held = tonumber(deadline) > now
            if held then
                redis.call('ZADD', key, now + ttl, id)
            else
                redis.call('ZREM', key, id)
            end
        end
    end
    if held then
        pttl_at_least(key, ttl)
        return 1
    end
    return 0
end

local replies = {}
local n = #ARGV - 2
local others = 0
for i = 1, n do
    local letter = string.sub(writers, i, i)
    local kind = string.lower(letter)
    replies[i] = renew(KEYS[i], ARGV[i + 2], kind == 'w')
    if kind == 'u' then
        -- Its upgrader key lives as long as its hold (GET: a pcall, as the key may hold
        -- another type, which is then not this reader's).
        others = others + 1
        local upgrader = KEYS[n + others]
        if replies[i] == 1 and redis.pcall('GET', upgrader) == ARGV[i + 2] then
            redis.call('PEXPIRE', upgrader, ttl)
        end
    end
    if letter ~= kind then
        -- Its description lives as long as its hold.
        others = others + 1
        if replies[i] == 1 then
            pttl_at_least(KEYS[n + others], ttl)
        end
    end
end
replies[n + 1] = now_us()
return replies
