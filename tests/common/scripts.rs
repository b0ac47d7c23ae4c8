//! The scripts of `lua/` assembled as the crate sends them, the one copy of the rule of
//! `src/protocol/lua.rs` (`load`): every script after `base.lua`, and the scripts that
//! take a lock or a permit or raise a fence counter after `shared.lua` too, joined by
//! newlines, as one script. Tests that run a script directly, look for one in a server's
//! script cache (`SCRIPT EXISTS`) or watch for its SHA1 (`MONITOR`) use these, so that a
//! change of the rule changes them all; `lock::harness` checks the rule against what the
//! crate sends. Only `std` and `redis`: the examples include this file with `#[path]`.

use std::path::Path;

/// The file every script is sent after: the functions every script uses.
pub const BASE: &str = "base.lua";
/// The file sent between [`BASE`] and each of [`WITH_SHARED`].
pub const SHARED: &str = "shared.lua";
/// The scripts sent after [`SHARED`] too (`WITH_SHARED` in `src/protocol/lua.rs`).
pub const WITH_SHARED: [&str; 8] = [
    "lock.lua",
    "rlock.lua",
    "semaphore.lua",
    "fence.lua",
    "retake.lua",
    "upgradable.lua",
    "upgrade.lua",
    "lock_all.lua",
];

/// The text of `lua/<name>`, read from the crate's directory.
///
/// # Panics
/// If the file cannot be read.
pub fn file(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("lua").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("reading {}: {err}", path.display()))
}

/// The script `lua/<name>` as the crate sends it (`EVAL`'s body): after [`BASE`] and,
/// for [`WITH_SHARED`], after [`SHARED`].
pub fn source(name: &str) -> String {
    if WITH_SHARED.contains(&name) {
        format!("{}\n{}\n{}", file(BASE), file(SHARED), file(name))
    } else {
        format!("{}\n{}", file(BASE), file(name))
    }
}

/// [`source`] of `name` as a `redis::Script`, to run it directly.
pub fn script(name: &str) -> redis::Script {
    redis::Script::new(&source(name))
}

/// The SHA1 the crate names `lua/<name>` by in its `EVALSHA`s (hex, lower case).
pub fn sha(name: &str) -> String {
    script(name).get_hash().to_owned()
}

/// Whether the server behind `conn` holds `lua/<name>`, as the crate sends it, in its
/// script cache (`SCRIPT EXISTS`): it caches every script it was sent by `EVAL` and
/// keeps it until `SCRIPT FLUSH` or a restart, so the script ran there (or was loaded).
pub async fn cached<C: redis::aio::ConnectionLike>(conn: &mut C, name: &str) -> bool {
    let exists: Vec<i64> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(sha(name))
        .query_async(conn)
        .await
        .unwrap_or_else(|err| panic!("SCRIPT EXISTS of {name}: {err}"));
    exists == [1]
}
