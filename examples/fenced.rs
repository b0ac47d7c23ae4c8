//! Fencing tokens at the protected resource: a holder that stalls past the end of its
//! lock still has its token, and the resource rejects its late write because a later
//! holder has written with a larger one.
//!
//! Run with `cargo run --example fenced`. With `REDIS_URL` unset it starts a throwaway
//! `redis-server` (`$REDIS_SERVER`, else the one on PATH); with it set, it uses that
//! server, and keys starting with `redismutex-fenced`. Its first line of output says
//! which, and why.

#[path = "../tests/common/server.rs"]
#[allow(dead_code, unreachable_pub)]
mod server;

#[path = "support/which_server.rs"]
mod which_server;

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, Script};
use redismutex::RwMutex;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The protected resource: a hash holding the value and the largest token accepted.
const RESOURCE: &str = "redismutex-fenced-data:report";

/// Writes `ARGV[2]` to the hash `KEYS[1]` only with a fencing token `ARGV[1]` at least
/// as large as every token it has accepted; replies 1 when written, 0 when rejected.
const FENCED_WRITE: &str = r"
local last = tonumber(redis.call('HGET', KEYS[1], 'token') or '0')
if tonumber(ARGV[1]) < last then
    return 0
end
redis.call('HSET', KEYS[1], 'value', ARGV[2], 'token', ARGV[1])
return 1
";

async fn fenced_write(
    conn: &mut MultiplexedConnection,
    token: u64,
    value: &str,
) -> Result<bool, BoxError> {
    let written: i64 = Script::new(FENCED_WRITE)
        .key(RESOURCE)
        .arg(token)
        .arg(value)
        .invoke_async(conn)
        .await?;
    Ok(written == 1)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let (_server, url) = which_server::choose().map_err(BoxError::from)?;
    let client = redis::Client::open(url)?;
    let mut conn_a = client.get_multiplexed_async_connection().await?;
    let mut conn_b = client.get_multiplexed_async_connection().await?;
    conn_a.del::<_, ()>(RESOURCE).await?;
    let mutex = |conn| RwMutex::builder(conn, "redismutex-fenced").ttl(Duration::from_secs(1));
    let (mx_a, mx_b) = (
        mutex(conn_a.clone()).build()?,
        mutex(conn_b.clone()).build()?,
    );

    let guard_a = mx_a.write().key("report").await?;
    let token_a = guard_a.fencing_token();
    println!("A holds {} with token {token_a}", guard_a.key());
    if !fenced_write(&mut conn_a, token_a, "v1 by A").await? {
        return Err("the resource rejected A's write while A held the lock".into());
    }
    println!("A writes v1: accepted");

    // A stalls (a GC pause, a frozen VM). Meanwhile its lock ends: here the key is
    // deleted behind A's back, as an expiry or a failover would do.
    conn_b.del::<_, ()>(guard_a.key()).await?;
    println!("A stalls; its lock ends behind its back");

    let guard_b = mx_b
        .write()
        .key("report")
        .timeout(Duration::from_secs(1))
        .await?;
    let token_b = guard_b.fencing_token();
    println!("B holds {} with token {token_b}", guard_b.key());
    if token_b <= token_a {
        return Err(format!("B's token {token_b} is not above A's {token_a}").into());
    }
    if !fenced_write(&mut conn_b, token_b, "v2 by B").await? {
        return Err("the resource rejected B's write".into());
    }
    println!("B writes v2: accepted");

    // A wakes up. No refresh has run since it stalled, so its guard may not know yet.
    println!(
        "A wakes up; its guard says is_cancelled() = {}",
        guard_a.is_cancelled()
    );
    if fenced_write(&mut conn_a, token_a, "late v1' by A").await? {
        return Err("the resource accepted A's stale token".into());
    }
    println!("A writes with stale token {token_a}: rejected");

    let (value, token): (String, u64) = redis::cmd("HMGET")
        .arg(RESOURCE)
        .arg(&["value", "token"])
        .query_async(&mut conn_a)
        .await?;
    println!("the resource holds {value:?} with token {token}");
    if value != "v2 by B" || token != token_b {
        return Err(format!("expected B's v2 with token {token_b}").into());
    }
    println!("A's unlock: held = {}", guard_a.unlock().await?);
    println!("B's unlock: held = {}", guard_b.unlock().await?);
    Ok(())
}
