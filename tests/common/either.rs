//! [`Either`]: a write or a read guard, for the tests that take both kinds in one place
//! (every way of taking a lock, a mix of readers and writers).

use std::time::SystemTime;

use redismutex::{CancelReason, Error, Mode, ReadGuard, WriteGuard};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A guard of either kind, with the methods both kinds share and the mode it holds.
#[derive(Debug)]
pub enum Either {
    Write(WriteGuard),
    Read(ReadGuard),
}

/// Calls `$method` on whichever guard `$either` holds.
macro_rules! both {
    ($either:expr, $guard:ident => $call:expr) => {
        match $either {
            Either::Write($guard) => $call,
            Either::Read($guard) => $call,
        }
    };
}

impl Either {
    pub fn mode(&self) -> Mode {
        match self {
            Either::Write(_) => Mode::Write,
            Either::Read(_) => Mode::Read,
        }
    }
    pub fn key(&self) -> &str {
        both!(self, g => g.key())
    }
    pub fn id(&self) -> &str {
        both!(self, g => g.id())
    }
    pub fn fencing_token(&self) -> u64 {
        both!(self, g => g.fencing_token())
    }
    pub fn cancellation_token(&self) -> &CancellationToken {
        both!(self, g => g.cancellation_token())
    }
    pub async fn cancelled(&self) {
        both!(self, g => g.cancelled().await)
    }
    pub fn is_cancelled(&self) -> bool {
        both!(self, g => g.is_cancelled())
    }
    pub fn cancel_reason(&self) -> Option<CancelReason> {
        both!(self, g => g.cancel_reason())
    }
    pub fn valid_until(&self) -> Instant {
        both!(self, g => g.valid_until())
    }
    pub fn acquired_at(&self) -> SystemTime {
        both!(self, g => g.acquired_at())
    }
    pub fn refreshes(&self) -> u64 {
        both!(self, g => g.refreshes())
    }
    pub async fn unlock(self) -> Result<bool, Error> {
        both!(self, g => g.unlock().await)
    }
    pub async fn exec<T: redis::FromRedisValue>(&self, pipe: &redis::Pipeline) -> Result<T, Error> {
        both!(self, g => g.exec(pipe).await)
    }
    /// The write guard, panicking on a reader.
    pub fn into_write(self) -> WriteGuard {
        match self {
            Either::Write(guard) => guard,
            Either::Read(guard) => {
                panic!("a read guard where a write guard was expected: {guard:?}")
            }
        }
    }
}

impl From<WriteGuard> for Either {
    fn from(guard: WriteGuard) -> Self {
        Either::Write(guard)
    }
}

impl From<ReadGuard> for Either {
    fn from(guard: ReadGuard) -> Self {
        Either::Read(guard)
    }
}

/// Takes a guard of `mode` on `key` of `mx`, waiting, as an [`Either`].
pub async fn lock<C: Send + Sync + 'static>(
    mx: &redismutex::RwMutex<C>,
    mode: Mode,
    key: &str,
) -> Result<Either, Error> {
    match mode {
        Mode::Write => mx.write().key(key).await.map(Either::from),
        Mode::Read => mx.read().key(key).await.map(Either::from),
    }
}

/// One attempt at a guard of `mode` on `key` of `mx`, as an [`Either`].
pub async fn try_lock<C: Send + Sync + 'static>(
    mx: &redismutex::RwMutex<C>,
    mode: Mode,
    key: &str,
) -> Result<Option<Either>, Error> {
    Ok(match mode {
        Mode::Write => mx.try_write().key(key).await?.map(Either::from),
        Mode::Read => mx.try_read().key(key).await?.map(Either::from),
    })
}
