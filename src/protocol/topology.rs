//! Where a lock's keys live (one server, a primary under Sentinel, a Redis Cluster or one
//! node of a quorum): what changes in the scripts' arguments, and telling a cluster or a
//! Sentinel connection from its type.

/// Where a lock's keys live, as the scripts must know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Topology {
    /// One Redis server (or a primary with replicas that no Sentinel fails over).
    Server,
    /// The primary that Redis Sentinel names, reached by a `SentinelConnection`: a
    /// failover to a replica that missed the fence key's last increments brings the
    /// counter back older, so every token is floored at the server clock, as on a
    /// cluster; releases are published by `PUBLISH` on the primary.
    SentinelPrimary,
    /// A Redis Cluster: a failover can lose the fence key's last increments, so every
    /// token is floored at the server clock, and releases are published by `SPUBLISH`
    /// in the lock key's slot (by `PUBLISH` on a node without it, Redis 6.2: the scripts
    /// fall back by themselves).
    Cluster,
    /// One of the independent masters of a quorum: a node restarted from an old
    /// append-only file may have lost the last increments, so every token is floored at
    /// the server clock; releases are published by `PUBLISH` on the node.
    QuorumNode,
}

impl Topology {
    /// Where the keys behind a connection of type `C` live: on a Redis Cluster when `C`
    /// is redis-rs's cluster connection ([`is_cluster`]), on the primary Sentinel names
    /// when it is this crate's `SentinelConnection` ([`is_sentinel`]), else on one server.
    pub(crate) fn of_connection<C: 'static>() -> Self {
        if is_sentinel::<C>() {
            return Self::SentinelPrimary;
        }
        Self::from_cluster(is_cluster::<C>())
    }

    /// [`Cluster`](Self::Cluster) when `cluster`, else [`Server`](Self::Server): what
    /// `Builder::cluster` says.
    pub(crate) fn from_cluster(cluster: bool) -> Self {
        if cluster {
            Self::Cluster
        } else {
            Self::Server
        }
    }

    /// Every token is floored at the server clock (see the
    /// [fencing guide](crate::guide::fencing)).
    pub(crate) fn clock_floor(self) -> bool {
        self != Self::Server
    }

    /// Releases are published by `SPUBLISH` (sharded pub/sub) where the server has it,
    /// not `PUBLISH`; and the keys of a call must share one slot.
    pub(crate) fn sharded(self) -> bool {
        self == Self::Cluster
    }
}

/// Whether `C` is this crate's `SentinelConnection` (feature `sentinel`), whose tokens are
/// floored at the server clock. A connection type that wraps one is not recognised.
fn is_sentinel<C: 'static>() -> bool {
    #[cfg(feature = "sentinel")]
    if std::any::TypeId::of::<C>() == std::any::TypeId::of::<crate::sentinel::SentinelConnection>()
    {
        return true;
    }
    // The name alone uses `C` in a build without the feature, where no such type exists.
    std::any::type_name::<C>() == "redismutex::sentinel::SentinelConnection"
}

/// Whether `C` is redis-rs's async cluster connection, so that a mutex on it keeps
/// every key of a lock in one slot, floors its tokens at the clock and publishes
/// releases by `SPUBLISH`.
///
/// Recognised by `TypeId` with the feature `cluster`, and by its type name
/// (`redis::…::ClusterConnection<…>`) in any build, so that a build where another crate
/// turned on redis-rs's cluster support without this crate's feature still treats it
/// as a cluster. A connection type that wraps one is not recognised:
/// `Builder::cluster(true)` says so instead.
fn is_cluster<C: 'static>() -> bool {
    #[cfg(feature = "cluster")]
    if std::any::TypeId::of::<C>()
        == std::any::TypeId::of::<redis::cluster_async::ClusterConnection>()
    {
        return true;
    }
    let name = std::any::type_name::<C>();
    let outer = name.split('<').next().unwrap_or(name);
    outer.starts_with("redis::") && outer.ends_with("::ClusterConnection")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_cluster_connection_is_taken_for_one() {
        assert!(!is_cluster::<redis::aio::MultiplexedConnection>());
        assert!(!is_cluster::<redis::aio::ConnectionManager>());
        #[cfg(feature = "cluster")]
        {
            use redis::cluster_async::ClusterConnection;
            assert!(is_cluster::<ClusterConnection>());
            // The name alone, as in a build without this crate's feature.
            let name = std::any::type_name::<ClusterConnection>();
            let outer = name.split('<').next().unwrap_or(name);
            assert!(
                outer.starts_with("redis::") && outer.ends_with("::ClusterConnection"),
                "{name}"
            );
        }
    }

    #[test]
    fn only_a_single_server_leaves_tokens_unfloored_and_only_a_cluster_publishes_sharded() {
        assert!(!Topology::Server.clock_floor() && !Topology::Server.sharded());
        assert!(Topology::Cluster.clock_floor() && Topology::Cluster.sharded());
        assert!(Topology::QuorumNode.clock_floor() && !Topology::QuorumNode.sharded());
        assert!(Topology::SentinelPrimary.clock_floor() && !Topology::SentinelPrimary.sharded());
    }

    #[test]
    fn only_the_sentinel_connection_is_taken_for_a_sentinel_primary() {
        assert!(!is_sentinel::<redis::aio::MultiplexedConnection>());
        assert_eq!(
            Topology::of_connection::<redis::aio::ConnectionManager>(),
            Topology::Server
        );
        #[cfg(feature = "sentinel")]
        assert_eq!(
            Topology::of_connection::<crate::sentinel::SentinelConnection>(),
            Topology::SentinelPrimary
        );
    }
}
