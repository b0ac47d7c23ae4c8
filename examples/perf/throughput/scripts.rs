//! Row 5's scripts: the crate's own `lua/lock.lua` and `lua/unlock.lua`, invoked bare,
//! with no library around them; and row 4b's fenced read floor.

use std::sync::LazyLock;

use redis::{Script, ScriptInvocation};

use crate::{FENCE_MS, TTL_MS};

/// The crate's own scripts, sent bare in row 5, after `base.lua` (and `shared.lua`) as the
/// crate sends them.
static LOCK_LUA: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../../lua/base.lua"),
        "\n",
        include_str!("../../../lua/shared.lua"),
        "\n",
        include_str!("../../../lua/lock.lua")
    ))
});
static UNLOCK_LUA: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../../lua/base.lua"),
        "\n",
        include_str!("../../../lua/unlock.lua")
    ))
});

/// `lua/lock.lua` for writer `id` on `key`, with KEYS and ARGV as its header documents
/// them: lock key, intent key, fence key; id, TTL ms, set-intent flag, fence retention ms.
pub(crate) fn lock_lua<'a>(key: &str, id: &str) -> ScriptInvocation<'a> {
    let mut call = LOCK_LUA.key(key);
    call.key(format!("{key}:lock-intent"))
        .key(format!("{key}:fence"))
        .arg(id)
        .arg(TTL_MS)
        .arg("0")
        .arg(FENCE_MS);
    call
}

/// `lua/unlock.lua` for writer `id` on `key`, with KEYS and ARGV as its header documents
/// them: lock key (no intent key); id, release channel, "w" (a writer's id). The reply's
/// bit 1 says that `id` held the lock.
pub(crate) fn unlock_lua<'a>(key: &str, id: &str) -> ScriptInvocation<'a> {
    let mut call = UNLOCK_LUA.key(key);
    call.arg(id).arg(format!("{key}:released")).arg("w");
    call
}

/// Row 4b's read lock: the least Redis work a fenced read lock does, in one script with
/// no function defined. KEYS: lock key, intent key, fence key; ARGV: id, TTL ms. A
/// waiting writer's intent keeps the reader out (-1); a writer's string refuses the
/// `SADD` (-2); else the reader is in the set, the set lives at least the TTL, and the
/// reply is the token, one more than the fence counter.
static READ_FLOOR: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
if type(redis.pcall('SADD', KEYS[1], ARGV[1])) ~= 'number' then return -2 end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return redis.call('INCR', KEYS[3])
",
    )
});

/// Row 4b's release: the reader leaves the set, and the last one out publishes its id
/// on the release channel. KEYS: lock key; ARGV: id, channel. Replies 1 when `id` was a
/// reader.
static READ_FLOOR_RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('PUBLISH', ARGV[2], ARGV[1]) end
return 1
",
    )
});

/// [`READ_FLOOR`] for reader `id` on `key`.
pub(crate) fn read_floor<'a>(key: &str, id: &str) -> ScriptInvocation<'a> {
    let mut call = READ_FLOOR.key(key);
    call.key(format!("{key}:lock-intent"))
        .key(format!("{key}:fence"))
        .arg(id)
        .arg(TTL_MS);
    call
}

/// [`READ_FLOOR_RELEASE`] for reader `id` on `key`.
pub(crate) fn read_floor_release<'a>(key: &str, id: &str) -> ScriptInvocation<'a> {
    let mut call = READ_FLOOR_RELEASE.key(key);
    call.arg(id).arg(format!("{key}:released"));
    call
}
