//! What a handle can be made over: one redis-rs connection, or a [`Quorum`] of them.

use redis::aio::ConnectionLike;

use super::Shared;
use crate::backend::Quorum;
use crate::settings::Settings;

/// What a [`RwMutex`](crate::RwMutex) or a [`Semaphore`](crate::Semaphore) can be made
/// over: one redis-rs async connection that can be cloned and shared (to one server or,
/// with the feature `cluster`, to a Redis Cluster), or a [`Quorum`] of such connections
/// to independent masters. Implemented for those and sealed.
pub trait Deployment: sealed::Over + Send + Sync + 'static {}

impl<T: sealed::Over + Send + Sync + 'static> Deployment for T {}

pub(crate) mod sealed {
    use super::{Settings, Shared};

    /// How a deployment makes a handle's options and shared state.
    #[expect(
        private_interfaces,
        reason = "sealed: this trait cannot be named outside the crate"
    )]
    pub trait Over: Sized {
        /// The default options of a handle named `name` over this deployment.
        fn settings(&self, name: String) -> Settings;
        /// What a handle over this deployment with `settings` shares.
        fn share(self, settings: Settings) -> Shared<Self>;
    }
}

#[expect(
    private_interfaces,
    reason = "sealed: `Over` cannot be named outside the crate, so these methods are its own"
)]
impl<C> sealed::Over for C
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn settings(&self, name: String) -> Settings {
        Settings::for_connection::<C>(name)
    }

    fn share(self, settings: Settings) -> Shared<Self> {
        Shared::on_connection(self, settings)
    }
}

#[expect(
    private_interfaces,
    reason = "sealed: `Over` cannot be named outside the crate, so these methods are its own"
)]
impl<C> sealed::Over for Quorum<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn settings(&self, name: String) -> Settings {
        Settings::for_quorum::<C>(name, self.nodes().len())
    }

    fn share(self, settings: Settings) -> Shared<Self> {
        Shared::on_quorum(self, settings)
    }
}
