//! Telling, from its type, that a connection reaches a Redis Cluster.

/// Whether `C` is redis-rs's async cluster connection, so that a mutex on it keeps
/// every key of a lock in one slot and publishes releases by `SPUBLISH`. A connection
/// type that wraps one is not recognised: `Builder::cluster(true)` says so instead.
#[cfg_attr(
    not(feature = "cluster"),
    expect(
        clippy::extra_unused_type_parameters,
        reason = "used with feature cluster"
    )
)]
pub(crate) fn is_cluster<C: 'static>() -> bool {
    #[cfg(feature = "cluster")]
    {
        std::any::TypeId::of::<C>()
            == std::any::TypeId::of::<redis::cluster_async::ClusterConnection>()
    }
    #[cfg(not(feature = "cluster"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_cluster_connection_is_taken_for_one() {
        assert!(!is_cluster::<redis::aio::MultiplexedConnection>());
        #[cfg(feature = "cluster")]
        assert!(is_cluster::<redis::cluster_async::ClusterConnection>());
    }
}
