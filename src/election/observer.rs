//! The observer behind [`Election::observe`](crate::Election::observe): a task that reads
//! the leader again on every event of its channel watch and at the leader's expiry, and
//! sends each change on a `watch` channel.

use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::engine::Shared;
use crate::error::{Error, Preview};
use crate::leader::Leader;
use crate::notify::watch::ChannelWatch;
use crate::protocol::leader::{record_key, LeaderRead};
use crate::spawner::Spawner;

/// How long after the leader's lock should have expired the observer reads it again: a
/// little after, so that the read finds the key gone rather than about to go.
const EXPIRY_MARGIN: Duration = Duration::from_millis(5);

/// The first and the largest pause before a failed read is tried again (jittered).
const RETRY_MIN: Duration = Duration::from_millis(10);
const RETRY_MAX: Duration = Duration::from_secs(1);

/// Subscribes to the election's record channel and release channel, reads the leader,
/// and starts the task that follows it; the receiver starts with that first read.
pub(super) async fn start<C: Send + Sync + 'static>(
    shared: &Arc<Shared<C>>,
) -> Result<watch::Receiver<Option<Leader>>, Error> {
    let settings = &shared.settings;
    let Some(notifier) = &settings.notifier else {
        return Err(Error::InvalidOptions(format!(
            "observe on election {}: changes are pushed by Pub/Sub, which needs a notifier \
             (Builder::notifier)",
            Preview(&settings.name)
        )));
    };
    settings.check()?;
    let keys = settings.keys_of(None, false)?;
    let channels = vec![record_key(&keys), keys.channel().to_string()];
    let mut events = ChannelWatch::new(&notifier.hub, channels);
    events.seen();
    let first = shared.leader().await?;
    let (sender, receiver) = watch::channel(first.leader.clone());
    Spawner::current(settings.tracker.clone()).spawn(follow(
        Arc::clone(shared),
        events,
        sender,
        next_read(&first, settings.ttl),
    ));
    Ok(receiver)
}

/// When to read again without an event: at the leader's expiry (which publishes
/// nothing); while nobody leads, one TTL on (a new leader publishes its record, and this
/// read only bounds how long a message lost in transit, as while a subscription moves to
/// a Cluster's new master, delays the change).
fn next_read(read: &LeaderRead, ttl: Duration) -> Instant {
    let wait = match (&read.leader, read.expires_in) {
        (Some(_), Some(expires_in)) => expires_in.min(ttl) + EXPIRY_MARGIN,
        _ => ttl,
    };
    Instant::now() + wait
}

/// Reads the leader again on each event and at each expiry, and sends every change,
/// until every receiver is gone. A failed read is tried again after a backoff.
async fn follow<C: Send + Sync + 'static>(
    shared: Arc<Shared<C>>,
    mut events: ChannelWatch,
    sender: watch::Sender<Option<Leader>>,
    mut read_at: Instant,
) {
    let ttl = shared.settings.ttl;
    let mut retry = retry_backoff();
    loop {
        tokio::select! {
            () = sender.closed() => return,
            () = events.changed() => {}
            () = tokio::time::sleep_until(read_at) => {}
        }
        events.seen();
        match shared.leader().await {
            Ok(read) => {
                retry = retry_backoff();
                read_at = next_read(&read, ttl);
                sender.send_if_modified(|leader| {
                    let changed = *leader != read.leader;
                    *leader = read.leader;
                    changed
                });
            }
            Err(err) => {
                tracing::debug!(error = %err, "the election's leader was not read; read again after a pause");
                read_at = Instant::now() + retry.next().unwrap_or(RETRY_MAX);
            }
        }
    }
}

fn retry_backoff() -> backon::ExponentialBackoff {
    ExponentialBuilder::new()
        .with_min_delay(RETRY_MIN)
        .with_max_delay(RETRY_MAX)
        .with_jitter()
        .without_max_times()
        .build()
}
