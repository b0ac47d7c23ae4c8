//! Telling, from its type, that a connection reaches a Redis Cluster.

/// Whether `C` is redis-rs's async cluster connection, so that a mutex on it keeps
/// every key of a lock in one slot, floors its tokens at the clock and publishes
/// releases by `SPUBLISH`.
///
/// Recognised by `TypeId` with the feature `cluster`, and by its type name
/// (`redis::…::ClusterConnection<…>`) in any build, so that a build where another crate
/// turned on redis-rs's cluster support without this crate's feature still treats it
/// as a cluster. A connection type that wraps one is not recognised:
/// `Builder::cluster(true)` says so instead.
pub(crate) fn is_cluster<C: 'static>() -> bool {
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
}
