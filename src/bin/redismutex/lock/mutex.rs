//! The mutex `lock` takes: on the one server, or in quorum mode over the nodes.

use std::sync::LazyLock;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redismutex::tokio_util::task::TaskTracker;
use redismutex::{Builder, Notifier, Quorum, RwMutex};

use super::link::Link;
use crate::args::LockArgs;
use crate::chain::chain;
use crate::exit;
use crate::nodes::Nodes;

/// The mutex's background tasks: the refresh, and over a quorum the releases on the
/// nodes past the majority, which `unlock` does not wait for.
static TASKS: LazyLock<TaskTracker> = LazyLock::new(TaskTracker::new);

/// How long the command waits at its end for the releases still in flight (each is
/// bounded by a tenth of the TTL, so this is only a cap).
const SETTLE: Duration = Duration::from_secs(2);

/// The tracker of the background tasks of a run's handles, which [`settle`] waits for:
/// also the `unlock --lease` and `renew --lease` handles', whose quorum calls leave the
/// nodes past the majority to background tasks.
pub(crate) fn tasks() -> TaskTracker {
    TASKS.clone()
}

/// Waits, at most [`SETTLE`], for the mutex's background tasks: the releases a quorum
/// sends to the nodes past the majority.
pub(crate) async fn settle() {
    TASKS.close();
    let _ = tokio::time::timeout(SETTLE, TASKS.wait()).await;
}

/// The mutex of one run.
pub(crate) enum Mutex {
    Server(RwMutex<MultiplexedConnection>),
    Quorum(RwMutex<Quorum<Link>>),
}

/// Connects to the server (or to every node at once) and builds the mutex with the
/// options of `args`; the exit code when that fails. With several nodes, a node that
/// cannot be reached is reported on stderr and the run goes on while a majority can be.
pub(crate) async fn build(nodes: &Nodes, args: &LockArgs, key: &str) -> Result<Mutex, u8> {
    let conns = nodes.connect().await;
    if let [node] = nodes.list() {
        let conn = match conns.into_iter().next() {
            Some(Ok(conn)) => conn,
            Some(Err(err)) => return Err(exit::redis_error(&node.url, key, &err)),
            None => return Err(exit::REDIS),
        };
        let notifier = notifier(Notifier::new(node.client.clone()), args).await?;
        return described(RwMutex::builder(conn, args.target.name.clone()), args)
            .hash_tag_keys(args.target.hash_tag_keys)
            .ttl(args.ttl)
            .lock_intent(args.intent)
            .task_tracker(TASKS.clone())
            .notifier(notifier)
            .build()
            .map(Mutex::Server)
            .map_err(usage);
    }
    let mut links = Vec::with_capacity(conns.len());
    let mut up = 0;
    for (node, conn) in nodes.list().iter().zip(conns) {
        let conn = match conn {
            Ok(conn) => {
                up += 1;
                Some(conn)
            }
            Err(err) => {
                let why = chain(&err);
                eprintln!("redismutex: {} is unreachable: {why}", node.name());
                None
            }
        };
        links.push(Link::new(node.client.clone(), conn));
    }
    let quorum = Quorum::new(links).map_err(usage)?;
    if up < quorum.majority() {
        eprintln!(
            "redismutex: {} lock key {key:?}: {up} of {} nodes reachable, {} needed",
            nodes.name(),
            quorum.nodes().len(),
            quorum.majority()
        );
        return Err(exit::REDIS);
    }
    let clients = nodes.list().iter().map(|node| node.client.clone());
    let notifier = notifier(Notifier::quorum(clients), args).await?;
    described(RwMutex::builder(quorum, args.target.name.clone()), args)
        .hash_tag_keys(args.target.hash_tag_keys)
        .ttl(args.ttl)
        .lock_intent(args.intent)
        .task_tracker(TASKS.clone())
        .notifier(notifier)
        .build()
        .map(Mutex::Quorum)
        .map_err(usage)
}

/// `notifier`, made to wait also on keyspace notifications with `--keyspace-events`,
/// once every server is found to have them on; else the exit code, with the error's
/// text (the server, and what to set) on stderr.
async fn notifier(notifier: Notifier, args: &LockArgs) -> Result<Notifier, u8> {
    if !args.keyspace_events {
        return Ok(notifier);
    }
    let notifier = notifier.keyspace_events();
    match notifier.check_keyspace_events().await {
        Ok(()) => Ok(notifier),
        Err(err) => {
            eprintln!("redismutex: {err}");
            Err(exit::REDIS)
        }
    }
}

/// `builder` recording each holder's description (host, pid, program, start time), with
/// `--label` when given: what `status` shows of a `lock` run.
fn described<C>(builder: Builder<C>, args: &LockArgs) -> Builder<C> {
    match &args.label {
        Some(label) => builder.holder_label(label.clone()),
        None => builder.describe_holder(true),
    }
}

/// Options the mutex refuses (a TTL too short, a name it cannot use).
fn usage(err: redismutex::Error) -> u8 {
    eprintln!("redismutex: {err}");
    exit::USAGE
}
