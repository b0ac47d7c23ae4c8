//! Quorum mode: one lock over several independent Redis masters, held while a majority
//! of them holds it (the Redis distlock algorithm, "Redlock", redis.io "Distributed Locks
//! with Redis"). [`Quorum`] is the user's list of nodes; [`Majority`] is the backend made
//! of it, which sends every call to all nodes at once and counts the answers
//! (`round.rs`): acquire in two rounds (`attempt.rs`, and for a set of keys `set.rs`),
//! refresh, release and downgrade (`keep.rs`), an upgradable reader's upgrade and its
//! turn into a plain reader (`upgrade.rs`); a lease's hold moved to a new id
//! (`attach.rs`). Each node keeps the single-server key
//! layout.

mod attach;
mod attempt;
mod force;
mod keep;
mod leader;
mod round;
mod set;
mod top_up;
mod upgrade;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::task::TaskTracker;

pub(crate) use round::majority;
use round::Answers;

use super::direct::Direct;
use super::{Backend, Renewals};
use crate::error::Error;
use crate::lock_state::LockState;
use crate::notify::hub::Hub;
use crate::observe::Meters;
use crate::protocol::calls::{
    AttachPart, Attached, AttemptKind, Call, Holder, Leftovers, Renewal, Retake, SetPart, UpgradeOp,
};
use crate::protocol::exec::{Access, Executed};
use crate::protocol::id::Id;
use crate::protocol::inspect::Form;
use crate::protocol::keys::Keys;
use crate::protocol::leader::LeaderRead;
use crate::protocol::replies::{Attempt, Downgraded, SetAttempt, Unlocked, Upgraded};
use crate::protocol::topology::Topology;
use crate::spawner::Spawner;

/// Each node's call is bounded by this fraction of the TTL: a frozen node then costs an
/// acquire at most a tenth of the TTL, and leaves it most of its validity. The Redis
/// distlock page asks for a per-node timeout "small compared to the total lock
/// auto-release time"; 5–10 % is what the quorum design of this crate chose.
const NODE_BOUND_DIVISOR: u64 = 10;

/// The nodes of a quorum: independent Redis masters (not replicas of each other, not the
/// nodes of one Redis Cluster), one redis-rs connection to each. A lock made over a
/// quorum ([`RwMutex::new`](crate::RwMutex::new)) is held while a majority of them
/// (`N / 2 + 1`) holds it; the [quorum guide](crate::guide::quorum) says when to use it
/// and what it needs.
///
/// The connections must reach distinct, independent servers: the same server given twice
/// counts twice toward a majority, which the crate cannot detect. Each node's call is
/// bounded by a tenth of the TTL (at least 1 ms), so keep the TTL at least ten times the
/// slowest round trip to a node.
///
/// Use an odd number of nodes, 3 or more. A quorum of `N` nodes goes on working while
/// `(N - 1) / 2` of them are down: 1 of 3, 2 of 5. An even `N` tolerates no more failures
/// than `N - 1` nodes do (1 of 4, like 1 of 3), and costs one more call per request.
///
/// # Examples
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use redismutex::{Quorum, RwMutex};
///
/// let mut nodes = Vec::new();
/// for url in ["redis://10.0.0.1/", "redis://10.0.0.2/", "redis://10.0.0.3/"] {
///     let client = redis::Client::open(url)?;
///     nodes.push(client.get_multiplexed_async_connection().await?);
/// }
/// let mx = RwMutex::new(Quorum::new(nodes)?, "orders");
/// let guard = mx.write().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Quorum<C> {
    nodes: Vec<C>,
}

impl<C> Quorum<C> {
    /// A quorum of `nodes`, one connection per independent master, in a fixed order
    /// (`redismutex status` numbers the nodes from 1 in the order of its `--url`s).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOptions`] when `nodes` is empty.
    pub fn new(nodes: impl IntoIterator<Item = C>) -> Result<Self, Error> {
        let nodes: Vec<C> = nodes.into_iter().collect();
        if nodes.is_empty() {
            return Err(Error::InvalidOptions(
                "a quorum needs at least one node (use an odd number, 3 or more)".into(),
            ));
        }
        Ok(Self { nodes })
    }

    /// The connections to the nodes, in the order given.
    pub fn nodes(&self) -> &[C] {
        &self.nodes
    }

    /// How many nodes make a majority: `N / 2 + 1`.
    pub fn majority(&self) -> usize {
        majority(self.nodes.len())
    }
}

impl<C> fmt::Debug for Quorum<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Quorum")
            .field("nodes", &self.nodes.len())
            .finish_non_exhaustive()
    }
}

/// The backend of a mutex over a [`Quorum`]: every call goes to all nodes at once, each
/// bounded by a tenth of the TTL, and is decided by a majority.
pub(crate) struct Majority<C> {
    conns: Vec<C>,
    hub: Option<Arc<Hub>>,
    /// Where the nodes' calls run: each in a task of its own.
    tracker: Option<TaskTracker>,
    /// Where the nodes' errors are counted.
    meters: Meters,
}

impl<C: Clone> Majority<C> {
    /// The backend over `quorum`'s nodes, whose waiters wait on `hub` when there is one
    /// (a hub fed by one subscriber per node), and whose calls to each node run in tasks
    /// of `tracker` when there is one; a node's failed or unanswered call is counted in
    /// `meters`.
    pub(crate) fn new(
        quorum: &Quorum<C>,
        hub: Option<Arc<Hub>>,
        tracker: Option<TaskTracker>,
        meters: Meters,
    ) -> Self {
        Self {
            conns: quorum.nodes.clone(),
            hub,
            tracker,
            meters,
        }
    }
}

impl<C> Majority<C> {
    /// How long one node's call may take before it counts as unanswered.
    fn node_bound(&self, call: &Call) -> Duration {
        Duration::from_millis((call.ttl_ms / NODE_BOUND_DIVISOR).max(1))
    }
}

impl<C> Majority<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// One round of `call`'s lease: `each` (given the node's index and its backend) on
    /// every node at once, each in the lease's turn on its node and bounded by `bound`,
    /// until `done`; see [`round::round`].
    async fn round<T, Fut>(
        &self,
        call: &Arc<Call>,
        bound: Duration,
        mut each: impl FnMut(usize, Direct<C>) -> Option<Fut>,
        done: impl Fn(&Answers<T>) -> bool,
    ) -> Answers<T>
    where
        T: Send + 'static,
        Fut: Future<Output = Result<T, Error>> + Send + 'static,
    {
        let spawner = Spawner::current(self.tracker.clone());
        let in_turn = |at, node| Some(in_turn(call, at, each(at, node)?));
        round::round(&spawner, &self.meters, self.nodes(), bound, in_turn, done).await
    }

    /// `each` on every node at once, each in the lease's turn on its node and bounded by
    /// `bound`, returning once every call has taken its place in its node's turns; see
    /// [`round::send`].
    async fn send<T, Fut>(
        &self,
        call: &Arc<Call>,
        bound: Duration,
        mut each: impl FnMut(usize, Direct<C>) -> Option<Fut>,
        unanswered: impl FnOnce(usize) + Send + 'static,
    ) where
        T: Send + 'static,
        Fut: Future<Output = Result<T, Error>> + Send + 'static,
    {
        let spawner = Spawner::current(self.tracker.clone());
        let in_turn = |at, node| Some(in_turn(call, at, each(at, node)?));
        round::send(
            &spawner,
            &self.meters,
            self.nodes(),
            bound,
            in_turn,
            unanswered,
        )
        .await;
    }

    /// A backend on each node's connection.
    fn nodes(&self) -> Vec<Direct<C>> {
        self.conns
            .iter()
            .map(|conn| Direct::new(conn.clone(), Topology::QuorumNode, None))
            .collect()
    }
}

/// `fut`, run in the turn of `call`'s lease on node `at`: after the lease's earlier
/// calls there have ended.
fn in_turn<T>(
    call: &Arc<Call>,
    at: usize,
    fut: impl Future<Output = Result<T, Error>> + Send + 'static,
) -> impl Future<Output = Result<T, Error>> + Send + 'static {
    let node_order = call.node_order.clone();
    async move {
        let _turn = node_order.turn(at).await;
        fut.await
    }
}

impl<C> Backend for Majority<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn attempt(&self, call: &Call, kind: AttemptKind) -> Result<Attempt, Error> {
        self.attempt_all(call, kind).await
    }

    async fn attempt_set(
        &self,
        parts: &[SetPart<'_>],
        set_intent: bool,
    ) -> Result<SetAttempt, Error> {
        self.attempt_set_all(parts, set_intent).await
    }

    async fn attach(&self, parts: &[AttachPart<'_>], old: &Id) -> Result<Attached, Error> {
        self.attach_all(parts, old).await
    }

    async fn refresh(&self, call: &Call, retake: Option<Retake>) -> Result<bool, Error> {
        let upgradable = retake
            .as_ref()
            .is_some_and(|retake| retake.holder == Holder::Upgradable);
        self.refresh_all(call, retake, upgradable).await
    }

    /// One quorum round per lease, all at once: each lease's refresh may retake nodes of
    /// its own, so they are not merged into one script per node.
    async fn renew(&self, batch: &[Renewal<'_>]) -> Renewals {
        let rounds = batch
            .iter()
            .map(|item| self.refresh_all(item.call, item.retake.clone(), item.upgradable));
        Renewals::of(futures_util::future::join_all(rounds).await)
    }

    fn retakes(&self) -> bool {
        true
    }

    fn batch_tag<'c>(&self, _call: &'c Call) -> Option<&'c str> {
        None
    }

    async fn release(
        &self,
        call: &Call,
        holder: Holder,
        leftovers: Leftovers,
    ) -> Result<Unlocked, Error> {
        self.release_all(call, holder, leftovers).await
    }

    async fn downgrade(&self, call: &Call) -> Result<Downgraded, Error> {
        self.downgrade_all(call).await
    }

    async fn upgrade(&self, call: &Call, op: UpgradeOp) -> Result<Upgraded, Error> {
        self.upgrade_all(call, op).await
    }

    async fn plain(&self, call: &Call) -> Result<bool, Error> {
        self.plain_all(call).await
    }

    async fn force_unlock(&self, call: &Call) -> Result<Unlocked, Error> {
        self.force_unlock_all(call).await
    }

    async fn proclaim(&self, call: &Call, record: &str) -> Result<bool, Error> {
        self.proclaim_all(call, record).await
    }

    async fn leader(&self, call: &Call) -> Result<LeaderRead, Error> {
        self.leader_all(call).await
    }

    /// Refused: the nodes are independent masters, which share no transaction, so no
    /// step can both check the lock on a majority and write atomically with that check.
    async fn exec(
        &self,
        call: &Call,
        _also: &[Keys],
        _pipe: &redis::Pipeline,
        _access: Access,
    ) -> Result<Executed, Error> {
        Err(Error::InvalidOptions(format!(
            "exec on lock key {}: a quorum's nodes are independent masters that share no \
             transaction, so a pipeline cannot run atomically with the lock's check; \
             fence the writes with the guard's fencing token instead",
            crate::error::Preview(call.keys.lock())
        )))
    }

    /// Refused: an inspection reads one server in one step, and a quorum's nodes are
    /// independent masters that may each hold another state (a node that missed a
    /// release, one restarted empty), with no step that reads them all at once.
    async fn inspect(&self, keys: &Keys, _form: Form) -> Result<LockState, Error> {
        Err(Error::InvalidOptions(format!(
            "inspect on lock key {}: an inspection reads one server in one step, and over \
             a quorum the nodes are independent masters whose states may differ; inspect \
             each node with a handle on its own connection",
            crate::error::Preview(keys.lock())
        )))
    }

    fn hub(&self) -> Option<&Arc<Hub>> {
        self.hub.as_ref()
    }

    fn fast_path(&self) -> bool {
        false
    }
}

impl<C> fmt::Debug for Majority<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Majority")
            .field("nodes", &self.conns.len())
            .field("notified", &self.hub.is_some())
            .finish_non_exhaustive()
    }
}
