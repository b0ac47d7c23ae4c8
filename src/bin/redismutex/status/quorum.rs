//! `status` with several `--url`s: each node's view of the lock side by side, a column
//! per node and a row per field, then whether a majority of them holds it the same way.
//! Each node is read as one server is, on its own connection and through its own handle
//! (an inspection over a `Quorum` is refused: its nodes' states may differ), all at once.
//! A node that does not answer is shown with its error; only when none answers does
//! `status` fail.

use serde::Serialize;

use super::cells::{self, Column};
use super::snapshot::Target;
use super::verdict::{self, Verdict};
use super::{print_json, read, table, Failure, Status};
use crate::chain::chain;
use crate::exit;
use crate::nodes::Nodes;

/// One node's view.
#[derive(Debug, Serialize)]
struct View {
    /// The node's place among the `--url`s, from 1.
    node: usize,
    /// Its URL without a password.
    url: String,
    /// Whether it answered.
    reachable: bool,
    /// Why it did not answer.
    error: Option<String>,
    /// What it shows, as `status` on that node alone would (when it answered).
    #[serde(flatten)]
    status: Option<Status>,
}

/// What `status --json` prints with several nodes.
#[derive(Debug, Serialize)]
struct Report {
    /// The lock key.
    key: String,
    /// Each node's view, in the order of the `--url`s.
    nodes: Vec<View>,
    /// What a majority of the nodes shows.
    quorum: Verdict,
}

/// Reads every node at once and prints their views and the verdict (as JSON with
/// `json`); gives the exit code.
pub(super) async fn run(nodes: &Nodes, target: &Target, json: bool) -> u8 {
    let key = target.lock_key();
    let reads = reads(nodes, target).await;
    let mut failures = reads.iter().filter_map(|read| read.as_ref().err());
    if let Some(usage) = failures.find(|failure| failure.is_usage()) {
        return usage.exit(&nodes.name(), key);
    }
    let views = views(nodes, reads);
    if views.iter().all(|view| !view.reachable) {
        for view in &views {
            let error = view.error.as_deref().unwrap_or("?");
            eprintln!("redismutex: {} lock key {key:?}: {error}", view.url);
        }
        return exit::REDIS;
    }
    let statuses: Vec<Option<&Status>> = views.iter().map(|view| view.status.as_ref()).collect();
    let quorum = verdict::verdict(&statuses);
    if json {
        return print_json(&Report {
            key: key.to_owned(),
            nodes: views,
            quorum,
        });
    }
    print!("{}{}", side_by_side(&views), verdict::text(&quorum));
    0
}

/// Each node's status, or why it gave none, read from every node at once.
async fn reads(nodes: &Nodes, target: &Target) -> Vec<Result<Status, Failure>> {
    let tasks: Vec<_> = nodes
        .list()
        .iter()
        .map(|node| {
            let (client, target) = (node.client.clone(), target.clone());
            tokio::spawn(async move { read(&client, &target).await })
        })
        .collect();
    let mut reads = Vec::with_capacity(tasks.len());
    for task in tasks {
        reads.push(task.await.unwrap_or_else(|err| Err(Failure::Task(err))));
    }
    reads
}

/// Each node's view, from what was read on it.
fn views(nodes: &Nodes, reads: Vec<Result<Status, Failure>>) -> Vec<View> {
    nodes
        .list()
        .iter()
        .zip(reads)
        .map(|(node, read)| {
            let (status, error) = match read {
                Ok(status) => (Some(status), None),
                Err(failure) => (None, Some(chain(failure.error()))),
            };
            View {
                node: node.index,
                url: node.server(),
                reachable: status.is_some(),
                error,
                status,
            }
        })
        .collect()
}

/// The views as a table: a column per node, headed `node I URL`, a row per field.
fn side_by_side(views: &[View]) -> String {
    let header: Vec<String> = views
        .iter()
        .map(|view| format!("node {} {}", view.node, view.url))
        .collect();
    let columns: Vec<Column<'_>> = views
        .iter()
        .map(|view| match &view.status {
            Some(status) => Ok(status),
            None => Err(view.error.as_deref().unwrap_or("?")),
        })
        .collect();
    table::render(&header, &cells::rows(&columns))
}
