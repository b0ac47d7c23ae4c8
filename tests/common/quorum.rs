//! Quorum mode's test bed: N private `redis-server`s (each test starts its own, on free
//! loopback ports, never 6379), a [`Quorum`] over fresh connections to them, and faults on
//! chosen nodes: freeze (SIGSTOP) and thaw (SIGCONT), kill (SIGKILL), and restart empty on
//! the same port.

use std::future::Future;
use std::time::Duration;

use redis::aio::{ConnectionManager, MultiplexedConnection};
use redismutex::Quorum;

use super::{raw, RedisServer};

/// What is done to a node that should stop answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// SIGSTOP: connections stay open and nothing is answered, so only a timeout ends a
    /// request.
    Freeze,
    /// SIGKILL: connections are reset and refused, so requests fail at once.
    Kill,
}

/// `n` running `redis-server`s, killed when dropped (frozen ones too: SIGKILL ends a
/// stopped process).
#[derive(Debug)]
pub struct Nodes {
    servers: Vec<RedisServer>,
    frozen: Vec<bool>,
}

impl Nodes {
    /// Starts `n` servers, side by side.
    pub fn start(n: usize) -> Self {
        let servers: Vec<RedisServer> = std::thread::scope(|scope| {
            let started: Vec<_> = (0..n).map(|_| scope.spawn(RedisServer::start)).collect();
            started
                .into_iter()
                .map(|handle| handle.join().expect("a node started"))
                .collect()
        });
        Self {
            frozen: vec![false; n],
            servers,
        }
    }

    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// `n / 2 + 1`, the nodes a decision needs.
    pub fn majority(&self) -> usize {
        self.len() / 2 + 1
    }

    /// The most nodes that may fail with a majority left: `n - majority`.
    pub fn minority(&self) -> usize {
        self.len() - self.majority()
    }

    /// The fewest nodes whose failure leaves no majority: `minority + 1`.
    pub fn lost_majority(&self) -> usize {
        self.minority() + 1
    }

    pub fn server(&self, node: usize) -> &RedisServer {
        &self.servers[node]
    }

    /// One `redis::Client` per node, in order (for a notifier).
    pub fn clients(&self) -> Vec<redis::Client> {
        self.servers.iter().map(RedisServer::client).collect()
    }

    /// A new multiplexed connection to every node, in order. Make them before a node is
    /// frozen or killed: connecting to one hangs or fails.
    pub async fn conns(&self) -> Vec<MultiplexedConnection> {
        let mut conns = Vec::with_capacity(self.len());
        for server in &self.servers {
            conns.push(server.conn().await);
        }
        conns
    }

    /// A quorum of new multiplexed connections, one per node: a client of its own.
    pub async fn quorum(&self) -> Quorum<MultiplexedConnection> {
        Quorum::new(self.conns().await).expect("a quorum of nodes")
    }

    /// A mutex named `name` with `ttl` on a quorum of new connections ([`Nodes::quorum`]):
    /// a client of its own.
    pub async fn mutex(
        &self,
        name: &str,
        ttl: Duration,
    ) -> redismutex::RwMutex<Quorum<MultiplexedConnection>> {
        redismutex::RwMutex::builder(self.quorum().await, name)
            .ttl(ttl)
            .build()
            .expect("valid options")
    }

    /// A quorum of connection managers, which reconnect by themselves after a node is
    /// restarted.
    pub async fn managed_quorum(&self) -> Quorum<ConnectionManager> {
        let mut managers = Vec::with_capacity(self.len());
        for server in &self.servers {
            managers.push(server.manager().await);
        }
        Quorum::new(managers).expect("a quorum of nodes")
    }

    /// Does `fault` to each node of `nodes`.
    pub fn fault(&mut self, fault: Fault, nodes: impl IntoIterator<Item = usize>) {
        for node in nodes {
            match fault {
                Fault::Freeze => self.freeze(node),
                Fault::Kill => self.kill(node),
            }
        }
    }

    /// SIGSTOP: the node keeps its connections and answers nothing.
    pub fn freeze(&mut self, node: usize) {
        self.servers[node].pause();
        self.frozen[node] = true;
    }

    /// SIGCONT to every frozen node: it answers what it was sent meanwhile, in order.
    pub fn thaw_all(&mut self) {
        for (server, frozen) in self.servers.iter().zip(&mut self.frozen) {
            if *frozen {
                server.resume();
                *frozen = false;
            }
        }
    }

    /// SIGKILL, and waits for the process to exit.
    pub fn kill(&mut self, node: usize) {
        self.servers[node].stop();
        self.frozen[node] = false;
    }

    /// Kills the node and starts it again on the same port, empty (no persistence).
    /// Connections made before do not come back; connection managers do.
    pub fn restart_empty(&mut self, node: usize) {
        self.servers[node].restart();
        self.frozen[node] = false;
    }

    /// Every node's log, for failure messages.
    pub fn logs(&self) -> String {
        self.servers
            .iter()
            .enumerate()
            .map(|(node, server)| {
                format!("--- node {node} ({}) ---\n{}", server.url(), server.log())
            })
            .collect()
    }
}

/// The bound the library puts on each node's reply: a tenth of the TTL.
pub fn per_node_bound(ttl: Duration) -> Duration {
    ttl / 10
}

/// The counter at `fence` on `conn`, `None` when there is none.
pub async fn counter(conn: &MultiplexedConnection, fence: &str) -> Option<u64> {
    raw::get(conn, fence).await.map(|value| {
        value
            .parse()
            .unwrap_or_else(|err| panic!("{fence} = {value:?}: {err}"))
    })
}

/// Waits up to [`LIVENESS`](super::LIVENESS) until `check` holds on every node of
/// `conns` (a node that is not part of the majority an acquire or release was decided at
/// may answer a little later); panics naming the nodes where it does not, and `what`.
pub async fn on_every_node<F, Fut>(conns: &[MultiplexedConnection], what: &str, check: F)
where
    F: Fn(MultiplexedConnection) -> Fut,
    Fut: Future<Output = bool>,
{
    let check = &check;
    let everywhere = move || async move {
        for conn in conns {
            if !check(conn.clone()).await {
                return false;
            }
        }
        true
    };
    if super::eventually(everywhere).await {
        return;
    }
    let mut failing = Vec::new();
    for (node, conn) in conns.iter().enumerate() {
        if !check(conn.clone()).await {
            failing.push(node);
        }
    }
    panic!(
        "not on nodes {failing:?} after {:?}: {what}",
        super::LIVENESS
    );
}

/// Every node holds `key` as the writer's string `id`.
pub async fn written_everywhere(conns: &[MultiplexedConnection], key: &str, id: &str) {
    on_every_node(conns, &format!("{key} = {id}"), |conn| async move {
        raw::get(&conn, key).await.as_deref() == Some(id)
    })
    .await;
}

/// Every node holds `key` as the set of readers `ids`.
pub async fn read_everywhere(conns: &[MultiplexedConnection], key: &str, ids: &[&str]) {
    let mut ids: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
    ids.sort();
    let ids = &ids;
    // A node the downgrade's majority did not wait for may still hold the writer's string.
    on_every_node(conns, &format!("{key} = {ids:?}"), |mut conn| async move {
        let members: Option<Vec<String>> = redis::cmd("SMEMBERS")
            .arg(key)
            .query_async(&mut conn)
            .await
            .ok();
        members.is_some_and(|mut members| {
            members.sort();
            &members == ids
        })
    })
    .await;
}

/// Every node's counter at `fence` is at least `token`.
pub async fn raised_everywhere(conns: &[MultiplexedConnection], fence: &str, token: u64) {
    on_every_node(conns, &format!("{fence} >= {token}"), |conn| async move {
        counter(&conn, fence)
            .await
            .is_some_and(|count| count >= token)
    })
    .await;
}

/// No node holds `key`.
pub async fn gone_everywhere(conns: &[MultiplexedConnection], key: &str) {
    on_every_node(conns, &format!("{key} is gone"), |conn| async move {
        !raw::exists(&conn, key).await
    })
    .await;
}

/// Generates, for each `helper(n: usize)`, a module `helper` with the tests `on_3_nodes`
/// and `on_5_nodes`, which run it with 3 and 5 nodes.
#[allow(unused_macros)]
macro_rules! on_3_and_5_nodes {
    ($($helper:ident),* $(,)?) => {$(
        mod $helper {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_3_nodes() {
                crate::common::init_tracing();
                super::$helper(3).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_5_nodes() {
                crate::common::init_tracing();
                super::$helper(5).await;
            }
        }
    )*};
}
#[allow(unused_imports)]
pub(crate) use on_3_and_5_nodes;
