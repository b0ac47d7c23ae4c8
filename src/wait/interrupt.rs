//! What ends a wait from outside: the parent token, and the request's timeout.

use std::future::Future;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::util;

/// The parent token and the deadline of one request.
#[derive(Debug)]
pub(crate) struct Interrupt<'a> {
    parent: Option<&'a CancellationToken>,
    deadline: Option<Instant>,
}

impl<'a> Interrupt<'a> {
    pub(crate) fn new(parent: Option<&'a CancellationToken>, deadline: Option<Instant>) -> Self {
        Self { parent, deadline }
    }

    /// Runs `work` until it completes, or until the parent is cancelled
    /// ([`Error::Cancelled`]) or the deadline passes ([`Error::Timeout`]), whichever is
    /// first. An interruption already due wins over `work`'s first poll.
    ///
    /// # Cancel safety
    ///
    /// As cancel safe as `work`; on interruption `work` is dropped.
    pub(crate) async fn or<T>(
        &self,
        work: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        tokio::select! {
            biased;
            err = self.fired() => Err(err),
            done = work => done,
        }
    }

    /// Completes with [`Error::Cancelled`] when the parent is cancelled, or with
    /// [`Error::Timeout`] at the deadline; never when neither is given.
    async fn fired(&self) -> Error {
        let cancelled = async {
            match self.parent {
                Some(parent) => parent.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = cancelled => Error::Cancelled,
            () = util::sleep_until(self.deadline) => Error::Timeout,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_parent_and_the_deadline_interrupt_and_work_done_first_wins() {
        let parent = CancellationToken::new();
        let at = Instant::now() + Duration::from_millis(100);
        let interrupt = Interrupt::new(Some(&parent), Some(at));
        let quick = interrupt.or(async { Ok::<_, Error>(1) }).await;
        assert_eq!(quick.unwrap(), 1);
        let slow = interrupt.or(std::future::pending::<Result<(), Error>>());
        assert!(matches!(slow.await, Err(Error::Timeout)));
        assert!(Instant::now() >= at);
        parent.cancel();
        let done = interrupt.or(async { Ok::<_, Error>(1) }).await;
        assert!(
            matches!(done, Err(Error::Cancelled)),
            "an interruption due wins"
        );
        let none = Interrupt::new(None, None);
        let waited = tokio::time::timeout(
            Duration::from_secs(60),
            none.or(std::future::pending::<Result<(), Error>>()),
        );
        assert!(waited.await.is_err(), "nothing to interrupt it");
    }
}
