-- fence.lua: raise a fence counter to at least a token (quorum mode's second round).
--
-- KEYS[1]  fence key: "<lock key>:fence", the last fencing token minted for the lock
-- KEYS[2]  granted key: "<lock key>:fence-granted", the last token granted to a holder
--          (a second round reached this node) or marking a forced release
-- ARGV[1]  token: the largest token the nodes of a quorum minted for one acquisition
--          (positive integer below 2^53 - 1)
-- ARGV[2]  fence retention in milliseconds (positive integer): the PX of KEYS[1]
--
-- Sent after base.lua and shared.lua, as one script.
--
-- In quorum mode every node mints a token, the holder takes the largest, and this script
-- raises every node's counter to it before the guard is returned. A majority that
-- confirms shares a node with the majority of any later acquisition, whose token is then
-- larger (README, "Quorum mode"). KEYS[2] is raised the same way: unlike KEYS[1], which
-- every first round raises (also those that win no majority), it moves only when a token
-- was granted, so quorum mode's refresh (retake.lua) can tell a lock another holder took
-- on this node from another candidate's attempt that failed.
--
-- Replies:
--   1                         KEYS[1] and KEYS[2] now hold at least ARGV[1]: each was
--                             raised to ARGV[1] (with PX ARGV[2]), or already held as
--                             much and was left as it is.
--   {"wrongtype", key, type}  KEYS[1] or KEYS[2] holds anything but a decimal integer
--                             below 2^53 - 1 ("exhausted counter" for 2^53 - 1); nothing
--                             was changed.
--   {"noexpiry", key}         KEYS[1] or KEYS[2] exists with no TTL; nothing was changed.

local token = tonumber(ARGV[1])
local last, refusal = fence_last(KEYS[1])
if refusal then
    return refusal
end
local granted, granted_refusal = fence_last(KEYS[2])
if granted_refusal then
    return granted_refusal
end
if last < token then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
if granted < token then
    redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
end
return 1
