//! An exact note of who holds which lock, and when each key expires, right as a server is
//! frozen: in one transaction, `CLIENT PAUSE ALL` (no other client's command runs from
//! then on) and a read of the lock keys; the caller then SIGSTOPs the server before the
//! pause ends ([`PAUSE`]). No renewal can land between the read and the freeze, so the
//! expiries read are the keys' expiries while the server is frozen, not a renewal
//! behind (which an earlier read could be: its lead would then come out short by up to
//! `ttl / 2`, even below 0).

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

use crate::common::record::{HeldLock, HELD};

/// How long the other clients are held off: the server must be frozen by then.
pub const PAUSE: Duration = Duration::from_millis(500);

/// The note taken, and when; [`valid`](Self::valid) once the server is frozen.
#[derive(Debug)]
pub struct PausedNote {
    held: Vec<HeldLock>,
    at: Instant,
}

impl PausedNote {
    /// Pauses every other client of the server behind `conn` and reads lock keys `names`
    /// (all on that server; on a cluster node, `cross_slot`, they may be of several
    /// slots: the script declares none and may reach any key of the node, Redis 7.0 or
    /// newer; on one server, any version).
    pub async fn take(
        conn: &MultiplexedConnection,
        names: &[String],
        cross_slot: bool,
    ) -> PausedNote {
        let flags = if cross_slot {
            "#!lua flags=allow-cross-slot-keys\n"
        } else {
            ""
        };
        let script = format!("{flags}local KEYS = ARGV\n{HELD}");
        let read_us = crate::common::events::now_us();
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("CLIENT")
            .arg(&["PAUSE", &PAUSE.as_millis().to_string(), "ALL"])
            .ignore()
            .cmd("EVAL")
            .arg(script)
            .arg(0)
            .arg(names);
        let (rows,): (Vec<Vec<String>>,) = pipe
            .query_async(&mut conn.clone())
            .await
            .expect("pause the clients and read the lock keys");
        PausedNote {
            held: HeldLock::from_rows(rows, read_us),
            at: Instant::now(),
        }
    }

    /// The locks noted, if the server was frozen (called right after the SIGSTOP)
    /// well within [`PAUSE`] of the note; none otherwise (a renewal may have landed).
    pub fn valid(self) -> Vec<HeldLock> {
        match self.at.elapsed() < PAUSE / 2 {
            true => self.held,
            false => Vec::new(),
        }
    }
}
