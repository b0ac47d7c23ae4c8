//! A run's own `redis-server`, and what the child reads from it: `INFO` fields, how many
//! keys it holds, which of the lock keys exist, and the keys left under the name.

use std::time::Duration;

use redis::aio::MultiplexedConnection;

use super::NAME;
use crate::server::RedisServer;
use crate::Result;

/// The connections' response timeout: these rows count bytes and renewals, not latency,
/// so a slow reply while the server (or this process) catches up must fail neither an
/// acquire nor a look at the figures. (The library bounds its own calls by the lock's
/// validity.)
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);
/// Keys checked per pipeline, and per `SCAN` step.
const CHUNK: usize = 10_000;

/// A connection to `server` whose replies may take up to [`RESPONSE_TIMEOUT`].
pub(crate) async fn patient(server: &RedisServer) -> Result<MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(Some(RESPONSE_TIMEOUT));
    Ok(server
        .client()
        .get_multiplexed_async_connection_with_config(&config)
        .await?)
}

/// A `redis-server` for one run, with no `maxmemory`, and a connection to it for the
/// figures.
pub(super) async fn server() -> Result<(RedisServer, MultiplexedConnection)> {
    let server = RedisServer::try_start()?;
    let mut info = patient(&server).await?;
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("0")
        .query_async(&mut info)
        .await?;
    Ok((server, info))
}

/// `field` of `INFO section`, as a number.
pub(super) async fn info_field(
    conn: &mut MultiplexedConnection,
    section: &str,
    field: &str,
) -> Result<u64> {
    let info: String = redis::cmd("INFO").arg(section).query_async(conn).await?;
    let value = info
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .ok_or_else(|| format!("no {field} in INFO {section}"))?;
    Ok(value.trim().parse()?)
}

/// The server's number of keys.
pub(super) async fn dbsize(conn: &mut MultiplexedConnection) -> Result<u64> {
    Ok(redis::cmd("DBSIZE").query_async(conn).await?)
}

/// Those of `keys` that exist.
pub(super) async fn existing(
    conn: &mut MultiplexedConnection,
    keys: Vec<String>,
) -> Result<Vec<String>> {
    let mut left = Vec::new();
    for chunk in keys.chunks(CHUNK) {
        let mut pipe = redis::pipe();
        for key in chunk {
            pipe.cmd("EXISTS").arg(key);
        }
        let exists: Vec<bool> = pipe.query_async(conn).await?;
        left.extend(
            chunk
                .iter()
                .zip(exists)
                .filter(|&(_, exists)| exists)
                .map(|(key, _)| key.clone()),
        );
    }
    Ok(left)
}

/// Keys under [`NAME`] that are not fence counters (`:fence`), by `SCAN`.
pub(super) async fn stray_keys(conn: &mut MultiplexedConnection) -> Result<usize> {
    let (mut cursor, mut stray) = (0u64, 0);
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{NAME}:*"))
            .arg("COUNT")
            .arg(CHUNK)
            .query_async(conn)
            .await?;
        stray += keys.iter().filter(|key| !key.ends_with(":fence")).count();
        if next == 0 {
            return Ok(stray);
        }
        cursor = next;
    }
}
