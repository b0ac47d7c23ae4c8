//! One request of a subscriber connection's, or of a setting's read, bounded in time.

use std::future::Future;
use std::time::Duration;

use crate::error::chain;

/// How long connecting, or one (un)subscribe request, may take before the connection is
/// taken as lost.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// `request`, given up after [`REQUEST_TIMEOUT`]; the error says `what` failed.
pub(super) async fn bounded<T>(
    request: impl Future<Output = redis::RedisResult<T>>,
    what: &str,
) -> Result<T, String> {
    match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(format!("{what}: {}", chain(&err))),
        Err(_) => Err(format!("{what} timed out")),
    }
}
