-- lock_all.lua: take read and write locks on several lock keys of one mutex, all or none,
-- in one step, and mint a fencing token per key (RwMutex::lock_all).
--
-- For each key i of the set, 1 <= i <= n:
-- KEYS[3i-2]  lock key: a string holding the writer's id, or a set of reader ids
-- KEYS[3i-1]  lock-intent key: "<lock key>:lock-intent", the id of the writer waiting
--             (or "1", set by the Go package's writers)
-- KEYS[3i]    fence key: "<lock key>:fence", the last fencing token minted for it
--             (so the first key's are KEYS[1], KEYS[2] and KEYS[3])
-- ARGV[1]     lock id: 32 lowercase hex characters, one for the whole set
-- ARGV[2]     TTL in milliseconds (positive integer)
-- ARGV[3]     fence retention in milliseconds (positive integer): the PX of the fence keys
-- ARGV[4]     the modes, one character per key in KEYS' order: "w" takes the key as its
--             writer (as lock.lua does), "r" as one of its readers (as rlock.lua does)
-- ARGV[5]     "1": when blocked by a holder, set the lock intent on every write key so new
--             readers stay out; "0": don't
-- ARGV[6]     "1": floor every token at the server clock (Redis Cluster, as lock.lua's
--             ARGV[5]); "0": don't
--
-- Sent after base.lua and shared.lua, as one script. Every lock key must differ.
--
-- Each key is held exactly as a single lock holds it, so lock.lua, rlock.lua, refresh.lua,
-- renew.lua and unlock.lua (and the Go package's scripts) see and keep each key alone.
--
-- A write key is free when absent, or already holding ARGV[1] (a resent request). A read
-- key is free when ARGV[1] is already a member of its set (a resent request), or when it is
-- absent or a set of readers and no other id's intent is at its intent key.
--
-- The intent (ARGV[5] == "1"): a set blocked by a holder (a writer's string or a readers'
-- set) sets its intent on its write keys, as a waiting writer does. A set blocked only by
-- another waiter's intent on one of its read keys sets none, and removes those it set
-- before: so no waiter both keeps others out and waits for another waiter's intent, and
-- no two sets' intents can keep each other out for ever.
--
-- Replies:
--   {t1, ..., tn}             acquired: every key is held by ARGV[1], each as its mode says,
--                             with PTTL at least ARGV[2] (a write key's exactly ARGV[2]);
--                             ti = KEYS[3i] + 1, or the server TIME in microseconds when
--                             that is larger and KEYS[3i] was absent or below 10^15 (or
--                             ARGV[6] == "1"), now stored in KEYS[3i] with PX ARGV[3]. A
--                             write key's intent is deleted if it held ARGV[1].
--   {"blocked", i, pttl}      nothing was taken: key i (the first that blocks) is held by
--                             others (pttl: its lock key's PTTL in ms), or for a read key
--                             another waiter's intent keeps readers out (pttl: the
--                             intent's PTTL in ms). Intents as above.
--   {"wrongtype", key, type}  key (any of KEYS) holds a type this protocol does not use
--                             (for a fence key: anything but a decimal integer below
--                             2^53 - 1, "exhausted counter" for 2^53 - 1); nothing was
--                             changed.
--   {"noexpiry", key}         key (any of KEYS) exists with no TTL, so it would never free;
--                             nothing was changed.
--
-- Every check comes before the first write, so an error (OOM, READONLY) changes nothing.

local id = ARGV[1]
local ttl = tonumber(ARGV[2])
local modes = ARGV[4]
local n = #KEYS / 3

-- Checked, every key before the first write: its intent, its fence, its holder.
local intents, lasts, pttls = {}, {}, {}
-- The first key that blocks and its PTTL, and whether another waiter's intent blocks any.
local blocked_at, blocked_pttl, by_intent = nil, nil, false
for i = 1, n do
    local lock, intent_key, fence_key = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
    local intent, intent_pttl, intent_refusal = lock_intent(intent_key)
    if intent_refusal then
        return intent_refusal
    end
    intents[i] = intent
    local last, fence_refusal = fence_last(fence_key)
    if fence_refusal then
        return fence_refusal
    end
    lasts[i] = last
    local pttl = redis.call('PTTL', lock)
    pttls[i] = pttl
    local lock_type = pttl == -2 and 'none' or redis.call('TYPE', lock)['ok']
    if lock_type ~= 'none' and lock_type ~= 'string' and lock_type ~= 'set' then
        return {'wrongtype', lock, lock_type}
    end
    if pttl == -1 then
        return {'noexpiry', lock}
    end
    -- What keeps this key from the set: a holder (its PTTL), or an intent (the intent's).
    local holder_blocks, intent_blocks = false, false
    if string.sub(modes, i, i) == 'w' then
        holder_blocks = lock_type == 'set'
            or (lock_type == 'string' and redis.call('GET', lock) ~= id)
    elseif lock_type == 'string' then
        holder_blocks = true
    elseif lock_type == 'none' or redis.call('SISMEMBER', lock, id) == 0 then
        intent_blocks = intent ~= nil and intent ~= id
    end
    by_intent = by_intent or intent_blocks
    if (holder_blocks or intent_blocks) and not blocked_at then
        blocked_at = i
        blocked_pttl = holder_blocks and pttl or intent_pttl
    end
end

if blocked_at then
    -- Only a set that no other waiter's intent blocks keeps (or sets) its intents; one
    -- that an intent blocks removes its own.
    local keep = ARGV[5] == '1' and not by_intent
    for i = 1, n do
        if string.sub(modes, i, i) == 'w' then
            local intent_key, intent = KEYS[3 * i - 1], intents[i]
            if keep and intent == nil then
                redis.call('SET', intent_key, id, 'PX', ttl)
            elseif keep and intent == id then
                redis.call('PEXPIRE', intent_key, ttl)
            elseif not keep and intent == id then
                redis.call('DEL', intent_key)
            end
        end
    end
    return {'blocked', blocked_at, blocked_pttl}
end

-- Taken: TIME is read (by at_least_the_clock) before the first write, so an error there
-- changes nothing.
local floor = ARGV[6] == '1'
local tokens = {}
for i = 1, n do
    tokens[i] = at_least_the_clock(lasts[i] + 1, floor)
end
for i = 1, n do
    local lock, intent_key, fence_key = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
    if string.sub(modes, i, i) == 'w' then
        redis.call('SET', lock, id, 'PX', ttl)
        if intents[i] == id then
            redis.call('DEL', intent_key)
        end
    else
        redis.call('SADD', lock, id)
        pttl_at_least(lock, ttl, pttls[i])
    end
    redis.call('SET', fence_key, string.format('%.0f', tokens[i]), 'PX', ARGV[3])
end
return tokens
