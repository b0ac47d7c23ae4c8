-- base.lua: the functions every script of the crate uses: the server clock, read here
-- only, raising a PTTL, and publishing a release. The crate sends every script with this
-- file before it (and lock.lua, rlock.lua and semaphore.lua with shared.lua after it), as
-- one script with one SHA1; run them the same way. Kept small: every call of every
-- script defines these.

-- The server clock in microseconds: exact in a Lua number (below 2^53) until about 2255.
local function now_us()
    local time = redis.call('TIME')
    return tonumber(time[1]) * 1000000 + tonumber(time[2])
end

-- The server clock in milliseconds.
local function now_ms()
    return math.floor(now_us() / 1000)
end

-- Sets `key`'s PTTL to `ttl` ms if it is lower or unset; `pttl`: its PTTL, if already read.
local function pttl_at_least(key, ttl, pttl)
    if (pttl or redis.call('PTTL', key)) < ttl then
        redis.call('PEXPIRE', key, ttl)
    end
end

-- Publishes `message` on `channel`, by SPUBLISH (sharded Pub/Sub, in the channel's slot)
-- when `sharded` is '1', else by PUBLISH. A server without SPUBLISH (a Redis 6.2
-- cluster: "Unknown Redis command") publishes by PUBLISH instead, which every node of a
-- cluster passes on to its subscribers. The number of receivers, or an error reply
-- (pcall: publishing only helps waiters, and never fails a script that wrote).
local function publish(channel, message, sharded)
    if sharded == '1' then
        local published = redis.pcall('SPUBLISH', channel, message)
        local err = type(published) == 'table' and tostring(published.err) or ''
        if not err:find('Unknown Redis command', 1, true) then
            return published
        end
    end
    return redis.pcall('PUBLISH', channel, message)
end
