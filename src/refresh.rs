//! The background task of a guard: refresh every ttl/2, then release.

use std::sync::Arc;

use redis::aio::ConnectionLike;
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;

use crate::error::{chain, Error};
use crate::lease::Lease;
use crate::reason::CancelReason;
use crate::status::Status;

/// Keeps the lock alive until `token` fires, then releases it if it may still be held.
///
/// `sent` is when the acquiring request was sent: the lock is surely held until `sent`
/// plus [`Lease::validity`], the deadline `status` starts with. Each successful refresh
/// moves that deadline to its own send time plus the validity; when the deadline passes
/// without one, the token fires with [`CancelReason::Expired`], even if Redis never
/// answers (and the guard fires it itself if it looks first). A refresh that fails is
/// tried again after [`Lease::refresh_retry`].
///
/// Returns what the release found: `Ok(true)` when this id held the lock and was
/// removed, `Ok(false)` when it was gone (including [`CancelReason::Lost`], which sends
/// nothing), or when [`Guard::unlock`](crate::Guard::unlock) claimed the release and
/// sent it itself.
pub(crate) async fn keep<C>(
    lease: Arc<Lease<C>>,
    token: CancellationToken,
    status: Arc<Status>,
    sent: Instant,
) -> Result<bool, Error>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    let mut conn = lease.conn.clone();
    let mut next = sent + lease.refresh_interval();
    // One timer at a time, so an idle guard's task stays small: until the next refresh
    // (always before the deadline, unless refreshes keep failing), then, while the
    // refresh is in flight, until the deadline.
    loop {
        tokio::select! {
            biased;
            () = token.cancelled() => break,
            () = sleep_until(next.min(status.deadline())) => {}
        }
        if Instant::now() >= status.deadline() {
            expired(&lease, &token, &status);
            break;
        }
        let sent = Instant::now();
        // Boxed: the request's state is allocated only while it is in flight.
        let refresh = Box::pin(lease.refresh(&mut conn));
        tokio::select! {
            biased;
            () = token.cancelled() => break,
            () = sleep_until(status.deadline()) => {
                expired(&lease, &token, &status);
                break;
            }
            outcome = refresh => match outcome {
                Ok(true) => {
                    status.extend(sent + lease.validity());
                    next = sent + lease.refresh_interval();
                }
                Ok(false) => {
                    tracing::warn!(key = %lease.keys.lock, id = %lease.id, "lock lost: refresh found it no longer held");
                    status.claim_end();
                    status.cancel(&token, CancelReason::Lost);
                    return Ok(false);
                }
                Err(err) => {
                    tracing::warn!(key = %lease.keys.lock, id = %lease.id, error = %chain(&err), "refresh failed; retrying");
                    next = Instant::now() + lease.refresh_retry();
                }
            },
        }
    }
    if !status.claim_end() {
        // `unlock` releases it itself.
        return Ok(false);
    }
    let reason = status.reason(&token);
    let released = Box::pin(lease.release(false, false)).await;
    match &released {
        Ok(held) => {
            tracing::debug!(key = %lease.keys.lock, id = %lease.id, ?reason, held, "lock released")
        }
        Err(err) => tracing::warn!(
            key = %lease.keys.lock, id = %lease.id, ?reason, error = %chain(err),
            "release failed; the lock expires by its TTL"
        ),
    }
    released
}

fn expired<C>(lease: &Lease<C>, token: &CancellationToken, status: &Status) {
    tracing::warn!(key = %lease.keys.lock, id = %lease.id, "lock expired: no refresh succeeded in time");
    status.cancel(token, CancelReason::Expired);
}
