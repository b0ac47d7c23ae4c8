//! Row 5's scripts: the crate's own `lua/lock.lua` and `lua/unlock.lua`, invoked bare,
//! with no library around them.

use std::sync::LazyLock;

use redis::{Script, ScriptInvocation};

use crate::{FENCE_MS, TTL_MS};

/// The crate's own scripts, sent bare in row 5, assembled as the crate sends them
/// (`tests/common/scripts.rs`).
static LOCK_LUA: LazyLock<Script> = LazyLock::new(|| crate::scripts::script("lock.lua"));
static UNLOCK_LUA: LazyLock<Script> = LazyLock::new(|| crate::scripts::script("unlock.lua"));

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
