//! The validated options of one mutex or semaphore: what the handle is ([`Product`]),
//! how it reaches Redis ([`Reach`]), and the options every handle has.

mod product;
mod reach;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::task::TaskTracker;

use crate::error::{Error, Preview};
use crate::notify::Notifier;
use crate::protocol::acks::Acks;
use crate::protocol::check::{check_key, check_slot};
use crate::protocol::describe::{check_label, text};
use crate::protocol::keys::{lock_key, Keys};
use crate::protocol::topology::Topology;

pub(crate) use product::Product;
pub(crate) use reach::Reach;

/// The lock TTL when none is set: 4 s, as in the Go package.
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(4);
/// The shortest TTL accepted. Below it the Redlock drift margin (1% + 2 ms) leaves too
/// little of the TTL for a refresh to land in time.
pub(crate) const MIN_TTL: Duration = Duration::from_millis(10);
/// The longest TTL accepted: a day.
pub(crate) const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// How long a fence key outlives the last acquisition of its lock when none is set: a day.
pub(crate) const DEFAULT_FENCE_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);
/// The longest fence retention accepted: 365 days.
pub(crate) const MAX_FENCE_RETENTION: Duration = Duration::from_secs(365 * 24 * 60 * 60);
/// Whether a handle describes its holders when nothing is said
/// ([`Builder::describe_holder`](crate::Builder::describe_holder)).
pub(crate) const DEFAULT_DESCRIBE_HOLDER: bool = false;
/// The shortest [`Builder::max_hold`](crate::Builder::max_hold): 1 ms.
const MIN_HOLD: Duration = Duration::from_millis(1);
/// The longest [`Builder::max_hold`](crate::Builder::max_hold): 365 days.
const MAX_HOLD: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// What a mutex or semaphore was configured with; shared by every lock or permit it
/// takes.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) name: String,
    pub(crate) ttl: Duration,
    /// A read-write mutex, with its own options, or a semaphore, with its permit count.
    pub(crate) product: Product,
    pub(crate) fence_retention: Duration,
    pub(crate) tracker: Option<TaskTracker>,
    pub(crate) notifier: Option<Notifier>,
    /// Untagged lock keys get a hash tag around their varying part
    /// ([`lock_key`]).
    pub(crate) hash_tag_keys: bool,
    /// One connection, whose keys live where its topology says (one server, or a Redis
    /// Cluster, where every lock key must carry a hash tag and releases are published by
    /// `SPUBLISH`), or a quorum of nodes (each node's connection must lead to one server;
    /// the quorum's backend reaches each as a [`Topology::QuorumNode`]).
    pub(crate) reach: Reach,
    /// Waiters queue in Redis in arrival order (`lua/shared.lua`).
    pub(crate) fair: bool,
    /// The metrics carry the label `name` = the handle's name (feature `metrics`).
    pub(crate) name_label: bool,
    /// How many replicas must acknowledge an acquire or a renewal, and within how long.
    pub(crate) replicas: Option<Acks>,
    /// The longest a lock or permit is held ([`Builder::max_hold`](crate::Builder::max_hold)).
    pub(crate) max_hold: Option<Duration>,
    /// The description of this handle's holders (`lua/describe.lua`'s ARGV[3]), made
    /// once, when it describes them ([`Builder::describe_holder`](crate::Builder::describe_holder)).
    pub(crate) holder: Option<Arc<String>>,
    /// Its label ([`Builder::holder_label`](crate::Builder::holder_label)), checked by
    /// [`check`](Self::check).
    pub(crate) holder_label: Option<String>,
}

impl Settings {
    pub(crate) fn new(name: String) -> Self {
        Self {
            name,
            ttl: DEFAULT_TTL,
            product: Product::default(),
            fence_retention: DEFAULT_FENCE_RETENTION,
            tracker: None,
            notifier: None,
            hash_tag_keys: false,
            reach: Reach::Connection(Topology::Server),
            fair: false,
            name_label: false,
            replicas: None,
            max_hold: None,
            holder: DEFAULT_DESCRIBE_HOLDER.then(|| text(None)),
            holder_label: None,
        }
    }

    /// Describes this handle's holders, or not: the description is made here, once.
    pub(crate) fn describe_holder(&mut self, on: bool) {
        self.holder = on.then(|| text(self.holder_label.as_deref()));
    }

    /// The options of a handle over a quorum of `nodes` connections of type `C`.
    pub(crate) fn for_quorum<C: 'static>(name: String, nodes: usize) -> Self {
        Self {
            reach: Reach::Quorum {
                nodes,
                each: Topology::of_connection::<C>(),
            },
            ..Self::new(name)
        }
    }

    /// The defaults for a mutex or semaphore on a connection of type `C`: on a Redis
    /// Cluster when `C` is redis-rs's cluster connection.
    pub(crate) fn for_connection<C: 'static>(name: String) -> Self {
        Self {
            reach: Reach::Connection(Topology::of_connection::<C>()),
            ..Self::new(name)
        }
    }

    /// Checks the options; every request calls this, since [`RwMutex::new`] and
    /// [`Semaphore::new`] cannot fail.
    ///
    /// [`RwMutex::new`]: crate::RwMutex::new
    /// [`Semaphore::new`]: crate::Semaphore::new
    pub(crate) fn check(&self) -> Result<(), Error> {
        let name = Preview(&self.name);
        if self.name.is_empty() {
            return Err(Error::InvalidOptions(format!(
                "the {} name is empty",
                self.what()
            )));
        }
        if self.product == (Product::Semaphore { permits: 0 }) {
            return Err(Error::InvalidOptions(format!(
                "semaphore {name} has 0 permits, so nobody could ever acquire one"
            )));
        }
        if let Err(Error::InvalidKey { reason, .. }) =
            check_key(&lock_key(&self.name, None, self.hash_tag_keys))
        {
            return Err(Error::InvalidOptions(format!(
                "{} name {name} cannot be a lock key: {reason}",
                self.what()
            )));
        }
        if self.ttl < MIN_TTL || self.ttl > MAX_TTL {
            return Err(Error::InvalidOptions(format!(
                "ttl {:?} of {} {name} is outside {MIN_TTL:?}..={MAX_TTL:?}",
                self.ttl,
                self.what()
            )));
        }
        if self.fence_retention < self.ttl || self.fence_retention > MAX_FENCE_RETENTION {
            return Err(Error::InvalidOptions(format!(
                "fence retention {:?} of {} {name} is outside its ttl..={MAX_FENCE_RETENTION:?}",
                self.fence_retention,
                self.what()
            )));
        }
        if let Some(max_hold) = self.max_hold.filter(|d| !(MIN_HOLD..=MAX_HOLD).contains(d)) {
            return Err(Error::InvalidOptions(format!(
                "max hold {max_hold:?} of {} {name} is outside {MIN_HOLD:?}..={MAX_HOLD:?}",
                self.what()
            )));
        }
        if let Some(label) = &self.holder_label {
            check_label(label)?;
        }
        self.check_slots()?;
        self.check_quorum()?;
        self.check_replicas()?;
        self.check_notifier()
    }

    /// Replica acknowledgement ([`Builder::replicas`](crate::Builder::replicas)) needs
    /// one server with replicas: at least one replica, a timeout of at least 1 ms and at
    /// most a quarter of the TTL (a renewal and its wait leave room for a retry within
    /// the validity), and neither a cluster nor a quorum.
    fn check_replicas(&self) -> Result<(), Error> {
        let Some(acks) = self.replicas else {
            return Ok(());
        };
        let refusal = if acks.replicas == 0 {
            "0 replicas: leave the option off instead".to_owned()
        } else if acks.timeout < Duration::from_millis(1) || acks.timeout > self.ttl / 4 {
            format!(
                "its timeout {:?} is outside 1ms..={:?} (a quarter of the ttl)",
                acks.timeout,
                self.ttl / 4
            )
        } else if matches!(self.reach, Reach::Quorum { .. }) {
            "it is over a quorum, whose majority of masters gives more than replicas do".to_owned()
        } else if self.on_cluster() {
            "it is on a Redis Cluster, which is not supported yet".to_owned()
        } else {
            return Ok(());
        };
        Err(Error::InvalidOptions(format!(
            "{} {} asks for replica acknowledgement, but {refusal}",
            self.what(),
            Preview(&self.name),
        )))
    }

    /// On a cluster, or with [`hash_tag_keys`](Self::hash_tag_keys), every lock of the
    /// mutex must keep its keys in one slot: the name carries a hash tag, or tagging
    /// gives its lock keys one (a key with braces of its own is checked when used).
    fn check_slots(&self) -> Result<(), Error> {
        if !self.on_cluster() && !self.hash_tag_keys {
            return Ok(());
        }
        for key in [None, Some("k")] {
            let lock = lock_key(&self.name, key, self.hash_tag_keys);
            if let Err(Error::InvalidKey { reason, .. }) = check_slot(&lock) {
                let why = if self.hash_tag_keys {
                    "its first '{' is closed at once, so no hash tag can be made for its keys"
                } else {
                    "it has no hash tag"
                };
                return Err(Error::InvalidOptions(format!(
                    "{} name {} cannot keep a lock's keys in one slot, since {why} (lock key {}: {reason})",
                    self.what(),
                    Preview(&self.name),
                    Preview(&lock),
                )));
            }
        }
        Ok(())
    }

    /// Quorum mode takes independent masters and offers neither fair mode nor semaphores
    /// (see the [quorum guide](crate::guide::quorum)).
    fn check_quorum(&self) -> Result<(), Error> {
        let Some(nodes) = self.reach.quorum() else {
            return Ok(());
        };
        let refusal = if self.on_cluster() {
            "its nodes are Redis Cluster connections; a quorum needs independent masters"
        } else if matches!(self.product, Product::Semaphore { .. }) {
            "a counting semaphore does not compose over majorities: two majorities share a \
             node, but each may count different holders there"
        } else if self.fair {
            "fair mode is not offered: each node would keep its own queue, and no majority \
             of queues need agree on whose turn it is"
        } else {
            return Ok(());
        };
        Err(Error::InvalidOptions(format!(
            "{} {} is over a quorum of {nodes} nodes, and {refusal} \
             (see the guide redismutex::guide::quorum)",
            self.what(),
            Preview(&self.name),
        )))
    }

    /// Upgradable reads ([`RwMutex::upgradable_read`](crate::RwMutex::upgradable_read))
    /// need a mutex that is not fair (on one server, a Redis Cluster, Sentinel or a
    /// quorum): the refusal names the option that stands in the way and why.
    pub(crate) fn check_upgradable(&self) -> Result<(), Error> {
        if !self.fair {
            return Ok(());
        }
        Err(Error::InvalidOptions(format!(
            "{} {} takes no upgradable reads, since it is fair: its queue hands the lock \
             out in arrival order, and an upgrade that waits for the readers present would \
             have to go in ahead of the writers queued before it (see the guide \
             redismutex::guide::reentrancy)",
            self.what(),
            Preview(&self.name),
        )))
    }

    /// Refuses a set of locks (`lock_all`) on a fair mutex, with
    /// [`Error::InvalidOptions`].
    pub(crate) fn check_set(&self) -> Result<(), Error> {
        if !self.fair {
            return Ok(());
        }
        Err(Error::InvalidOptions(format!(
            "{} {} takes no sets of locks (lock_all), since it is fair: each key's queue \
             serves its waiters in arrival order, and a set that waits in several queues \
             at once would hold its place at the head of one while waiting behind others \
             at another, so two sets could each wait for the other (see the guide \
             redismutex::guide::multiple_keys)",
            self.what(),
            Preview(&self.name),
        )))
    }

    /// A cluster mutex needs a cluster notifier (sharded pub/sub), a single-server mutex a
    /// single-server one, and a quorum's mutex one made by `Notifier::quorum` for as many
    /// nodes: each listens where the others' releases are not sent.
    fn check_notifier(&self) -> Result<(), Error> {
        let Some(notifier) = &self.notifier else {
            return Ok(());
        };
        let (hub, quorum) = (&notifier.hub, self.reach.quorum());
        let nodes = quorum.unwrap_or(1);
        let (here, there, fix) = if hub.nodes() != nodes && quorum.is_some() {
            let here = format!("over a quorum of {nodes} nodes");
            let there = format!("{} node(s)", hub.nodes());
            (
                here,
                there,
                "Notifier::quorum, with one client per node in the same order",
            )
        } else if hub.nodes() != nodes {
            let there = format!("a quorum of {} nodes", hub.nodes());
            ("on a single Redis server".into(), there, "Notifier::new")
        } else if hub.is_cluster() && !self.on_cluster() {
            let here = if quorum.is_some() {
                "over a quorum"
            } else {
                "on a single Redis server"
            };
            (
                here.into(),
                "a Redis Cluster".into(),
                "Notifier::new or Notifier::quorum",
            )
        } else if self.on_cluster() && !hub.is_cluster() {
            (
                "on a Redis Cluster".into(),
                "a single Redis server".into(),
                "Notifier::cluster",
            )
        } else {
            return Ok(());
        };
        Err(Error::InvalidOptions(format!(
            "{} {} is {here} but its notifier listens to {there}; make it with {fix}",
            self.what(),
            Preview(&self.name),
        )))
    }

    /// Whether the handle is on a Redis Cluster (over a quorum: whether its nodes'
    /// connections are, which [`check`](Self::check) refuses).
    pub(crate) fn on_cluster(&self) -> bool {
        self.reach.topology() == Topology::Cluster
    }

    /// What the settings are for, as messages name it.
    fn what(&self) -> &'static str {
        self.product.noun()
    }

    /// The TTL in whole milliseconds, rounded down: the unit of `PX` and `PEXPIRE`.
    pub(crate) fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }

    /// The fence retention in whole milliseconds, rounded down: the `PX` of the fence key.
    pub(crate) fn fence_ms(&self) -> u64 {
        u64::try_from(self.fence_retention.as_millis()).unwrap_or(u64::MAX)
    }

    /// The keys of the lock a request for `key` (or none) takes, once its lock key is
    /// checked ([`check_key`], and [`check_slot`] on a cluster or with hash-tagged keys):
    /// [`Error::InvalidKey`] before anything is sent.
    pub(crate) fn keys_of(&self, key: Option<&str>, fair: bool) -> Result<Keys, Error> {
        Keys::of_request(&self.name, key, self.hash_tag_keys, fair, |lock| {
            self.check_lock_key(lock)
        })
    }

    /// The keys of the lock whose full lock key is `lock` (a lease's), checked as
    /// [`keys_of`](Self::keys_of) checks a request's, with its queue's keys when the
    /// handle is fair.
    pub(crate) fn keys_of_lock(&self, lock: &str) -> Result<Keys, Error> {
        Keys::of_lock(lock, self.fair, |lock| self.check_lock_key(lock))
    }

    /// [`check_key`], and [`check_slot`] on a cluster or with hash-tagged keys.
    fn check_lock_key(&self, lock: &str) -> Result<(), Error> {
        check_key(lock)?;
        if self.on_cluster() || self.hash_tag_keys {
            check_slot(lock)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_ttl(ttl: Duration) -> Settings {
        Settings {
            ttl,
            ..Settings::new("jobs".into())
        }
    }

    #[test]
    fn rejects_empty_names_and_ttls_out_of_range() {
        assert!(Settings::new("jobs".into()).check().is_ok());
        let empty = Settings::new(String::new()).check().unwrap_err();
        assert!(empty.to_string().contains("name is empty"), "{empty}");
        for ttl in [
            Duration::ZERO,
            Duration::from_micros(500),
            Duration::from_millis(9),
            MAX_TTL + Duration::from_millis(1),
            Duration::MAX,
        ] {
            let err = with_ttl(ttl).check().unwrap_err();
            assert!(
                matches!(err, Error::InvalidOptions(ref m) if m.contains("\"jobs\"")),
                "{err}"
            );
        }
        assert!(with_ttl(MIN_TTL).check().is_ok());
        let long_day = Settings {
            fence_retention: MAX_TTL,
            ..with_ttl(MAX_TTL)
        };
        assert!(long_day.check().is_ok());
        assert!(
            with_ttl(MAX_TTL).check().is_ok(),
            "the default retention is a day"
        );
    }

    #[test]
    fn replica_acknowledgement_is_refused_on_a_cluster_and_taken_on_one_server() {
        let acknowledged = |topology| Settings {
            reach: Reach::Connection(topology),
            replicas: Some(Acks {
                replicas: 1,
                timeout: Duration::from_millis(100),
            }),
            ..Settings::new("{jobs}".into())
        };
        let err = acknowledged(Topology::Cluster).check().unwrap_err();
        assert!(
            matches!(err, Error::InvalidOptions(ref m) if m.contains("replica") && m.contains("Redis Cluster")),
            "{err}"
        );
        assert!(acknowledged(Topology::Server).check().is_ok());
    }

    #[test]
    fn max_hold_is_from_1_ms_to_365_days() {
        for max_hold in [
            Duration::ZERO,
            Duration::from_micros(999),
            MAX_HOLD * 2,
            Duration::MAX,
        ] {
            let settings = Settings {
                max_hold: Some(max_hold),
                ..with_ttl(Duration::from_secs(1))
            };
            let err = settings.check().unwrap_err();
            assert!(err.to_string().contains("max hold"), "{max_hold:?}: {err}");
        }
        for max_hold in [MIN_HOLD, MAX_HOLD] {
            let settings = Settings {
                max_hold: Some(max_hold),
                ..with_ttl(Duration::from_secs(1))
            };
            assert!(settings.check().is_ok(), "{max_hold:?}");
        }
    }

    #[test]
    fn fence_retention_must_cover_the_ttl() {
        for retention in [Duration::from_millis(999), MAX_FENCE_RETENTION * 2] {
            let settings = Settings {
                fence_retention: retention,
                ..with_ttl(Duration::from_secs(1))
            };
            let err = settings.check().unwrap_err();
            assert!(err.to_string().contains("fence retention"), "{err}");
        }
    }

    #[test]
    fn on_a_cluster_every_lock_key_of_the_name_must_have_a_hash_tag() {
        let on_cluster = |name: &str, tag_keys: bool| Settings {
            reach: Reach::Connection(Topology::Cluster),
            hash_tag_keys: tag_keys,
            ..Settings::new(name.into())
        };
        let err = on_cluster("orders", false).check().unwrap_err();
        assert!(
            matches!(err, Error::InvalidOptions(ref m) if m.contains("\"orders\"")
                && m.contains("no hash tag") && m.contains("CROSSSLOT")),
            "{err}"
        );
        assert!(on_cluster("{orders}", false).check().is_ok());
        assert!(on_cluster("orders", true).check().is_ok());
        assert!(on_cluster("{orders}", true).check().is_ok());
        let stuck = on_cluster("a{}b", true).check().unwrap_err();
        assert!(stuck.to_string().contains("closed at once"), "{stuck}");
        // Off a cluster, an untagged name is the Go layout; tagging still checks.
        assert!(Settings::new("orders".into()).check().is_ok());
        let tagging = Settings {
            hash_tag_keys: true,
            ..Settings::new("a{}b".into())
        };
        assert!(tagging.check().is_err());
        // Tagging adds two bytes to a name that is the whole lock key.
        let longest = Settings {
            hash_tag_keys: true,
            ..Settings::new("n".repeat(crate::MAX_KEY_BYTES))
        };
        assert!(longest
            .check()
            .unwrap_err()
            .to_string()
            .contains("MAX_KEY_BYTES"));
    }

    #[test]
    fn names_must_fit_the_bulk_limit_and_never_name_another_locks_keys() {
        let long = Settings::new("n".repeat(crate::MAX_KEY_BYTES + 1))
            .check()
            .unwrap_err();
        assert!(long.to_string().contains("MAX_KEY_BYTES"), "{long}");
        let fence = Settings::new("garden:fence".into()).check().unwrap_err();
        assert!(fence.to_string().contains("\"garden\""), "{fence}");
        assert!(Settings::new("n".repeat(crate::MAX_KEY_BYTES))
            .check()
            .is_ok());
    }

    #[test]
    fn ttl_is_rounded_down_to_whole_milliseconds() {
        assert_eq!(with_ttl(Duration::from_micros(10_999)).ttl_ms(), 10);
        assert_eq!(with_ttl(Duration::from_secs(4)).ttl_ms(), 4000);
    }

    #[test]
    fn a_quorum_refuses_fair_mode_semaphores_cluster_nodes_and_foreign_notifiers() {
        let quorum = || Settings::for_quorum::<()>("jobs".into(), 3);
        assert!(quorum().check().is_ok());
        let refused = |settings: Settings, why: &str| {
            let err = settings.check().unwrap_err();
            assert!(
                matches!(&err, Error::InvalidOptions(m) if m.contains(why) && m.contains("\"jobs\"")),
                "{err}"
            );
        };
        refused(
            Settings {
                fair: true,
                ..quorum()
            },
            "fair mode",
        );
        refused(
            Settings {
                product: Product::Semaphore { permits: 2 },
                ..quorum()
            },
            "semaphore",
        );
        refused(
            Settings {
                reach: Reach::Quorum {
                    nodes: 3,
                    each: Topology::Cluster,
                },
                hash_tag_keys: true,
                ..quorum()
            },
            "independent masters",
        );
        let two = Notifier::quorum([
            redis::Client::open("redis://127.0.0.1:1/").unwrap(),
            redis::Client::open("redis://127.0.0.1:2/").unwrap(),
        ]);
        refused(
            Settings {
                notifier: Some(two.clone()),
                ..quorum()
            },
            "Notifier::quorum",
        );
        refused(
            Settings {
                notifier: Some(two),
                ..Settings::new("jobs".into())
            },
            "Notifier::new",
        );
        let one = Notifier::new(redis::Client::open("redis://127.0.0.1:1/").unwrap());
        refused(
            Settings {
                notifier: Some(one),
                ..quorum()
            },
            "Notifier::quorum",
        );
    }
}
