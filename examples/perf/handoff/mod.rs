//! Row 6, the hand-off across two processes: process A (this one) takes the write lock
//! and tells process B (a child, [`peer`]) to wait for it; B says it waits, A releases,
//! and B reports the moment its wait returned. Row 12 runs the same over a quorum.

mod handle;
mod peer;

use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::raw::raw_id;
use crate::server::RedisServer;
use crate::table::{quantile, spread, Row};
use crate::{Result, PEER_ARG};
use handle::{connect, Handle};
pub(crate) use peer::peer;

/// Hand-offs measured, after a few unmeasured ones.
pub(crate) const HANDOFFS: usize = 200;
const HANDOFF_WARM_UP: usize = 10;
/// How long a waiter is left blocked before the holder releases (not counted); rows 6,
/// 12 and 13.
pub(crate) const BLOCKED: Duration = Duration::from_millis(5);

/// What the two processes of a hand-off (rows 6 and 12) run: the library or the raw
/// baseline, on one server or on a quorum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// `SET NX PX`; the waiter wakes on `SUBSCRIBE <key>:released`.
    Raw,
    /// A mutex on one server; B's has a notifier.
    Library,
    /// The raw quorum acquire and release (`raw.rs`); the waiter wakes on any node's
    /// `<key>:released` message.
    QuorumRaw,
    /// A mutex over a quorum; B's has `Notifier::quorum`.
    QuorumLibrary,
}

impl Side {
    const ALL: [Self; 4] = [
        Self::Raw,
        Self::Library,
        Self::QuorumRaw,
        Self::QuorumLibrary,
    ];

    /// How the waiting process is told which side it runs (`--peer handoff MODE`).
    fn mode(self) -> &'static str {
        match self {
            Self::Raw => "raw",
            Self::Library => "library",
            Self::QuorumRaw => "quorum-raw",
            Self::QuorumLibrary => "quorum-library",
        }
    }

    /// The side of `mode`, as [`mode`](Self::mode) names it.
    fn parse(mode: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|side| side.mode() == mode)
            .ok_or_else(|| format!("unknown hand-off mode {mode:?}").into())
    }

    /// The key both processes lock: the library prefixes the mutex name, raw uses the
    /// full lock key.
    fn key(self) -> &'static str {
        match self {
            Self::Raw => "perf-handoff-raw",
            Self::Library => "k",
            Self::QuorumRaw => "perf-handoff-qraw",
            Self::QuorumLibrary => "qk",
        }
    }
}

/// Nanoseconds since the Unix epoch, to compare instants across processes.
fn wall_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as i128)
}

/// Hand-off latencies (ns) from A's release returning to B's acquire returning, B being
/// a child process, both running `side` on the servers of `urls`.
pub(crate) async fn handoffs(urls: &[String], side: Side) -> Result<Vec<i128>> {
    let key = side.key();
    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .args([PEER_ARG, "handoff", side.mode(), &urls.join(","), key])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut to_b = child.stdin.take().ok_or("no stdin for B")?;
    let mut from_b = BufReader::new(child.stdout.take().ok_or("no stdout for B")?).lines();
    let (clients, conns) = connect(urls).await?;
    let handle = Handle::new(side, &clients, &conns, false)?;
    let id = raw_id(1);
    let mut latencies = Vec::with_capacity(HANDOFFS);
    for round in 0..HANDOFF_WARM_UP + HANDOFFS {
        let held = handle.take(key, &id, None).await?;
        to_b.write_all(b"go\n").await?;
        to_b.flush().await?;
        let line = from_b.next_line().await?.ok_or("B exited")?;
        if line != "waiting" {
            return Err(format!("B said {line:?}").into());
        }
        // B sent its first attempt right after saying so: let it block.
        tokio::time::sleep(BLOCKED).await;
        handle.release(held, key, &id, true).await?;
        let released = wall_ns();
        let line = from_b.next_line().await?.ok_or("B exited")?;
        let acquired: i128 = line
            .strip_prefix("acquired ")
            .ok_or_else(|| format!("B said {line:?}"))?
            .parse()?;
        if round >= HANDOFF_WARM_UP {
            latencies.push(acquired - released);
        }
    }
    to_b.write_all(b"quit\n").await?;
    drop(to_b);
    let status = child.wait().await?;
    if !status.success() {
        return Err(format!("B exited with {status}").into());
    }
    Ok(latencies)
}

/// Row 6 on `server`: the library's hand-off next to the raw one.
pub(crate) async fn row(server: &RedisServer) -> Result<Row> {
    let urls = [server.url()];
    let mut raw = handoffs(&urls, Side::Raw).await?;
    let mut library = handoffs(&urls, Side::Library).await?;
    let negative = library.iter().chain(&raw).filter(|&&ns| ns < 0).count();
    let (lib_p50, raw_p50) = {
        library.sort_unstable();
        raw.sort_unstable();
        (quantile(&library, 0.5), quantile(&raw, 0.5))
    };
    let mut what = format!(
        "hand-off across two processes: A unlocks, B (notifier) was blocked in write(); \
         A's unlock returning to B's write returning, {HANDOFFS} hand-offs"
    );
    if negative > 0 {
        what.push_str(&format!(" ({negative} negative: clocks read out of order)"));
    }
    Ok(Row::new(
        "6",
        what,
        spread(&mut library),
        format!("{} (Pub/Sub wake + SET NX)", spread(&mut raw)),
        format!(
            "latency, p50 {:.1}× raw",
            lib_p50 as f64 / raw_p50.max(1) as f64
        ),
    ))
}
