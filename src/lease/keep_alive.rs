//! The background task of a guard: refresh every ttl/2, then release.

use std::sync::Arc;

use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;

use super::liveness::Liveness;
use super::Lease;
use crate::backend::Backend;
use crate::error::{chain, Error};
use crate::protocol::calls::Leftovers;
use crate::reason::CancelReason;

/// Keeps the lock alive until `token` fires, then releases it if it may still be held.
///
/// `sent` is when the acquiring request was sent: the lock is surely held until `sent`
/// plus [`Lease::validity`], the deadline `liveness` starts with. Each successful refresh
/// moves that deadline to its own send time plus the validity; when the deadline passes
/// without one, the token fires with [`CancelReason::Expired`], even if Redis never
/// answers (and the guard fires it itself if it looks first). A refresh that fails is
/// tried again after [`Lease::refresh_retry`].
///
/// Returns what the release found: `Ok(true)` when this id held the lock and was
/// removed, `Ok(false)` when it was gone (including [`CancelReason::Lost`], which sends
/// nothing), or when [`Guard::unlock`](crate::Guard::unlock) claimed the release and
/// sent it itself.
pub(crate) async fn keep_alive<B: Backend>(
    lease: Arc<Lease<B>>,
    token: CancellationToken,
    liveness: Arc<Liveness>,
    sent: Instant,
) -> Result<bool, Error> {
    let mut next = sent + lease.refresh_interval();
    // One timer at a time, so an idle guard's task stays small: until the next refresh
    // (always before the deadline, unless refreshes keep failing), then, while the
    // refresh is in flight, until the deadline.
    loop {
        tokio::select! {
            biased;
            () = token.cancelled() => break,
            () = sleep_until(next.min(liveness.deadline())) => {}
        }
        if Instant::now() >= liveness.deadline() {
            expired(&lease, &token, &liveness);
            break;
        }
        let sent = Instant::now();
        // Boxed: the request's state is allocated only while it is in flight.
        let refresh = Box::pin(lease.refresh(liveness.deadline(), &token));
        tokio::select! {
            biased;
            () = token.cancelled() => break,
            () = sleep_until(liveness.deadline()) => {
                expired(&lease, &token, &liveness);
                break;
            }
            outcome = refresh => match outcome {
                Ok(true) => {
                    liveness.extend(sent + lease.validity());
                    next = sent + lease.refresh_interval();
                }
                Ok(false) => {
                    tracing::warn!(key = %lease.key(), id = %lease.id(), "lock lost: refresh found it no longer held");
                    liveness.claim_end();
                    liveness.cancel(&token, CancelReason::Lost);
                    return Ok(false);
                }
                Err(err) => {
                    tracing::warn!(key = %lease.key(), id = %lease.id(), error = %chain(&err), "refresh failed; retrying");
                    next = Instant::now() + lease.refresh_retry();
                }
            },
        }
    }
    if !liveness.claim_end() {
        // `unlock` releases it itself.
        return Ok(false);
    }
    let reason = liveness.reason(&token);
    let released = Box::pin(lease.release(Leftovers::NONE)).await;
    match &released {
        Ok(held) => {
            tracing::debug!(key = %lease.key(), id = %lease.id(), ?reason, held, "lock released")
        }
        Err(err) => tracing::warn!(
            key = %lease.key(), id = %lease.id(), ?reason, error = %chain(err),
            "release failed; the lock expires by its TTL"
        ),
    }
    released
}

fn expired<B>(lease: &Lease<B>, token: &CancellationToken, liveness: &Liveness) {
    tracing::warn!(key = %lease.key(), id = %lease.id(), "lock expired: no refresh succeeded in time");
    liveness.cancel(token, CancelReason::Expired);
}
