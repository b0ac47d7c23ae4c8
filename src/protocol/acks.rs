//! Replica acknowledgement ([`Builder::replicas`](crate::Builder::replicas)): after the
//! writes of an acquire or a renewal, `WAIT` until enough replicas have them.

use std::time::Duration;

use redis::aio::ConnectionLike;

use crate::error::Error;

/// How many replicas must acknowledge an acquire or a renewal, and how long to wait for
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Acks {
    /// At least 1.
    pub(crate) replicas: usize,
    /// At least 1 ms (`WAIT` with 0 would block until they answer).
    pub(crate) timeout: Duration,
}

impl Acks {
    /// The timeout as `WAIT` takes it: whole milliseconds, at least 1.
    fn timeout_ms(self) -> u64 {
        u64::try_from(self.timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }
}

/// Sends `WAIT <replicas> <timeout>` on `conn`, after the writes this connection sent
/// for the lock at `key`: `Ok` once `acks.replicas` replicas have acknowledged every one
/// of them, [`Error::NotReplicated`] when fewer did within the timeout.
pub(crate) async fn wait<C: ConnectionLike>(
    conn: &mut C,
    key: &str,
    acks: Acks,
) -> Result<(), Error> {
    let acked: usize = redis::cmd("WAIT")
        .arg(acks.replicas)
        .arg(acks.timeout_ms())
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(key, err))?;
    if acked >= acks.replicas {
        return Ok(());
    }
    Err(Error::NotReplicated {
        key: key.to_owned(),
        acked,
        wanted: acks.replicas,
    })
}
