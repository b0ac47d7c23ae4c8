//! `status` with several `--url`s: each node's view of the lock, one after the other,
//! then whether a majority of them holds it the same way. A node that does not answer
//! is shown with its error; only when none answers does `status` fail.

use serde::Serialize;

use super::verdict::{self, Verdict};
use super::{print_json, read, text, Status};
use crate::exit;
use crate::nodes::Nodes;

/// One node's view.
#[derive(Debug, Serialize)]
struct View {
    /// The node's place among the `--url`s, from 1.
    node: usize,
    /// Its URL without a password.
    url: String,
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
    key: String,
    nodes: Vec<View>,
    quorum: Verdict,
}

pub(super) async fn run(nodes: &Nodes, key: &str, json: bool) -> u8 {
    let reads: Vec<_> = nodes
        .list()
        .iter()
        .map(|node| {
            let (client, key) = (node.client.clone(), key.to_owned());
            tokio::spawn(async move {
                let mut conn = client.get_multiplexed_async_connection().await?;
                read(&mut conn, &key).await
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
    let mut out = String::new();
    for view in &views {
        out.push_str(&format!("node {} {}\n", view.node, view.url));
        match &view.status {
            Some(status) => {
                for line in text(status).lines() {
                    out.push_str(&format!("  {line}\n"));
                }
            }
            None => out.push_str(&format!(
                "  unreachable: {}\n",
                view.error.as_deref().unwrap_or("?")
            )),
        }
    }
    out.push_str(&verdict::text(&quorum));
    print!("{out}");
    0
}
