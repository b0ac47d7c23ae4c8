//! When a Sentinel deployment is settled: every Sentinel names the same primary and sees
//! it healthy, hears from every other Sentinel, and sees every other running data node
//! as a replica that answers; and the data nodes agree (the primary is a master, every
//! other running node replicates from it with its link up).
//!
//! What a Sentinel says of a replica's link and of its primary comes from its `INFO`,
//! which it asks a replica for only every 10 s while the primary is fine; so those are
//! read from the data nodes themselves, not from the Sentinels.

use std::time::{Duration, Instant};

use super::probe::{replication, seen_master, SeenMaster};

/// How often a wait looks again.
pub const POLL: Duration = Duration::from_millis(50);

/// The ports that make up a deployment, for [`settled`].
#[derive(Debug, Clone)]
pub struct Layout {
    /// The name the master is monitored under.
    pub name: &'static str,
    /// Every Sentinel.
    pub sentinels: Vec<u16>,
    /// The data nodes that run (neither frozen nor killed).
    pub running: Vec<u16>,
}

/// The primary's port when the deployment is settled, else why not.
pub fn settled(layout: &Layout) -> Result<u16, String> {
    let primary = agreed_primary(layout)?;
    if !layout.running.contains(&primary) {
        return Err(format!("the Sentinels name {primary}, which does not run"));
    }
    if !replication(primary)?.master {
        return Err(format!("{primary} does not say it is a master"));
    }
    for &node in layout.running.iter().filter(|&&node| node != primary) {
        let seen = replication(node)?;
        if seen.master || seen.master_port != Some(primary) || !seen.link_up {
            return Err(format!(
                "{node} does not replicate from {primary}: {seen:?}"
            ));
        }
    }
    Ok(primary)
}

/// The primary every Sentinel names and sees healthy, each hearing from every other
/// Sentinel and seeing every other running node as a replica that answers.
fn agreed_primary(layout: &Layout) -> Result<u16, String> {
    let mut agreed = None;
    for &sentinel in &layout.sentinels {
        let seen = seen_master(sentinel, layout.name)?;
        healthy(sentinel, &seen, layout)?;
        match agreed {
            None => agreed = Some(seen.port),
            Some(port) if port == seen.port => {}
            Some(port) => return Err(format!("Sentinels name {port} and {}", seen.port)),
        }
    }
    agreed.ok_or_else(|| "no Sentinel".to_string())
}

/// Whether what the Sentinel on `sentinel` sees is a settled deployment.
fn healthy(sentinel: u16, seen: &SeenMaster, layout: &Layout) -> Result<(), String> {
    if seen.flags != "master" {
        return Err(format!(
            "Sentinel {sentinel} flags the master {}",
            seen.flags
        ));
    }
    if seen.other_sentinels != layout.sentinels.len() - 1 {
        return Err(format!(
            "Sentinel {sentinel} hears from {} other Sentinels",
            seen.other_sentinels
        ));
    }
    for &node in layout.running.iter().filter(|&&node| node != seen.port) {
        let replica = seen.replicas.iter().find(|replica| replica.port == node);
        if replica.is_none_or(|replica| replica.flags != "slave") {
            return Err(format!(
                "Sentinel {sentinel} does not see {node} as a replica that answers: \
                 {replica:?}"
            ));
        }
    }
    Ok(())
}

/// Calls `check` every [`POLL`] until it succeeds or `bound` has passed, blocking the
/// thread; gives its last error then.
pub fn poll_until<T>(
    bound: Duration,
    check: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    crate::common::blocking::poll_until(bound, POLL, check)
}

/// [`poll_until`] for async code: each check runs on a blocking thread, and the waits
/// between them let the runtime's other tasks go on.
pub async fn poll_until_async<T, F>(bound: Duration, check: F) -> Result<T, String>
where
    T: Send + 'static,
    F: Fn() -> Result<T, String> + Send + Sync + Clone + 'static,
{
    let deadline = Instant::now() + bound;
    loop {
        let attempt = check.clone();
        let result = tokio::task::spawn_blocking(attempt)
            .await
            .expect("a check does not panic");
        match result {
            Ok(value) => return Ok(value),
            Err(why) if Instant::now() >= deadline => return Err(why),
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}
