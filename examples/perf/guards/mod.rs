//! Rows 9 and 15: idle write guards, each run held by a process of its own (a child of
//! the runner, so no memory freed by earlier rows is reused) on a `redis-server` of its
//! own. Row 9 holds 10,000 and 100,000 guards with a TTL of 4 s, and 100,000 with 12 s;
//! row 15 (`-- million`) holds 1,000,000 with 30 s. Each run:
//!
//! - acquires the guards on distinct keys of one mutex over one connection, a bounded
//!   number of requests in flight, and times it;
//! - measures the client's RSS growth, and the server's `used_memory` and RSS growth,
//!   per guard;
//! - over [`WINDOWS`](child::WINDOWS) windows of ttl/2, measures the client's and the server's CPU time
//!   (`/proc/<pid>/stat`) over the wall time, and counts renewals as `PEXPIRE` calls
//!   (`INFO commandstats`): a writer's renewal runs exactly one `PEXPIRE`, however
//!   renewals are grouped into scripts or pipelines;
//! - drops every guard, waits until none of their lock keys (`Guard::key`) exists, for
//!   at most [`RELEASE_WAIT`](child::RELEASE_WAIT) past the TTL, and reports how many were left, when the last
//!   went, and how many went by TTL expiry (`expired_keys`) instead of being released;
//!   then counts the keys under the mutex's name other than fence counters.
//!
//! The runner (this module) starts each run as a child process ([`child`]), which looks
//! at its server through [`inspect`], and reads back the figures it prints.

pub(crate) mod child;
pub(crate) mod inspect;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use crate::table::{push_rows, Row};
use crate::{Result, PEER_ARG};
pub(crate) use child::peer;

/// One run: its row, how many guards, their mutex's TTL, and how many acquires may be in
/// flight at once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GuardRun {
    pub(crate) id: &'static str,
    pub(crate) guards: usize,
    pub(crate) ttl: Duration,
    pub(crate) in_flight: usize,
}

/// Row 9. A 4 s TTL asks 100k guards for 50k renewals a second, so 100k also runs with a
/// longer one.
pub(crate) const ROW_9: [GuardRun; 3] = [
    GuardRun {
        id: "9a",
        guards: 10_000,
        ttl: Duration::from_secs(4),
        in_flight: 500,
    },
    GuardRun {
        id: "9b",
        guards: 100_000,
        ttl: Duration::from_secs(4),
        in_flight: 500,
    },
    GuardRun {
        id: "9c",
        guards: 100_000,
        ttl: Duration::from_secs(12),
        in_flight: 500,
    },
];

/// Row 15, `-- million`.
pub(crate) const MILLION: GuardRun = GuardRun {
    id: "15",
    guards: 1_000_000,
    ttl: Duration::from_secs(30),
    in_flight: 1_000,
};

/// The mutex's name: its lock keys are `perf-guards:<i>`.
pub(super) const NAME: &str = "perf-guards";
/// The guards run as `--peer guards N TTL_MS IN_FLIGHT`.
pub(crate) const ROLE: &str = "guards";

/// The rows of `runs`, each measured in a child process; details go to `notes`.
pub(crate) async fn rows(runs: &[GuardRun], rows: &mut Vec<Row>, notes: &mut Vec<String>) {
    for &run in runs {
        let what = format!(
            "{} idle write guards on distinct keys, ttl {} s, own process: client RSS per \
             guard; redis-server used_memory (and RSS) per guard; client / server CPU while \
             idle; renewals per guard per ttl/2 (PEXPIRE calls, commandstats); lock keys \
             left after the guards are dropped",
            run.guards,
            run.ttl.as_secs()
        );
        eprintln!(
            "row {}: {} guards, ttl {} s ...",
            run.id,
            run.guards,
            run.ttl.as_secs()
        );
        let made = row(run, &what, notes).await.map(|row| vec![row]);
        push_rows(rows, run.id, &what, made);
    }
}

/// One run's row, measured in a child process; its details go to `notes`.
async fn row(run: GuardRun, what: &str, notes: &mut Vec<String>) -> Result<Row> {
    let m = in_child(run).await?;
    notes.push(note(run, &m)?);
    Ok(Row::new(run.id, what, library(&m)?, raw(&m)?, ratio(&m)?))
}

/// [`peer`] in a child process for `run`; its progress goes to this process's stderr.
async fn in_child(run: GuardRun) -> Result<Measured> {
    let out = tokio::process::Command::new(std::env::current_exe()?)
        .args([
            PEER_ARG,
            ROLE,
            &run.guards.to_string(),
            &run.ttl.as_millis().to_string(),
            &run.in_flight.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?
        .wait_with_output()
        .await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix("guards\t"))
        .ok_or_else(|| {
            format!(
                "the {}-guard process exited with {}",
                run.guards, out.status
            )
        })?;
    let figures = line
        .split('\t')
        .filter_map(|field| field.split_once('='))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    Ok(Measured(figures))
}

/// The figures a child printed.
struct Measured(BTreeMap<String, String>);

impl Measured {
    fn text(&self, name: &str) -> Result<&str> {
        self.0
            .get(name)
            .map(String::as_str)
            .ok_or_else(|| format!("no {name} in the child's figures").into())
    }

    fn num(&self, name: &str) -> Result<f64> {
        Ok(self.text(name)?.parse()?)
    }
}

/// The library's cell.
fn library(m: &Measured) -> Result<String> {
    Ok(format!(
        "{:.0} B/guard; server {:.0} B/guard (RSS {:.0} B); CPU client {:.0}% / server \
         {:.0}% of a core ({:.0} µs client CPU per renewal); {:.2} renewals; lock keys left \
         after drop: {} ({:.1} s after the drop; {} went by TTL); acquired in {:.1} s",
        m.num("client_bytes")?,
        m.num("server_used_bytes")?,
        m.num("server_rss_bytes")?,
        m.num("client_cpu")? * 100.0,
        m.num("server_cpu")? * 100.0,
        m.num("client_us_per_renewal")?,
        m.num("renewals")?,
        m.text("keys_left")?,
        m.num("keys_gone_s")?,
        m.text("expired")?,
        m.num("acquired_s")?,
    ))
}

fn raw(m: &Measured) -> Result<String> {
    Ok(format!(
        "{:.0} B/lock (key + id strings); 1 PEXPIRE (ideal, not measured)",
        m.num("raw_bytes")?
    ))
}

fn ratio(m: &Measured) -> Result<String> {
    Ok(format!(
        "client memory {:.1}× raw",
        m.num("client_bytes")? / m.num("raw_bytes")?.max(1.0)
    ))
}

fn note(run: GuardRun, m: &Measured) -> Result<String> {
    Ok(format!(
        "row {} ({} guards, ttl {} s, {} acquires in flight, own process and server): \
         client RSS {:.0} MB, redis-server RSS {:.0} MB once acquired; \
         {} guards cancelled by the end of the windows; {:.2} EVALSHA/EVAL per guard per \
         ttl/2; {} keys under the name other than fence counters at the end; {} failed \
         acquires made again; commands per guard per ttl/2: {}",
        run.id,
        run.guards,
        run.ttl.as_secs(),
        run.in_flight,
        m.num("client_rss")? / 1e6,
        m.num("server_rss")? / 1e6,
        m.text("cancelled")?,
        m.num("evals")?,
        m.text("stray_keys")?,
        m.text("acquire_retries")?,
        m.text("calls")?,
    ))
}
