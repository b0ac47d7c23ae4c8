//! Process B of the hand-offs: the waiter, a child of the runner, driven by lines on its
//! standard input.

use futures_util::stream::select_all;
use tokio::sync::mpsc::UnboundedReceiver;

use super::handle::{connect, Handle, Messages};
use super::{wall_ns, Side};
use crate::locking::raw_subscribe;
use crate::raw::raw_id;
use crate::Result;

/// Process B of rows 6 and 12. For each `go` line on stdin: prints `waiting`, waits for
/// the write lock on `key` (library: a mutex with a notifier; raw: the raw waiter) on
/// the servers of `urls` (comma-separated: one, or a quorum's), prints `acquired
/// <wall-clock ns>` taken the moment the wait returned, and releases.
pub(crate) async fn peer(mode: &str, urls: &str, key: &str) -> Result<()> {
    let side = Side::parse(mode)?;
    let urls: Vec<String> = urls.split(',').map(str::to_string).collect();
    let (clients, conns) = connect(&urls).await?;
    let handle = Handle::new(side, &clients, &conns, true)?;
    let mut messages = match side {
        Side::Library | Side::QuorumLibrary => None,
        Side::Raw | Side::QuorumRaw => Some(subscribe(&clients, key).await?),
    };
    let id = raw_id(2);
    let mut lines = stdin_lines();
    while let Some(line) = lines.recv().await {
        if line != "go" {
            break;
        }
        println!("waiting");
        let held = handle.take(key, &id, messages.as_mut()).await?;
        let acquired = wall_ns();
        handle.release(held, key, &id, false).await?;
        println!("acquired {acquired}");
    }
    Ok(())
}

/// The raw waiter's release messages: its subscriptions to `<key>:released` on the
/// server of each of `clients`, merged.
async fn subscribe(clients: &[redis::Client], key: &str) -> Result<Messages> {
    let mut streams = Vec::new();
    for client in clients {
        streams.push(raw_subscribe(client, key).await?);
    }
    Ok(select_all(streams))
}

/// The lines of standard input as they come. tokio's stdin needs a feature this crate
/// does not enable: a thread reads it.
fn stdin_lines() -> UnboundedReceiver<String> {
    let (lines_tx, lines) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}
