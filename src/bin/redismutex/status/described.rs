//! Who each holder is, as it described itself when it took the lock
//! (`LockState::holder_info`, written by a handle with `Builder::describe_holder`, as every
//! `lock` run is): the rows of `status`'s holder table, as `lslocks` shows a file's locks
//! (HOLDER, HOST, PID, PROGRAM, LABEL, SINCE, TTL), and of its JSON.

use redismutex::LockState;
use serde::Serialize;

use super::member::shown;
use super::millis;

/// One holder and what it recorded of itself; the fields are `None` for a holder that
/// recorded nothing (a handle without `describe_holder`, a Go program).
#[derive(Debug, Serialize)]
pub(super) struct Described {
    /// Its id, as `writer`, `readers` or a semaphore's `holders` name it.
    pub(super) id: String,
    /// The host name of its process.
    pub(super) host: Option<String>,
    /// Its process id.
    pub(super) pid: Option<u32>,
    /// When its process started, in milliseconds since the Unix epoch (which tells a
    /// reused pid apart); `None` where the host does not say.
    pub(super) process_started_ms: Option<i64>,
    /// Its program's name.
    pub(super) program: Option<String>,
    /// The label its handle was given (`Builder::holder_label`, `lock --label`).
    pub(super) label: Option<String>,
    /// When it took the lock, by the server's clock, in milliseconds since the Unix
    /// epoch.
    pub(super) since_ms: Option<i64>,
    /// How long its hold lives without a refresh, in milliseconds: the lock key's PTTL,
    /// or a permit's time left.
    pub(super) ttl_ms: Option<i64>,
}

/// The holders `ids` of the snapshot `state`, each with what it recorded; `ttl_ms` gives
/// each one's time left.
pub(super) fn of(
    state: &LockState,
    ids: &[String],
    ttl_ms: impl Fn(&str) -> Option<i64>,
) -> Vec<Described> {
    ids.iter()
        .map(|id| {
            let info = state.holder_info(id);
            Described {
                id: id.clone(),
                host: info.map(|info| info.host().to_owned()),
                pid: info.map(|info| info.pid()),
                process_started_ms: info
                    .and_then(|info| info.process_started_at())
                    .map(millis::since_epoch),
                program: info.map(|info| info.program().to_owned()),
                label: info.and_then(|info| info.label()).map(str::to_owned),
                since_ms: info.map(|info| millis::since_epoch(info.acquired_at())),
                ttl_ms: ttl_ms(id),
            }
        })
        .collect()
}

/// The table of `holders`, indented by two spaces under a `holders:` line, or nothing
/// when none of them recorded a description.
pub(super) fn table(holders: &[Described]) -> String {
    if holders.iter().all(|holder| holder.host.is_none()) {
        return String::new();
    }
    let header = ["HOLDER", "HOST", "PID", "PROGRAM", "LABEL", "SINCE", "TTL"].map(str::to_owned);
    let rows: Vec<[String; 7]> = holders.iter().map(row).collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|column| {
            rows.iter()
                .map(|row| row[column].chars().count())
                .chain([header[column].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = "holders:\n".to_owned();
    for cells in [header].iter().chain(&rows) {
        let line: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(&format!("  {}\n", line.join("  ").trim_end()));
    }
    out
}

/// One holder's cells; `-` for what it did not record.
fn row(holder: &Described) -> [String; 7] {
    let text = |value: &Option<String>| value.as_deref().map_or_else(|| "-".to_owned(), shown);
    [
        shown(&holder.id),
        text(&holder.host),
        holder
            .pid
            .map_or_else(|| "-".to_owned(), |pid| pid.to_string()),
        text(&holder.program),
        text(&holder.label),
        holder.since_ms.map_or_else(|| "-".to_owned(), since),
        holder
            .ttl_ms
            .map_or_else(|| "-".to_owned(), |ms| format!("{ms} ms")),
    ]
}

/// A time in milliseconds since the Unix epoch as RFC 3339, to the second, in UTC.
fn since(ms: i64) -> String {
    let Ok(ms) = u64::try_from(ms) else {
        return ms.to_string();
    };
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// One line per described holder, for a node's cell in the side-by-side table of a
/// quorum: `<id> <host> pid <pid> <program> <label>`.
pub(super) fn lines(holders: &[Described]) -> Vec<String> {
    holders
        .iter()
        .filter(|holder| holder.host.is_some())
        .map(|holder| {
            let [id, host, pid, program, label, ..] = row(holder);
            format!("{id} {host} pid {pid} {program} {label}")
        })
        .collect()
}
