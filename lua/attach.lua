-- attach.lua: take over a detached hold (a lease) under a new id: every lock key the old
-- id holds, in its mode, moves to the new id and is renewed with the caller's TTL, all or
-- none (RwMutex::attach_write, attach_read, attach_all, Semaphore::attach).
--
-- For each key i of the hold, 1 <= i <= n (the lock keys KEYS[1..n], then their hashes):
-- KEYS[i]    lock key: a string holding the writer's id, a set of reader ids, or a
--            semaphore key, a sorted set of permit ids scored by their deadline (server ms)
-- KEYS[n+i]  "<KEYS[i]>:holders": the holder descriptions of KEYS[i], a hash (id -> text)
-- ARGV[1]    the old id: the lease's, 32 lowercase hex characters
-- ARGV[2]    the new id: 32 lowercase hex characters, drawn fresh for this attach
-- ARGV[3]    TTL in milliseconds (positive integer), the attaching handle's
-- ARGV[4]    the modes, one character per lock key in KEYS' order: "w" the old id is the
--            key's writer, "r" one of its readers, "p" a permit; any other character
--            holds nothing
--
-- Sent after base.lua, as one script. On a cluster every key is in one slot.
--
-- Every key is checked before the first write: "w" holds when GET is the old id, "r"
-- when the old id is a member of the set, "p" when its deadline is after the server's
-- clock (ms). A key that is missing or of another type does not hold it (pcall).
--
-- Replies:
--   1        every key held the old id in its mode, and now holds the new id instead:
--            "w": SET to the new id with PX ARGV[3]; "r": the old id removed from the set,
--            the new id added, the set's PTTL raised to at least ARGV[3]; "p": the old
--            permit removed, the new id added with the deadline TIME + ARGV[3], the
--            sorted set's PTTL raised to at least ARGV[3]. The old id's field is deleted
--            from each KEYS[n+i] (the attaching process writes its own description). So
--            a lease attaches at most once: after it the old id holds nothing.
--   {0, i}   key i (1-based, the first) does not hold the old id in its mode; nothing was
--            changed.
--
-- Every check comes before the first write, so an error (OOM, READONLY) changes nothing.

local old, new = ARGV[1], ARGV[2]
local ttl = tonumber(ARGV[3])
local modes = ARGV[4]
local n = #KEYS / 2

-- The server clock (ms), read once, before the first write, when a permit needs it.
local now = nil

-- Whether the old id holds `key` in `mode`.
local function holds(key, mode)
    if mode == 'w' then
        return redis.pcall('GET', key) == old
    elseif mode == 'r' then
        return redis.pcall('SISMEMBER', key, old) == 1
    elseif mode == 'p' then
        local deadline = redis.pcall('ZSCORE', key, old)
        if type(deadline) ~= 'string' then
            return false
        end
        now = now or now_ms()
        return tonumber(deadline) > now
    end
    return false
end

for i = 1, n do
    if not holds(KEYS[i], string.sub(modes, i, i)) then
        return {0, i}
    end
end

for i = 1, n do
    local key, mode = KEYS[i], string.sub(modes, i, i)
    if mode == 'w' then
        redis.call('SET', key, new, 'PX', ttl)
    elseif mode == 'r' then
        redis.call('SREM', key, old)
        redis.call('SADD', key, new)
        pttl_at_least(key, ttl)
    else
        redis.call('ZREM', key, old)
        redis.call('ZADD', key, now + ttl, new)
        pttl_at_least(key, ttl)
    end
    -- A pcall: the descriptions only inform, and a key of another type there must not
    -- fail an attach that has moved the hold.
    redis.pcall('HDEL', KEYS[n + i], old)
end
return 1
