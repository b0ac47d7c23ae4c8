//! Rows 10–13, quorum mode: the quorum next to its raw baseline and to the library on
//! its first node alone, measured in the same phases.

mod frozen;
mod frozen_phase;
mod handoff;
mod throughput;

use crate::server::RedisServer;
use crate::table::{push_rows, Row};

/// The nodes of the quorum, each a `redis-server` of its own on loopback.
const QUORUM_NODES: usize = 3;

/// Rows 10–13 on a quorum of servers started for them.
pub(crate) async fn rows(rows: &mut Vec<Row>, notes: &mut Vec<String>) {
    let servers: Result<Vec<RedisServer>, String> = (0..QUORUM_NODES)
        .map(|_| RedisServer::try_start())
        .collect();
    let servers = match servers {
        Ok(servers) => servers,
        Err(err) => {
            push_rows(rows, "10-13", "quorum", Err(err.into()));
            return;
        }
    };
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    eprintln!("rows 10-11: quorum throughput ...");
    let made = throughput::rows(&servers, notes).await;
    push_rows(rows, "10-11", "quorum throughput", made);
    eprintln!("row 12: quorum hand-off across two processes ...");
    let made = handoff::rows(&urls).await;
    push_rows(rows, "12", "quorum hand-off across two processes", made);
    eprintln!("row 13: one node of {QUORUM_NODES} frozen ...");
    let made = frozen::rows(&servers).await;
    push_rows(rows, "13", "one node frozen", made);
}
