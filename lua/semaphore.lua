-- semaphore.lua: take one of ARGV[3] permits of a counting semaphore and mint its fencing
-- token.
--
-- KEYS[1]  semaphore key: a sorted set of holder ids, each scored by its deadline, the
--          server time in milliseconds when the permit runs out unless refreshed
-- KEYS[2]  fence key: "<semaphore key>:fence", the last fencing token minted for KEYS[1]
-- KEYS[3]  fair mode only: the queue "<semaphore key>:queue" (see shared.lua)
-- KEYS[4]  fair mode only: the queue's deadlines "<semaphore key>:queue-deadline"
-- ARGV[1]  permit id: 32 lowercase hex characters
-- ARGV[2]  TTL in milliseconds (positive integer)
-- ARGV[3]  permits: how many holders the caller allows at once (positive integer)
-- ARGV[4]  fence retention in milliseconds (positive integer): the PX of KEYS[2]
-- ARGV[5]  "1": floor every token at the server clock (Redis Cluster); "0": only a
--          restarted counter's
-- ARGV[6]  fair mode only: "wait" to join the queue (or keep its place) when blocked,
--          "try" not to
--
-- Sent after base.lua and shared.lua, as one script.
--
-- Holders whose deadline is not after the server's TIME count for nothing, and are dropped
-- (after the new permit's ZADD, or before a blocked reply): a holder that crashed frees
-- its permit when its TTL runs out by the server's clock, whatever the clients' clocks
-- say. The permit count is the caller's: ARGV[1] gets a permit when fewer
-- than ARGV[3] unexpired holders remain (in fair mode: fewer than ARGV[3] minus the waiters
-- queued ahead of it; one that is not queued counts as last).
--
-- Replies:
--   token (integer > 0)       acquired: ARGV[1] is in KEYS[1] with the deadline
--                             TIME + ARGV[2], and KEYS[1]'s PTTL is at least ARGV[2];
--                             token = KEYS[2] + 1, or the server TIME in microseconds when
--                             that is larger and KEYS[2] was absent or below 10^15 (or
--                             ARGV[5] == "1"), now stored in KEYS[2] with PX ARGV[4]. Also the
--                             reply when ARGV[1] already held a permit (a resent request). In
--                             fair mode "p:" .. ARGV[1] has left the queue.
--   -1 - wait (integer < 0)   blocked: ARGV[3] or more hold permits (or, in fair mode, the
--                             waiters ahead take the free ones); wait is the milliseconds
--                             until the first holder's deadline (at most ARGV[2]), and in
--                             fair mode at most until the first queue deadline. With
--                             ARGV[6] == "wait", "p:" .. ARGV[1] is queued with the deadline
--                             TIME + ARGV[2].
--   {"wrongtype", key, type}  key (any of KEYS) holds a type this protocol does not use
--                             (for KEYS[2]: anything but a decimal integer below 2^53 - 1,
--                             "exhausted counter" for 2^53 - 1); nothing was changed.
--   {"noexpiry", key}         key (any of KEYS) exists with no TTL; nothing was changed.
--
-- Every check comes before the first write, so an error (OOM, READONLY) changes nothing.
-- The first write of a granted permit is its ZADD, and of a blocked fair request joining
-- the queue its ZADD there, so OOM refuses both; dropping run-out waiters from a fair
-- queue (a removal, which OOM allows) comes after a ZADD that changes nothing and is
-- refused as the request's own write would be (shared.lua).

local ttl = tonumber(ARGV[2])
local permits = tonumber(ARGV[3])
local fair = KEYS[3] ~= nil
local queue = fair and fair_queue()
local queued = 'p:' .. ARGV[1]

local refusal = zset_refusal(KEYS[1])
if refusal then
    return refusal
end
local last, fence_refusal = fence_last(KEYS[2])
if fence_refusal then
    return fence_refusal
end
local now = nil
local ahead = 0
if fair then
    now, refusal = queue.open(KEYS[3], KEYS[4])
    if refusal then
        return refusal
    end
    ahead = queue.rank(KEYS[3], queued)
else
    now = now_ms()
end

-- The holders whose deadline is after now: ARGV[1] among them (a resent request), and how
-- many. Counted, not yet dropped, so that the ZADD is the first write: out of memory
-- (OOM) refuses a new permit with nothing changed, as it refuses a lock.
local own = redis.call('ZSCORE', KEYS[1], ARGV[1])
local holds = own and tonumber(own) > now
local live = redis.call('ZCOUNT', KEYS[1], string.format('(%.0f', now), '+inf')
if holds or live + ahead < permits then
    local token = at_least_the_clock(last + 1, ARGV[5] == '1')
    redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
    pttl_at_least(KEYS[1], ttl)
    redis.call('SET', KEYS[2], string.format('%.0f', token), 'PX', ARGV[4])
    if fair then
        queue.leave(KEYS[3], KEYS[4], queued)
    end
    return token
end

-- Blocked: until the first live holder's deadline, when a permit frees unless refreshed.
-- Joining the queue (fair) is the first write, so OOM refuses it with nothing changed;
-- the holders that ran out are dropped after it.
local wait = until_first_deadline(KEYS[1], now, ttl)
if fair then
    wait = queue.blocked(KEYS[3], KEYS[4], queued, now, ttl, wait, ARGV[6] == 'wait')
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return -1 - wait
