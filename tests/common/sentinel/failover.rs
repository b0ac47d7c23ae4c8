//! Failovers of a [`Sentinels`] deployment: waiting for one after the primary was
//! killed or frozen, and forcing one with `SENTINEL FAILOVER`.
//!
//! A forced failover promotes a replica within about 2 s, but the old primary, which
//! still answers, is left a master that takes writes: Sentinel lists it as a replica of
//! the new primary and turns it into one (`+convert-to-slave`, with `CLIENT KILL TYPE
//! normal`) only when its `INFO`, asked every 10 s, has said "master" for 8 s, about
//! 10 s after the promotion. The writes it took meanwhile are lost in the full resync.
//! [`sentinel_failover`](Sentinels::sentinel_failover) waits for that;
//! [`fast_sentinel_failover`](Sentinels::fast_sentinel_failover) demotes the old
//! primary itself, the way Sentinel will, as soon as every Sentinel names the new one.

use std::time::Instant;

use super::probe::{connect, master_addr, query, replication};
use super::settled::{poll_until_async, settled, POLL};
use super::{Sentinels, MASTER_NAME, SETTLE};

/// How many times [`Sentinels::fast_sentinel_failover`] forces a failover that Sentinel
/// undid by failing back to the old primary.
const FORCED_TRIES: usize = 3;

impl Sentinels {
    /// Waits until the Sentinels promote another node than the primary the deployment
    /// last settled with, and the deployment settles around it (the new primary says it
    /// is a master, the other running nodes replicate from it in sync, every Sentinel
    /// agrees). Returns the new primary; panics with the logs after [`SETTLE`].
    pub async fn failover(&mut self) -> usize {
        let old = self.nodes[self.settled_primary].port();
        let layout = self.layout();
        let promoted = move || match settled(&layout)? {
            port if port == old => Err(format!("{old} is still the primary")),
            port => Ok(port),
        };
        match poll_until_async(SETTLE, promoted).await {
            Ok(port) => {
                self.settled_primary = self.index(port);
                self.settled_primary
            }
            Err(why) => self.fail(&format!("no failover within {SETTLE:?}: {why}")),
        }
    }

    /// Forces a failover without a fault (`SENTINEL FAILOVER`), then waits as
    /// [`failover`](Self::failover) does, which includes the about 10 s until Sentinel
    /// demotes the old primary. Returns the new primary.
    pub async fn sentinel_failover(&mut self) -> usize {
        self.force_failover().await;
        self.failover().await
    }

    /// [`sentinel_failover`](Self::sentinel_failover), but as soon as every Sentinel
    /// names a new primary that says it is a master, the harness demotes the old
    /// primary as Sentinel would later (`REPLICAOF` the new one, then `CLIENT KILL TYPE
    /// normal`): a failover in about 2 s, for many in a row.
    ///
    /// Not sooner: a Sentinel whose links to the old primary are dropped just before it
    /// switches to the new one reconnects only a second later, takes the new primary
    /// for down (`down-after-milliseconds` is 1 s) and, with another Sentinel in the
    /// same state, fails over again, back to the old one. On a loaded machine a
    /// Sentinel's first link to the new primary can take that second too: when the
    /// deployment settles back on the old primary, the failover is forced again (up to
    /// [`FORCED_TRIES`] times).
    pub async fn fast_sentinel_failover(&mut self) -> usize {
        let old = self.nodes[self.settled_primary].port();
        for tried in 1..=FORCED_TRIES {
            let new = self.force_and_demote(old).await;
            let layout = self.layout();
            let settled_on = move || settled(&layout);
            match poll_until_async(SETTLE, settled_on).await {
                Ok(port) if port == old && tried < FORCED_TRIES => {
                    eprintln!("Sentinel failed back from {new} to {old}; forcing again");
                }
                Ok(port) if port != old => {
                    self.settled_primary = self.index(port);
                    return self.settled_primary;
                }
                Ok(_) => self.fail(&format!(
                    "Sentinel failed back to {old} after each of {FORCED_TRIES} forced failovers"
                )),
                Err(why) => self.fail(&format!("no failover within {SETTLE:?}: {why}")),
            }
        }
        unreachable!("the last try returns or fails")
    }

    /// Forces a failover away from the primary on `old`, waits until every Sentinel names
    /// a new one that says it is a master, and demotes `old` under it; the new primary.
    async fn force_and_demote(&mut self, old: u16) -> u16 {
        let sentinels: Vec<u16> = self.sentinels.iter().map(|s| s.port()).collect();
        self.force_failover().await;
        let promoted = move || match named_by_all(&sentinels)? {
            port if port == old => Err(format!("{old} is still named")),
            port if replication(port)?.master => Ok(port),
            port => Err(format!("{port} is named but not a master yet")),
        };
        let new = match poll_until_async(SETTLE, promoted).await {
            Ok(port) => port,
            Err(why) => self.fail(&format!("no promotion within {SETTLE:?}: {why}")),
        };
        let demoted = tokio::task::spawn_blocking(move || demote(old, new))
            .await
            .expect("the demotion does not panic");
        if let Err(why) = demoted {
            self.fail(&format!("cannot demote {old}: {why}"));
        }
        new
    }

    /// Sends `SENTINEL FAILOVER` to the first Sentinel, again while it answers that no
    /// replica is fit yet or a failover is in progress; panics after [`SETTLE`].
    async fn force_failover(&self) {
        let sentinel = self.sentinels[0].port();
        let deadline = Instant::now() + SETTLE;
        loop {
            let forced = tokio::task::spawn_blocking(move || {
                query::<()>(
                    sentinel,
                    redis::cmd("SENTINEL").arg("FAILOVER").arg(MASTER_NAME),
                )
            })
            .await
            .expect("SENTINEL FAILOVER does not panic");
            match forced {
                Ok(()) => return,
                Err(why) if Instant::now() >= deadline => {
                    self.fail(&format!("SENTINEL FAILOVER refused for {SETTLE:?}: {why}"))
                }
                Err(_) => tokio::time::sleep(POLL).await,
            }
        }
    }
}

/// The primary every Sentinel on `sentinels` names.
fn named_by_all(sentinels: &[u16]) -> Result<u16, String> {
    let named = sentinels
        .iter()
        .map(|&sentinel| master_addr(sentinel, MASTER_NAME))
        .collect::<Result<Vec<u16>, String>>()?;
    match named.split_first() {
        Some((first, rest)) if rest.iter().all(|port| port == first) => Ok(*first),
        _ => Err(format!("the Sentinels name {named:?}")),
    }
}

/// Turns the node on `old` into a replica of `new` and drops its clients, as Sentinel's
/// `+convert-to-slave` does (in a transaction, without its `CONFIG REWRITE`).
fn demote(old: u16, new: u16) -> Result<(), String> {
    redis::pipe()
        .atomic()
        .cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(new)
        .ignore()
        .cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .ignore()
        .query(&mut connect(old)?)
        .map_err(|err| format!("{old}: {err}"))
}
