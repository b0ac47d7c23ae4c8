//! The servers the `--url`s name: one server, or the N >= 2 nodes of a quorum, each with
//! its client and its password-free name.

use redis::aio::MultiplexedConnection;
use redis::RedisResult;
use redismutex::Quorum;

use crate::exit;
use crate::lock::link::Link;

/// What a one-shot command (`unlock`, `renew`) reaches: the one server's connection, or
/// the quorum of the nodes (refused by `Quorum::new` when it cannot be one).
pub(crate) enum Reached {
    Server(MultiplexedConnection),
    Quorum(Result<Quorum<Link>, redismutex::Error>),
}

/// One server named by `--url`.
#[derive(Debug)]
pub(crate) struct Node {
    /// Its place among the `--url`s, from 1.
    pub(crate) index: usize,
    /// The URL as given (it may hold a password: print [`Node::name`] instead).
    pub(crate) url: String,
    pub(crate) client: redis::Client,
}

impl Node {
    /// The URL without its password.
    pub(crate) fn server(&self) -> String {
        exit::server(&self.url)
    }

    /// `node <index> <url without password>`.
    pub(crate) fn name(&self) -> String {
        format!("node {} {}", self.index, self.server())
    }
}

/// The servers of one run, in the order of the `--url`s.
#[derive(Debug)]
pub(crate) struct Nodes {
    nodes: Vec<Node>,
}

impl Nodes {
    /// A client for each URL. An invalid URL is a Redis error about `key` (exit code
    /// [`exit::REDIS`], as with one URL); a server named twice would count twice
    /// towards a majority, so it is a usage error ([`exit::USAGE`]).
    pub(crate) fn open(urls: &[String], key: &str) -> Result<Self, u8> {
        let mut nodes: Vec<Node> = Vec::with_capacity(urls.len());
        for (index, url) in (1..).zip(urls) {
            let client = redis::Client::open(url.as_str())
                .map_err(|err| exit::redis_error(url, key, &err))?;
            let node = Node {
                index,
                url: url.clone(),
                client,
            };
            if let Some(twin) = nodes.iter().find(|seen| same_server(seen, &node)) {
                eprintln!(
                    "redismutex: {} and {} are the same server; a quorum needs distinct \
                     nodes",
                    twin.name(),
                    node.name()
                );
                return Err(exit::USAGE);
            }
            nodes.push(node);
        }
        Ok(Self { nodes })
    }

    /// The nodes, in the order of the `--url`s.
    pub(crate) fn list(&self) -> &[Node] {
        &self.nodes
    }

    /// A password-free name for all the nodes, for messages about the quorum:
    /// `quorum of 3 nodes (redis://a:6379, redis://b:6379, redis://c:6379)`.
    pub(crate) fn name(&self) -> String {
        let servers: Vec<String> = self.nodes.iter().map(Node::server).collect();
        format!(
            "quorum of {} nodes ({})",
            self.nodes.len(),
            servers.join(", ")
        )
    }

    /// Connects to the one server, or to every node of the quorum (a node that cannot be
    /// reached is a quorum member without a connection); with it, a password-free name
    /// of the servers for messages. The exit code when the one server cannot be reached
    /// (a Redis error about `key`).
    pub(crate) async fn reach(&self, key: &str) -> Result<(String, Reached), u8> {
        let conns = self.connect().await;
        if let [node] = self.list() {
            return match conns.into_iter().next() {
                Some(Ok(conn)) => Ok((node.server(), Reached::Server(conn))),
                Some(Err(err)) => Err(exit::redis_error(&node.url, key, &err)),
                None => Err(exit::REDIS),
            };
        }
        let links = self
            .list()
            .iter()
            .zip(conns)
            .map(|(node, conn)| Link::new(node.client.clone(), conn.ok()));
        Ok((self.name(), Reached::Quorum(Quorum::new(links))))
    }

    /// A multiplexed connection to each node (as one server gets: redis-rs's default
    /// timeouts), made at the same time, in the order of the nodes.
    pub(crate) async fn connect(&self) -> Vec<RedisResult<MultiplexedConnection>> {
        let tasks: Vec<_> = self
            .nodes
            .iter()
            .map(|node| {
                let client = node.client.clone();
                tokio::spawn(async move { client.get_multiplexed_async_connection().await })
            })
            .collect();
        let mut conns = Vec::with_capacity(tasks.len());
        for task in tasks {
            conns.push(task.await.unwrap_or_else(|err| {
                Err(redis::RedisError::from((
                    redis::ErrorKind::Client,
                    "connecting failed",
                    err.to_string(),
                )))
            }));
        }
        conns
    }
}

/// Whether two nodes name the same address (in any database: one server is one failure,
/// however many of its databases are named).
fn same_server(a: &Node, b: &Node) -> bool {
    let (a, b) = (
        a.client.get_connection_info(),
        b.client.get_connection_info(),
    );
    a.addr().to_string() == b.addr().to_string()
}
