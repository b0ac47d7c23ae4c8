//! A watcher of the lock keys' expiry on the servers, for the fire lead of the long run
//! (`tests/faults/long_run.rs`): every [`EVERY`] it reads each lock key's holders and
//! `PEXPIRETIME` over a connection of its own (never through a fault proxy) and notes
//! every (key, id, expiry) it has not seen yet. A guard's lead is then its key's
//! expiry as last read before its token fired, minus the time it fired: a lower bound
//! of the true lead, since a renewal the watcher did not see yet only moves the expiry
//! later. A read the faults hold up (a frozen server) is dropped after [`READ_BOUND`].

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::RedisResult;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::common::record::HeldLock;

/// How often the watcher reads.
pub const EVERY: Duration = Duration::from_millis(20);

/// How long one read may take before it is dropped.
pub const READ_BOUND: Duration = Duration::from_millis(200);

type Read = Pin<Box<dyn Future<Output = Vec<HeldLock>> + Send>>;

/// The running watcher; [`stop`](Self::stop) gives its notes.
#[derive(Debug)]
pub struct ExpiryWatch {
    notes: Arc<Mutex<Vec<HeldLock>>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl ExpiryWatch {
    /// Watches lock keys `names` on one server with one script per read, over a
    /// connection made again at once when a read fails: a connection that reconnects
    /// with a backoff after the server was killed could stay blind while renewals go
    /// through.
    pub fn server(client: redis::Client, names: Vec<String>) -> Self {
        let (node, names) = (Arc::new(Node::new(client)), Arc::new(names));
        Self::start(move || {
            let (node, names) = (Arc::clone(&node), Arc::clone(&names));
            Box::pin(async move { node.read(&names).await })
        })
    }

    /// Watches lock keys `names` over `conn` (the primary a Sentinel-following
    /// connection names) with one script per read.
    pub fn one<C>(conn: C, names: Vec<String>) -> Self
    where
        C: ConnectionLike + Clone + Send + Sync + 'static,
    {
        let names = Arc::new(names);
        Self::start(move || {
            let (mut conn, names) = (conn.clone(), Arc::clone(&names));
            Box::pin(async move { bounded(HeldLock::try_read(&mut conn, &names)).await })
        })
    }

    /// Watches lock keys `names` on a cluster: one `EVAL` per key (each key its own
    /// slot; no script cache to load on every master).
    pub fn each<C>(conn: C, names: Vec<String>) -> Self
    where
        C: ConnectionLike + Clone + Send + Sync + 'static,
    {
        let names = Arc::new(names);
        Self::start(move || {
            let (conn, names) = (conn.clone(), Arc::clone(&names));
            Box::pin(async move {
                let mut held = Vec::new();
                for name in names.iter() {
                    let mut conn = conn.clone();
                    held.extend(bounded(HeldLock::read_key(&mut conn, name)).await);
                }
                held
            })
        })
    }

    /// Watches lock keys `names` on the nodes of a quorum: a lock's expiry is the time
    /// by which fewer than a majority of the nodes hold it (a node that did not answer
    /// counts as not holding it, which keeps the lead a lower bound).
    pub fn majority(nodes: Vec<redis::Client>, names: Vec<String>) -> Self {
        let nodes: Arc<Vec<Node>> = Arc::new(nodes.into_iter().map(Node::new).collect());
        let names = Arc::new(names);
        Self::start(move || {
            let (nodes, names) = (Arc::clone(&nodes), Arc::clone(&names));
            Box::pin(async move {
                let mut per_node = Vec::new();
                for node in nodes.iter() {
                    per_node.push(node.read(&names).await);
                }
                majority_expiry(&per_node, nodes.len() / 2 + 1)
            })
        })
    }

    fn start(mut read: impl FnMut() -> Read + Send + 'static) -> Self {
        let notes = Arc::new(Mutex::new(Vec::new()));
        let (stop, mut stopped) = oneshot::channel();
        let kept = Arc::clone(&notes);
        let task = tokio::spawn(async move {
            let mut seen: HashMap<(String, String), u64> = HashMap::new();
            let mut tick = tokio::time::interval(EVERY);
            loop {
                tokio::select! {
                    _ = &mut stopped => return,
                    _ = tick.tick() => {}
                }
                for held in read().await {
                    let at = seen.entry((held.key.clone(), held.id.clone())).or_default();
                    if *at != held.expiry_us {
                        *at = held.expiry_us;
                        kept.lock().expect("notes lock").push(held);
                    }
                }
            }
        });
        Self {
            notes,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops the watcher; every note it took, in the order taken.
    pub async fn stop(mut self) -> Vec<HeldLock> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        std::mem::take(&mut *self.notes.lock().expect("notes lock"))
    }
}

impl Drop for ExpiryWatch {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// One server the watcher reads, over a connection of its own that a failed read drops.
struct Node {
    client: redis::Client,
    conn: tokio::sync::Mutex<Option<redis::aio::MultiplexedConnection>>,
}

impl Node {
    fn new(client: redis::Client) -> Self {
        Self {
            client,
            conn: tokio::sync::Mutex::new(None),
        }
    }

    /// Who holds lock keys `names` on the server; none if the read failed or took
    /// longer than [`READ_BOUND`] (the connection is then made again next time).
    async fn read(&self, names: &[String]) -> Vec<HeldLock> {
        let mut held = self.conn.lock().await;
        let read = tokio::time::timeout(READ_BOUND, async {
            if held.is_none() {
                *held = Some(self.client.get_multiplexed_async_connection().await?);
            }
            let conn = held.as_mut().expect("connected");
            HeldLock::try_read(conn, names).await
        })
        .await;
        match read {
            Ok(Ok(locks)) => locks,
            _ => {
                *held = None;
                Vec::new()
            }
        }
    }
}

/// The read's locks, or none if it failed or took longer than [`READ_BOUND`].
async fn bounded(read: impl Future<Output = RedisResult<Vec<HeldLock>>>) -> Vec<HeldLock> {
    match tokio::time::timeout(READ_BOUND, read).await {
        Ok(Ok(held)) => held,
        _ => Vec::new(),
    }
}

/// For each (key, id) held on at least `majority` nodes, the `majority`-th latest of
/// its expiries: when it stops being held on a majority.
pub fn majority_expiry(per_node: &[Vec<HeldLock>], majority: usize) -> Vec<HeldLock> {
    let mut by_lock: BTreeMap<(String, String), Vec<&HeldLock>> = BTreeMap::new();
    for held in per_node.iter().flatten() {
        by_lock
            .entry((held.key.clone(), held.id.clone()))
            .or_default()
            .push(held);
    }
    by_lock
        .into_values()
        .filter(|on| on.len() >= majority)
        .map(|mut on| {
            on.sort_by_key(|h| std::cmp::Reverse(h.expiry_us));
            let mut lock = on[majority - 1].clone();
            lock.read_us = on.iter().map(|h| h.read_us).max().unwrap_or(lock.read_us);
            lock
        })
        .collect()
}
