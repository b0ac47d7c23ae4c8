//! Blocking, bounded questions to the processes of a Sentinel deployment: what a data
//! node says of its replication, and what a Sentinel says of the master it monitors.

use std::collections::HashMap;

pub use crate::common::blocking::{connect, query};

/// A data node's replication, from its `INFO replication`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replication {
    /// `role:master`.
    pub master: bool,
    /// The primary it replicates from, when a replica.
    pub master_port: Option<u16>,
    /// `master_link_status:up`: it is in sync with its primary.
    pub link_up: bool,
}

/// What the data node on `port` says of its replication.
pub fn replication(port: u16) -> Result<Replication, String> {
    let info: String = query(port, redis::cmd("INFO").arg("replication"))?;
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    Ok(Replication {
        master: field("role") == Some("master"),
        master_port: field("master_port").and_then(|port| port.parse().ok()),
        link_up: field("master_link_status") == Some("up"),
    })
}

/// A replica as a Sentinel sees it, from `SENTINEL REPLICAS <name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenReplica {
    pub port: u16,
    /// `slave` when it answers and nothing is wrong; else with `s_down`,
    /// `disconnected`, `promoted`, ...
    pub flags: String,
    /// `master-link-status` is `ok`.
    pub link_ok: bool,
    /// The primary it reported replicating from.
    pub master_port: Option<u16>,
}

/// The master a Sentinel monitors, as it sees it, from `SENTINEL MASTER <name>` and
/// `SENTINEL REPLICAS <name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenMaster {
    pub port: u16,
    /// `master` when it answers and no failover is in progress; else with `s_down`,
    /// `o_down`, `failover_in_progress`, ...
    pub flags: String,
    /// `num-other-sentinels`: the Sentinels it heard from.
    pub other_sentinels: usize,
    /// Every replica it knows, the lost ones too.
    pub replicas: Vec<SeenReplica>,
}

/// What the Sentinel on `port` says of the master named `name`.
pub fn seen_master(port: u16, name: &str) -> Result<SeenMaster, String> {
    let master: Vec<String> = query(port, redis::cmd("SENTINEL").arg("MASTER").arg(name))?;
    let master = pairs(master);
    let replicas: Vec<Vec<String>> = query(port, redis::cmd("SENTINEL").arg("REPLICAS").arg(name))?;
    let replicas = replicas
        .into_iter()
        .map(pairs)
        .map(|replica| SeenReplica {
            port: number(&replica, "port"),
            flags: text(&replica, "flags"),
            link_ok: text(&replica, "master-link-status") == "ok",
            master_port: replica.get("master-port").and_then(|p| p.parse().ok()),
        })
        .collect();
    Ok(SeenMaster {
        port: number(&master, "port"),
        flags: text(&master, "flags"),
        other_sentinels: number(&master, "num-other-sentinels"),
        replicas,
    })
}

/// The port of the primary the Sentinel on `port` names for `name`
/// (`SENTINEL GET-MASTER-ADDR-BY-NAME`): during a failover, the replica being promoted.
pub fn master_addr(port: u16, name: &str) -> Result<u16, String> {
    let (ip, master): (String, String) = query(
        port,
        redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(name),
    )?;
    if ip != "127.0.0.1" {
        return Err(format!("{port} names a primary on {ip}, not 127.0.0.1"));
    }
    master
        .parse()
        .map_err(|err| format!("{port} names port {master:?}: {err}"))
}

/// A flat `[field, value, field, value, ...]` reply as a map.
fn pairs(flat: Vec<String>) -> HashMap<String, String> {
    let mut map = HashMap::new();
    let mut flat = flat.into_iter();
    while let (Some(field), Some(value)) = (flat.next(), flat.next()) {
        map.insert(field, value);
    }
    map
}

fn text(map: &HashMap<String, String>, field: &str) -> String {
    map.get(field).cloned().unwrap_or_default()
}

/// The field as a number; a missing or unparsable one reads as the type's default, which
/// no check accepts (port 0, say).
fn number<T: std::str::FromStr + Default>(map: &HashMap<String, String>, field: &str) -> T {
    map.get(field)
        .and_then(|value| value.parse().ok())
        .unwrap_or_default()
}
