-- exec.lua: run the commands of a pipeline only while ARGV[1] still holds every lock
-- named, all in one atomic step (Guard::exec, Permit::exec, MultiGuard::exec).
--
-- KEYS[1..m]   lock keys: each a string holding the writer's id, or a set of reader
--              ids; or a semaphore key, a sorted set of permit ids scored by their
--              deadline (server ms)
-- KEYS[m+1..]  the keys of the commands, in the order they appear in them (declared as
--              keys, so that a server or proxy that checks a script's keys sees them all)
-- ARGV[1]      lock id: 32 lowercase hex characters
-- ARGV[2]      m, how many lock keys come first in KEYS (a positive integer)
-- ARGV[3..]    the commands, one after the other. Each is its shape, one character per
--            argument of the command, its name first: `k` takes the next of KEYS, any
--            other character the next of ARGV; then the arguments of ARGV it takes.
--
-- Sent after base.lua, as one script.
--
-- Replies:
--   {1, r1, ..., rn}  ARGV[1] holds every one of KEYS[1..m] (the writer's string, a
--                     member of the readers' set, or a permit whose deadline is after the
--                     server TIME): every command ran, in order, and ri is the reply of
--                     the i-th.
--   {0, i}            ARGV[1] does not hold KEYS[i], the first of KEYS[1..m] it does not
--                     hold (the key is gone, holds another id or a type this protocol
--                     does not use, or holds ARGV[1] as a permit whose deadline has
--                     passed): no command ran, nothing was changed.
--   {2, i, err}       the i-th command failed with the error reply whose text is `err`
--                     (its code first, as `WRONGTYPE ...`): the i - 1 commands before it
--                     ran and what they wrote stays (a script has no rollback, as MULTI
--                     has none); the commands after it did not run.

local id = ARGV[1]
local m = tonumber(ARGV[2])

-- Whether `id` holds `lock`. A writer's lock is read with GET alone; GET fails on a set
-- or a sorted set (a reader's or a permit's lock, or a type this protocol does not use),
-- which TYPE then tells apart.
local function holds(lock)
    local value = redis.pcall('GET', lock)
    if type(value) ~= 'table' then
        return value == id
    end
    local lock_type = redis.call('TYPE', lock)['ok']
    if lock_type == 'set' then
        return redis.call('SISMEMBER', lock, id) == 1
    elseif lock_type == 'zset' then
        local deadline = redis.call('ZSCORE', lock, id)
        return deadline ~= false and tonumber(deadline) > now_ms()
    end
    return false
end

for i = 1, m do
    if not holds(KEYS[i]) then
        return {0, i}
    end
end

-- One command from its arguments; a Lua error (more arguments than unpack takes, which
-- the crate's limit of 7,000 prevents) comes back as an error, as a command's does, so
-- that the reply still says how many commands ran.
local function run(args)
    return redis.pcall(unpack(args))
end

local replies = {1}
local key_at, arg_at, command = m + 1, 3, 0
while arg_at <= #ARGV do
    local shape = ARGV[arg_at]
    arg_at = arg_at + 1
    local args = {}
    for i = 1, #shape do
        if string.byte(shape, i) == 107 then -- 'k'
            args[i] = KEYS[key_at]
            key_at = key_at + 1
        else
            args[i] = ARGV[arg_at]
            arg_at = arg_at + 1
        end
    end
    command = command + 1
    local ran, reply = pcall(run, args)
    if not ran then
        return {2, command, 'ERR ' .. tostring(reply)}
    end
    if type(reply) == 'table' and reply['err'] then
        return {2, command, reply['err']}
    end
    replies[command + 1] = reply
end
return replies
