-- shared.lua: the functions the scripts that take a lock or a permit share (lock.lua,
-- rlock.lua, semaphore.lua; fence.lua and retake.lua in quorum mode): the fence counter,
-- the lock intent and the fair queue. The crate sends each of those scripts after
-- base.lua and this file (one script, one SHA1), so they run as one; run them the same
-- way.
--
-- The fair queue (fair mode only) of a lock key K is two sorted sets with the same
-- members, "<kind>:<id>" (kind "w" a writer, "r" a reader, "p" a semaphore permit):
--   K:queue           scored by arrival ticket: 1 for the first waiter of an empty queue,
--                     then one more than the last
--   K:queue-deadline  scored by the server time in milliseconds by which the waiter must
--                     attempt again or lose its place (its attempt time + its TTL)
-- Both keys carry a TTL at least as long as every deadline in them.

-- The last fencing token stored in the fence key `key`: 0 when it is absent. Returns nil
-- and the error reply when it holds anything but what these scripts store (a decimal
-- integer with no sign, point or leading zero, below 2^53 - 1, the largest integer a Lua
-- number holds exactly) or has no TTL.
local function fence_last(key)
    local fence = redis.pcall('GET', key)
    if not fence then
        return 0
    end
    if type(fence) ~= 'string' or not fence:match('^[1-9]%d*$') or #fence > 16
        or tonumber(fence) > 2^53 - 1 then
        local found = type(fence) == 'string' and 'non-integer string'
            or redis.call('TYPE', key)['ok']
        return nil, {'wrongtype', key, found}
    end
    if tonumber(fence) == 2^53 - 1 then
        return nil, {'wrongtype', key, 'exhausted counter'}
    end
    if redis.call('PTTL', key) == -1 then
        return nil, {'noexpiry', key}
    end
    return tonumber(fence)
end

-- `token`, or the server clock in microseconds when that is larger and `token` is below
-- 10^15 or `floor` is true. Tokens minted from the clock are above 10^15 (microseconds
-- since 2001), so a smaller count means the counter was (re)created since: it restarts at
-- the clock, so tokens keep growing after the fence key expires or the server restarts
-- empty. `floor` (Redis Cluster) floors every token: a failover may have lost the last
-- increments.
local function at_least_the_clock(token, floor)
    if token >= 1e15 and not floor then
        return token
    end
    return math.max(token, now_us())
end

-- The lock intent at `key`: its id and PTTL (nil, -2 if absent), or nil, nil and a refusal.
local function lock_intent(key)
    local pttl = redis.call('PTTL', key)
    if pttl == -2 then
        return nil, -2
    end
    local intent = redis.pcall('GET', key)
    if type(intent) ~= 'string' then
        return nil, nil, {'wrongtype', key, redis.call('TYPE', key)['ok']}
    end
    if pttl == -1 then
        return nil, nil, {'noexpiry', key}
    end
    return intent, pttl
end

-- The error reply when `key` exists but is not a sorted set with a TTL; else nil.
local function zset_refusal(key)
    local pttl = redis.call('PTTL', key)
    if pttl == -2 then
        return nil
    end
    local key_type = redis.call('TYPE', key)['ok']
    if key_type ~= 'zset' then
        return {'wrongtype', key, key_type}
    end
    if pttl == -1 then
        return {'noexpiry', key}
    end
    return nil
end

-- `wait` (ms), or less: until the first deadline after `now` in the sorted set `d` (a
-- queue's deadlines: when a waiter that stopped attempting leaves, which nobody
-- publishes; or a semaphore's holders: when a permit runs out unless refreshed). Those
-- not after `now` are passed over, so they may be dropped after it.
local function until_first_deadline(d, now, wait)
    local first = redis.call('ZRANGEBYSCORE', d, string.format('(%.0f', now), '+inf',
        'WITHSCORES', 'LIMIT', 0, 1)
    if first[2] then
        return math.min(wait, math.max(0, tonumber(first[2]) - now))
    end
    return wait
end

-- The fair queue's functions, in a table: open, rank, ahead, blocked and leave (below).
-- Made by fair requests only: each call of a script defines every function it contains
-- as it runs, so a plain request would pay for these on every call (about 0.3 us of
-- server time per call on Redis 7.0, measured on rlock.lua's counting path).
local function fair_queue()
    -- Drops the waiters of queue `q` whose deadline in `d` is not after `now`: they stopped
    -- attempting (cancelled unseen, crashed, cut off), so they no longer hold up those behind.
    -- Under maxmemory, Redis refuses a script's first write that may use memory (OOM) and
    -- lets every later one through; a removal is allowed, so a purge would let the
    -- request's own write through. Before one, a ZADD XX of the member '' (no member is
    -- empty, so it changes nothing) raises OOM as that write would, with nothing changed.
    local function queue_purge(q, d, now)
        local gone = redis.call('ZRANGEBYSCORE', d, '-inf', now)
        if #gone == 0 then
            return
        end
        redis.call('ZADD', q, 'XX', 0, '')
        for _, member in ipairs(gone) do
            redis.call('ZREM', q, member)
        end
        redis.call('ZREMRANGEBYSCORE', d, '-inf', now)
    end

    -- Whether the queue queue_open opened has nobody in it (both its keys absent, the
    -- uncontended case): then ranking, listing and leaving it read and write nothing.
    local queue_empty = false

    -- The members ahead of `member` in queue `q`: all of them when it is not queued.
    local function queue_ahead(q, member)
        if queue_empty then
            return {}
        end
        local rank = redis.call('ZRANK', q, member)
        if rank == false then
            return redis.call('ZRANGE', q, 0, -1)
        end
        if rank == 0 then
            return {}
        end
        return redis.call('ZRANGE', q, 0, rank - 1)
    end

    -- How many waiters are ahead of `member` in queue `q`: all of them when it is not queued.
    local function queue_rank(q, member)
        if queue_empty then
            return 0
        end
        return redis.call('ZRANK', q, member) or redis.call('ZCARD', q)
    end

    -- Queues `member` at the back of `q` unless it is queued, and moves its deadline in `d`
    -- to now + ttl.
    local function queue_join(q, d, member, now, ttl)
        if redis.call('ZSCORE', q, member) == false then
            local last = redis.call('ZRANGE', q, -1, -1, 'WITHSCORES')
            local ticket = 1
            if last[2] then
                ticket = tonumber(last[2]) + 1
            end
            redis.call('ZADD', q, ticket, member)
        end
        redis.call('ZADD', d, now + ttl, member)
        pttl_at_least(q, ttl)
        pttl_at_least(d, ttl)
        queue_empty = false
    end

    -- Takes `member` out of the queue.
    local function queue_leave(q, d, member)
        if queue_empty then
            return
        end
        redis.call('ZREM', q, member)
        redis.call('ZREM', d, member)
    end

    -- Opens the queue `q`, `d` for a fair request: checks both keys, reads the clock, and
    -- drops the waiters whose deadline has passed. Returns the server time in milliseconds,
    -- or nil and the error reply (then nothing was changed). When neither key exists (one
    -- EXISTS), there is nothing to check or drop, and queue_empty is set.
    local function queue_open(q, d)
        queue_empty = redis.call('EXISTS', q, d) == 0
        if queue_empty then
            return now_ms()
        end
        local refusal = zset_refusal(q) or zset_refusal(d)
        if refusal then
            return nil, refusal
        end
        local now = now_ms()
        queue_purge(q, d, now)
        return now
    end

    -- A fair request is blocked: `member` joins the queue (or keeps its place) when `join`.
    -- Returns `wait` (ms), or less: until the first deadline in the queue.
    local function queue_blocked(q, d, member, now, ttl, wait, join)
        if not queue_empty then
            wait = until_first_deadline(d, now, wait)
        end
        if join then
            queue_join(q, d, member, now, ttl)
        end
        return wait
    end

    return {
        open = queue_open,
        rank = queue_rank,
        ahead = queue_ahead,
        blocked = queue_blocked,
        leave = queue_leave,
    }
end
