//! Blocking, bounded questions to a `redis-server` (or Sentinel) on 127.0.0.1, and a
//! blocking poll: what the deployment harnesses (`cluster.rs`, `sentinel.rs`) ask while
//! they form and fail over.

use std::time::{Duration, Instant};

/// The bound on connecting to a process and on each reply.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(1);

/// One blocking command to the process on 127.0.0.1:`port`, on a new connection.
pub fn query<T: redis::FromRedisValue>(port: u16, command: &redis::Cmd) -> Result<T, String> {
    command
        .query(&mut connect(port)?)
        .map_err(|err| format!("{port}: {err}"))
}

/// A blocking connection to 127.0.0.1:`port`, every step bounded by [`QUERY_TIMEOUT`].
pub fn connect(port: u16) -> Result<redis::Connection, String> {
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{port}/")).map_err(|err| err.to_string())?;
    let conn = client
        .get_connection_with_timeout(QUERY_TIMEOUT)
        .map_err(|err| format!("connect to {port}: {err}"))?;
    conn.set_read_timeout(Some(QUERY_TIMEOUT))
        .and_then(|()| conn.set_write_timeout(Some(QUERY_TIMEOUT)))
        .map_err(|err| format!("{port}: {err}"))?;
    Ok(conn)
}

/// Calls `check` every `poll` until it succeeds or `bound` has passed, blocking the
/// thread; gives its last error then.
pub fn poll_until<T>(
    bound: Duration,
    poll: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let deadline = Instant::now() + bound;
    loop {
        match check() {
            Ok(value) => return Ok(value),
            Err(why) if Instant::now() >= deadline => return Err(why),
            Err(_) => std::thread::sleep(poll),
        }
    }
}
