//! `status` with several `--url`s: each node's view of the lock side by side, a column
//! per node and a row per field, then whether a majority of them holds it the same way.
//! A node that does not answer is shown with its error; only when none answers does
//! `status` fail.

use serde::Serialize;

use super::cells::{self, Column};
use super::verdict::{self, Verdict};
use super::{print_json, read, table, Status};
use crate::args::StatusArgs;
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

/// Reads every node at once and prints their views and the verdict; gives the exit code.
pub(super) async fn run(nodes: &Nodes, key: &str, args: &StatusArgs) -> u8 {
    let views = views(nodes, key, args.permits).await;
    if views.iter().all(|view| !view.reachable) {
        for view in &views {
            let error = view.error.as_deref().unwrap_or("?");
            eprintln!("redismutex: {} lock key {key:?}: {error}", view.url);
        }
        return exit::REDIS;
    }
    let statuses: Vec<Option<&Status>> = views.iter().map(|view| view.status.as_ref()).collect();
    let quorum = verdict::verdict(&statuses);
    if args.json {
        return print_json(&Report {
            key: key.to_owned(),
            nodes: views,
            quorum,
        });
    }
    print!("{}{}", side_by_side(&views), verdict::text(&quorum));
    0
}

/// Each node's view, read from every node at once.
async fn views(nodes: &Nodes, key: &str, permits: Option<u32>) -> Vec<View> {
    let reads: Vec<_> = nodes
        .list()
        .iter()
        .map(|node| {
            let (client, key) = (node.client.clone(), key.to_owned());
            tokio::spawn(async move {
                let mut conn = client.get_multiplexed_async_connection().await?;
                read(&mut conn, &key, permits).await
            })
        })
        .collect();
    let mut views = Vec::with_capacity(reads.len());
    for (node, task) in nodes.list().iter().zip(reads) {
        let (status, error) = match task.await {
            Ok(Ok(status)) => (Some(status), None),
            Ok(Err(err)) => (None, Some(exit::message(&err))),
            Err(err) => (None, Some(err.to_string())),
        };
        views.push(View {
            node: node.index,
            url: node.server(),
            reachable: status.is_some(),
            error,
            status,
        });
    }
    views
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
