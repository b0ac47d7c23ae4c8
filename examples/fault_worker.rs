//! A lock holder for the fault-injection tests (`tests/faults/holders.rs`,
//! `tests/faults/server.rs`, `tests/faults/exec.rs`, `tests/faults/soak.rs`) and for the
//! semaphore and fair-mode tests (`tests/lock/semaphore.rs`, `tests/lock/fair.rs`,
//! through `tests/common/lone_worker.rs`), and a candidate of an election for
//! `tests/faults/election.rs` (election mode, below): a process, so that the tests can
//! SIGKILL and SIGSTOP it. Not meant to be run by hand.
//!
//! It runs critical sections on the lock server and checks itself on a referee server
//! (see `tests/common/referee.rs`): acquire, work, then `if guard.is_cancelled()` give up,
//! else register with the referee, act (writers: a non-atomic read-modify-write of a
//! counter and a fenced write; readers: a read) and leave; then unlock. It stops after
//! `FW_SECTIONS` sections (0: no limit) or when its standard input closes.
//!
//! The sections run in the `main` future of a current-thread runtime, as a simple service
//! would: after a SIGSTOP that runtime polls `main` before the guard's background task,
//! so the check right after waking is made before that task has fired anything. That is
//! what lets the frozen-holder test catch a guard that trusts only its token.
//!
//! Quorum mode (`tests/faults/quorum.rs`, the quorum soak in `tests/faults/soak.rs`): when
//! `FW_LOCK_URL` lists several URLs, comma-separated, each is one independent master of
//! a [`Quorum`] (one `ConnectionManager` per node, in the order given) and the mutex is
//! made over it, with `Notifier::quorum` on the same URLs; the sections and the events
//! are the same.
//!
//! Sentinel mode (`tests/faults/sentinel.rs`, feature `sentinel`): when `FW_SENTINEL`
//! names a master, `FW_LOCK_URL` lists the Sentinels, and the mutex is made over a
//! `SentinelConnection` with `Notifier::sentinel`, and `FW_REPLICAS` replicas must
//! acknowledge each acquire and renewal (`Builder::replicas`, 300 ms).
//!
//! Guarded data (`tests/faults/exec.rs`, the long run): with `FW_EXEC` set, a writer
//! section also does a read-modify-write of a data counter on the lock server, at
//! `<lock key>:data` (in the lock key's slot on a cluster, whose lock keys carry a hash
//! tag): it reads the counter through `guard.exec` right after the acquire, before its
//! work, so that a freeze can fall in between, and sets it to the value read + 1 through
//! `guard.exec` after its fenced write, or, when the section is abandoned, as a probe
//! after its fenced probe. Not over a quorum, where `exec` is refused.
//!
//! Set mode (`tests/faults/long_run_sets.rs`): with `FW_SET` at 2 or more, each section
//! takes a set of 2 to `FW_SET` distinct keys of its range (each read or written as
//! `FW_READ_PCT` says, named in random order) with `RwMutex::lock_all`, in one step;
//! the events are those of a section per key (an `ACQUIRED`, `CHECKED` or `ABANDONED`,
//! `ENTERED`, `WROTE`/`READ`, `FENCED`, `FIRED` and `RELEASED` for each key, all with the
//! set's id and each key's own token); the worker registers on the referee for every key
//! before acting on any, and leaves them all after. The set's one token fires for every
//! key at once (`FIRED` for each, with its reason). Not with `FW_EXEC`, `FW_HOLD_MS`,
//! `FW_FAIR` or a quorum, where sets are refused.
//!
//! Cluster mode (`tests/faults/cluster.rs`, feature `cluster`): when `FW_CLUSTER` is
//! `1`, `FW_LOCK_URL` lists the nodes of a Redis Cluster (seeds: any of them will do),
//! and the mutex is made over a `ClusterConnection` (RESP3, for sharded release
//! messages) with `hash_tag_keys(true)`, so the lock keys `<mutex>:{k0}`, `<mutex>:{k1}`,
//! ... spread over the masters, and `Notifier::cluster` on the same client.
//!
//! Election mode (`tests/faults/election.rs`): when `FW_ELECTION` names an election, the
//! worker is a candidate of that [`Election`] on the one lock server of `FW_LOCK_URL`
//! (TTL `FW_TTL_MS`, waiting by release notifications unless `FW_NOTIFY` is `0`), with
//! its `FW_NAME` as its value. It campaigns (`.timeout(FW_ACQUIRE_TIMEOUT_MS)`; a timeout
//! is not an error: it campaigns again) and, once it leads, prints `ACQUIRED` and
//! `LEADING`, registers on the referee as the election's one writer (`enter` once per
//! leadership, with its term as the token, so that the referee counts two leaders inside
//! at once as an overlap and a term not above the last leader's as out of order), and
//! does units of leader work: each waits `FW_WORK_MIN_MS`..`FW_WORK_MAX_MS` under
//! `Leadership::cancelled()`, then, unless `is_cancelled()`, makes a fenced write on the
//! referee with its term (and, with `FW_EXEC`, a read-modify-write of `<election>:data`
//! through `leadership.guard().exec`). It leads until it is killed, until the token fires
//! (`ABANDONED` with the reason, then a fenced probe with its term, and with `FW_EXEC` an
//! exec probe, both of which must be refused once a later leader wrote), or, after
//! `FW_TERM_UNITS` units (or once its standard input closes), steps down by
//! `FW_STEP_DOWN`: `resign` (`Leadership::resign`) or `drop`. Either way it leaves the
//! referee, prints `ENDED`, rests `FW_REST_MS` and campaigns again (it exits instead once
//! its standard input has closed). One server only; `FW_SECTIONS`, `FW_KEYS`,
//! `FW_HOLD_MS` and the other lock settings do not apply.
//!
//! Configured by environment variables only:
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `FW_LOCK_URL` | the lock server (the tests give each worker its own proxy); several comma-separated URLs: the nodes of a quorum (of a cluster with `FW_CLUSTER`, of Sentinels with `FW_SENTINEL`) | required |
//! | `FW_REFEREE_URL` | the referee server | required, but in semaphore mode |
//! | `FW_NAME` | this worker's name in events and on the referee | `worker` |
//! | `FW_MUTEX` | the mutex name | `faults` |
//! | `FW_KEYS` | how many lock keys (`k0`, `k1`, ...) to pick from at random | `1` |
//! | `FW_FIRST_KEY` | the first of them: keys `k<first>` .. `k<first + keys - 1>` | `0` |
//! | `FW_TTL_MS` | lock TTL | `1000` |
//! | `FW_READ_PCT` | share of sections taken as readers, in % | `0` |
//! | `FW_WORK_MIN_MS`, `FW_WORK_MAX_MS` | work time inside a section, uniform | `10`, `50` |
//! | `FW_SECTIONS` | sections to run, 0 for no limit | `0` |
//! | `FW_HOLD_MS` | if set: hold mode, write locks only, `HOLDING` then this long inside | unset |
//! | `FW_INTENT` | `1` for lock intent | `0` |
//! | `FW_ACQUIRE_TIMEOUT_MS` | `.timeout(..)` of each acquire | `3000` |
//! | `FW_NOTIFY` | `1`: wait by release notifications (through the same proxy); `0`: poll | `1` |
//! | `FW_FAIR` | `1` for fair mode (`Builder::fair`) | `0` |
//! | `FW_SET` | set mode (see above) when 2 or more: each section takes 2 to this many keys with `lock_all`; 0 for single keys | `0` |
//! | `FW_PERMITS` | if set: semaphore mode, permits of semaphore `FW_MUTEX` with this count, each held `FW_HOLD_MS` (default 60 s); the referee is not used; not in quorum mode | unset |
//! | `FW_SENTINEL` | if set: Sentinel mode, the master name; `FW_LOCK_URL` lists the Sentinels (feature `sentinel`) | unset |
//! | `FW_CLUSTER` | `1`: cluster mode; `FW_LOCK_URL` lists the cluster's nodes (feature `cluster`) | `0` |
//! | `FW_REPLICAS` | replicas that must acknowledge (`Builder::replicas`, within the smaller of 300 ms and TTL/4), 0 for none | `0` |
//! | `FW_MARGIN_MS` | a section acts only with at least this much validity left (`Guard::valid_until`), else it is abandoned with reason `margin` | `0` |
//! | `FW_DESCRIBE` | `1`: the holders are described (`Builder::describe_holder`) | `0` |
//! | `FW_EXEC` | `1`: writers read and write a data counter at `<lock key>:data` through `WriteGuard::exec` (see above) | `0` |
//! | `FW_LOG` | if set: a `tracing` filter (`redismutex=debug`), the crate's logs on stderr | unset |
//! | `FW_ELECTION` | if set: election mode, the election's name (see above) | unset |
//! | `FW_TERM_UNITS` | election mode: units of leader work before stepping down, 0 for no limit | `0` |
//! | `FW_STEP_DOWN` | election mode: how to step down, `resign` or `drop` | `resign` |
//! | `FW_REST_MS` | election mode: the pause after a leadership ends before campaigning again | `0` |
//!
//! Events, one a line on stdout, `<us>` being microseconds since the UNIX epoch:
//!
//! ```text
//! START <us> <pid>
//! ACQUIRED <us> <r|w|p> <key> <token> <id>              (p: a semaphore's permit)
//! HOLDING <us> <key> <token>
//! FIRED <us> <key> <token> <Lost|Expired|ClockJump|...|released>  (released: fired by unlock())
//! ABANDONED <us> <key> <token> <reason>                 (no write follows)
//! CHECKED <us> <key> <token>                           (is_cancelled() was false)
//! ENTERED <us> <key> <token> <ok|overlap>
//! WROTE <us> <key> <token> <left_us>                  (validity left when the write returned; < 0: after the deadline)
//! FENCED <us> <key> <token> <accepted|rejected> <write|probe>
//! EXEC <us> <key> <token> <begun_us> <accepted|refused|error> <read|write|probe> <before> <after>
//!                          (FW_EXEC; begun_us: when the exec call began; refused: NotHeld;
//!                           an error is printed as ERROR too; before, after: the guard's
//!                           cancel reason (Lost, Expired, ...) when the call began and
//!                           when it returned, `-` for none: a refusal with `-` before and
//!                           `Lost` after is the server's, the script found the lock key
//!                           not held; one the guard made before sending has `Expired`,
//!                           or whatever had fired before)
//! READ <us> <key> <token>
//! RELEASED <us> <key> <token> held=<bool>
//! ERROR <us> <text>
//! EXIT <us>
//! ```
//!
//! In election mode, the key is the election's name (its lock key) and the token the term:
//!
//! ```text
//! ACQUIRED <us> w <key> <term> <id>          (the election's lock, as its writer)
//! LEADING <us> <key> <term> <value> <left_us> (its record published; validity left)
//! ENTERED <us> <key> <term> <ok|overlap>     (registered on the referee, once a leadership)
//! CHECKED <us> <key> <term> <left_us>        (a unit: is_cancelled() was false; validity left)
//! FENCED <us> <key> <term> <accepted|rejected> <write|probe>
//! EXEC ...                                   (FW_EXEC; as above, on <key>:data)
//! ABANDONED <us> <key> <term> <reason>       (is_cancelled() was true: no write but the probes)
//! ENDED <us> <key> <term> <resign|drop|reason> (no longer claims the lead: left the referee)
//! RESIGNED <us> <key> <term> held=<bool>     (Leadership::resign's answer)
//! ```

#[path = "../tests/common/events.rs"]
#[allow(dead_code, unreachable_pub)]
mod events;
#[path = "../tests/common/referee.rs"]
#[allow(dead_code, unreachable_pub)]
mod referee;

use std::future::IntoFuture;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use events::now_us;
use rand::RngExt;
use redis::aio::ConnectionManager;
use redismutex::{
    Deployment, Election, Error, Guard, Leadership, Mode, MultiGuard, Notifier, Quorum, ReadGuard,
    RwMutex, Semaphore, WriteGuard,
};
use referee::Referee;
use tokio::sync::oneshot;

/// Prints one event line, stamped now, and flushes it.
macro_rules! event {
    ($kind:literal $(, $arg:expr)*) => {{
        let mut line = format!("{} {}", $kind, now_us());
        $( line.push(' '); line.push_str(&$arg.to_string()); )*
        line.push('\n');
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }};
}

fn var(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn num(name: &str, default: u64) -> u64 {
    var(name, &default.to_string())
        .parse()
        .unwrap_or_else(|err| panic!("{name}: {err}"))
}

struct Config {
    name: String,
    keys: u64,
    first_key: u64,
    read_pct: u64,
    work: (u64, u64),
    sections: u64,
    hold: Option<Duration>,
    acquire_timeout: Duration,
    margin: Duration,
    /// `FW_EXEC`: writers also update a data counter on the lock server through `exec`.
    exec: bool,
    /// `FW_SET`: the most keys a section's set takes (at least 2), or 0 for single keys.
    set: u64,
}

struct Worker<C> {
    config: Config,
    mx: RwMutex<C>,
    referee: Referee,
    stop: Arc<AtomicBool>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let lock_url = std::env::var("FW_LOCK_URL").expect("FW_LOCK_URL");
    if let Ok(filter) = std::env::var("FW_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    let config = Config::from_env();
    let stop = stop_when_stdin_closes();
    event!("START", std::process::id());

    let urls: Vec<&str> = lock_url.split(',').map(str::trim).collect();
    serve(&urls, config, stop).await;
}

impl Config {
    /// The settings the sections read, from the `FW_*` variables (the table above).
    fn from_env() -> Self {
        Config {
            name: var("FW_NAME", "worker"),
            keys: num("FW_KEYS", 1).max(1),
            first_key: num("FW_FIRST_KEY", 0),
            read_pct: num("FW_READ_PCT", 0),
            work: (num("FW_WORK_MIN_MS", 10), num("FW_WORK_MAX_MS", 50)),
            sections: num("FW_SECTIONS", 0),
            hold: std::env::var("FW_HOLD_MS")
                .ok()
                .map(|ms| Duration::from_millis(ms.parse().expect("FW_HOLD_MS"))),
            acquire_timeout: Duration::from_millis(num("FW_ACQUIRE_TIMEOUT_MS", 3000)),
            margin: Duration::from_millis(num("FW_MARGIN_MS", 0)),
            exec: var("FW_EXEC", "0") == "1",
            set: num("FW_SET", 0),
        }
    }
}

/// A flag set once standard input closes: a thread reads it to the end.
fn stop_when_stdin_closes() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let stdin_stop = Arc::clone(&stop);
    std::thread::spawn(move || {
        let mut sink = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        stdin_stop.store(true, Ordering::SeqCst);
    });
    stop
}

/// Runs the sections (or, in semaphore mode, holds permits) over what `urls` name: the
/// Sentinels of `FW_SENTINEL`, the nodes of a cluster (`FW_CLUSTER`), the nodes of a
/// quorum or one server; then prints `EXIT`.
async fn serve(urls: &[&str], config: Config, stop: Arc<AtomicBool>) {
    #[cfg(not(feature = "sentinel"))]
    assert!(
        std::env::var_os("FW_SENTINEL").is_none(),
        "FW_SENTINEL needs the feature sentinel"
    );
    #[cfg(feature = "sentinel")]
    if let Ok(master) = std::env::var("FW_SENTINEL") {
        serve_sentinel(urls, master, config, stop).await;
        return;
    }
    #[cfg(not(feature = "cluster"))]
    assert!(
        var("FW_CLUSTER", "0") != "1",
        "FW_CLUSTER needs the feature cluster"
    );
    #[cfg(feature = "cluster")]
    if var("FW_CLUSTER", "0") == "1" {
        serve_cluster(urls, config, stop).await;
        return;
    }
    let mut clients = Vec::new();
    let mut conns = Vec::new();
    for url in urls {
        let client = redis::Client::open(*url).expect("FW_LOCK_URL");
        conns.push(connect(&client).await);
        clients.push(client);
    }
    if let Ok(election) = std::env::var("FW_ELECTION") {
        assert!(urls.len() == 1, "FW_ELECTION runs on one lock server");
        let (conn, client) = (conns.remove(0), clients.remove(0));
        let candidate = Candidate::new(conn, client.into(), election, config, stop).await;
        candidate.run().await;
        event!("EXIT");
        return;
    }
    if urls.len() > 1 {
        let quorum = Quorum::new(conns).expect("a quorum of nodes");
        let notifier = Notifier::quorum(clients);
        let worker = Worker::new(quorum, notifier, config, stop).await;
        worker.run().await;
        event!("EXIT");
        return;
    }
    let (conn, client) = (conns.remove(0), clients.remove(0));
    if let Ok(permits) = std::env::var("FW_PERMITS") {
        let permits = permits.parse().expect("FW_PERMITS");
        hold_permits(conn, client, permits, &config, &stop).await;
        event!("EXIT");
        return;
    }
    let worker = Worker::new(conn, client.into(), config, stop).await;
    worker.run().await;
    event!("EXIT");
}

/// Sentinel mode: the mutex over a `SentinelConnection` to `master`, `urls` being the
/// Sentinels; then prints `EXIT`.
#[cfg(feature = "sentinel")]
async fn serve_sentinel(urls: &[&str], master: String, config: Config, stop: Arc<AtomicBool>) {
    use redis::sentinel::{SentinelClient, SentinelServerType};
    let sentinels = || {
        SentinelClient::build(
            urls.to_vec(),
            master.clone(),
            None,
            SentinelServerType::Master,
        )
        .expect("FW_LOCK_URL: Sentinel URLs")
    };
    let conn = redismutex::SentinelConnection::new(sentinels());
    let worker = Worker::new(conn, Notifier::sentinel(sentinels()), config, stop).await;
    worker.run().await;
    event!("EXIT");
}

/// Cluster mode: the mutex over a `ClusterConnection` (RESP3) to the cluster of `urls`;
/// then prints `EXIT`.
#[cfg(feature = "cluster")]
async fn serve_cluster(urls: &[&str], config: Config, stop: Arc<AtomicBool>) {
    let client = redis::cluster::ClusterClientBuilder::new(urls.to_vec())
        .use_protocol(redis::ProtocolVersion::RESP3)
        .build()
        .expect("FW_LOCK_URL: cluster node URLs");
    let conn = connect_cluster(&client).await;
    let worker = Worker::new(conn, Notifier::cluster(client), config, stop).await;
    worker.run().await;
    event!("EXIT");
}

/// A connection manager to `client`'s server, retried until the server answers.
async fn connect(client: &redis::Client) -> ConnectionManager {
    loop {
        match ConnectionManager::new(client.clone()).await {
            Ok(conn) => return conn,
            Err(err) => event!("ERROR", format!("connect lock server: {err}")),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A connection to the cluster of `client`, retried until its nodes answer.
#[cfg(feature = "cluster")]
async fn connect_cluster(
    client: &redis::cluster::ClusterClient,
) -> redis::cluster_async::ClusterConnection {
    loop {
        match client.get_async_connection().await {
            Ok(conn) => return conn,
            Err(err) => event!("ERROR", format!("connect cluster: {err}")),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The referee of `FW_REFEREE_URL`, retried until it answers.
async fn connect_referee() -> Referee {
    let referee_url = std::env::var("FW_REFEREE_URL").expect("FW_REFEREE_URL");
    loop {
        match Referee::connect(&referee_url).await {
            Ok(referee) => return referee,
            Err(err) => event!("ERROR", format!("connect referee: {err}")),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl<C: Deployment> Worker<C> {
    /// Connects to the referee and builds the mutex over `conn` (one server, a quorum,
    /// Sentinel or a cluster), waiting by `notifier` unless `FW_NOTIFY` is `0`.
    async fn new(conn: C, notifier: Notifier, config: Config, stop: Arc<AtomicBool>) -> Self {
        let referee = connect_referee().await;
        let mut builder = RwMutex::builder(conn, var("FW_MUTEX", "faults"))
            .ttl(Duration::from_millis(num("FW_TTL_MS", 1000)))
            .lock_intent(var("FW_INTENT", "0") == "1")
            .fair(var("FW_FAIR", "0") == "1")
            .hash_tag_keys(var("FW_CLUSTER", "0") == "1")
            .describe_holder(var("FW_DESCRIBE", "0") == "1");
        let replicas = num("FW_REPLICAS", 0);
        if replicas > 0 {
            let wait = Duration::from_millis((num("FW_TTL_MS", 1000) / 4).min(300));
            builder = builder.replicas(replicas as usize, wait);
        }
        if var("FW_NOTIFY", "1") == "1" {
            builder = builder.notifier(notifier);
        }
        let mx = builder.build().expect("valid mutex options");
        Worker {
            config,
            mx,
            referee,
            stop,
        }
    }
}

impl<C: Send + Sync + 'static> Worker<C> {
    async fn run(&self) {
        let mut done = 0;
        assert!(
            self.config.set == 0 || (self.config.set >= 2 && !self.config.exec),
            "FW_SET: 0, or at least 2 without FW_EXEC"
        );
        while !self.stop.load(Ordering::SeqCst)
            && (self.config.sections == 0 || done < self.config.sections)
        {
            if self.config.set >= 2 {
                if self.take_set().await {
                    done += 1;
                }
                continue;
            }
            let (key, mode) = self.pick();
            let timeout = self.config.acquire_timeout;
            let ran = match mode {
                Mode::Write => {
                    let acquire = self.mx.write().key(&key).timeout(timeout);
                    self.take(&key, acquire).await
                }
                Mode::Read => {
                    let acquire = self.mx.read().key(&key).timeout(timeout);
                    self.take(&key, acquire).await
                }
            };
            if ran {
                done += 1;
            }
        }
    }

    /// Awaits `acquire` (on `key`) and runs a section under the guard it gives; an error
    /// is printed, after which it pauses. Whether a section ran.
    async fn take<G: Section>(
        &self,
        key: &str,
        acquire: impl IntoFuture<Output = Result<G, Error>>,
    ) -> bool {
        match acquire.await {
            Ok(guard) => {
                self.section(guard).await;
                true
            }
            Err(err) => {
                event!("ERROR", format!("acquire {key}: {err}").replace('\n', " "));
                tokio::time::sleep(Duration::from_millis(20)).await;
                false
            }
        }
    }

    fn pick(&self) -> (String, Mode) {
        let mut rng = rand::rng();
        let first = self.config.first_key;
        let key = format!("k{}", rng.random_range(first..first + self.config.keys));
        let read = self.config.hold.is_none() && rng.random_range(0..100) < self.config.read_pct;
        (key, if read { Mode::Read } else { Mode::Write })
    }

    async fn section<G: Section>(&self, guard: G) {
        let (key, token) = (guard.key().to_string(), guard.fencing_token());
        let id = guard.id().to_string();
        let mode = G::MODE;
        event!("ACQUIRED", mode, key, token, guard.id());
        let guard = Arc::new(guard);
        let (release, released) = oneshot::channel();
        let watcher = tokio::spawn(watch(Arc::clone(&guard), released));
        let seen = match guard.writer() {
            Some(writer) if self.config.exec => data_read(writer).await,
            _ => None,
        };

        let work = match self.config.hold {
            Some(hold) => {
                event!("HOLDING", key, token);
                hold
            }
            None => {
                let (min, max) = self.config.work;
                Duration::from_millis(rand::rng().random_range(min..=max.max(min)))
            }
        };
        tokio::time::sleep(work).await;

        let short = guard
            .valid_until()
            .saturating_duration_since(tokio::time::Instant::now())
            < self.config.margin;
        if guard.is_cancelled() || short {
            let reason = guard
                .cancel_reason()
                .map_or("margin".to_string(), |reason| format!("{reason:?}"));
            event!("ABANDONED", key, token, reason);
            // A probe: a holder that lost its lock tries its fenced write anyway; the
            // resource must reject it if a later holder wrote meanwhile.
            self.fenced(&key, token, &id, "probe").await;
            if let (Some(seen), Some(writer)) = (seen, guard.writer()) {
                data_write(writer, seen, "probe").await;
            }
        } else {
            event!("CHECKED", key, token);
            if let Err(err) = self.act(&*guard, mode, &id, seen).await {
                event!("ERROR", format!("referee: {err}"));
            }
        }

        let _ = release.send(());
        let fired = watcher.await.unwrap_or(true);
        let guard = match Arc::try_unwrap(guard) {
            Ok(guard) => guard,
            Err(_) => {
                event!("ERROR", "the watcher kept the guard; dropped it");
                return;
            }
        };
        if !fired {
            // unlock() fires the token at once: not a fault.
            event!("FIRED", key, token, "released");
        }
        match guard.unlock().await {
            Ok(held) => event!("RELEASED", key, token, format!("held={held}")),
            Err(err) => event!("ERROR", format!("unlock {key}: {err}").replace('\n', " ")),
        }
    }

    /// Set mode: takes a set ([`pick_set`](Self::pick_set)) with `lock_all` and runs a
    /// section under it; an error is printed, after which it pauses. Whether a section
    /// ran.
    async fn take_set(&self) -> bool {
        let picked = self.pick_set();
        let keys_of = |mode: Mode| {
            (picked.iter())
                .filter(move |(_, m)| *m == mode)
                .map(|(key, _)| key.clone())
                .collect::<Vec<_>>()
        };
        let acquire = (self.mx.lock_all())
            .write(keys_of(Mode::Write))
            .read(keys_of(Mode::Read))
            .timeout(self.config.acquire_timeout);
        match acquire.await {
            Ok(set) => {
                self.set_section(set).await;
                true
            }
            Err(err) => {
                let keys: Vec<&str> = picked.iter().map(|(key, _)| key.as_str()).collect();
                let keys = keys.join(",");
                event!("ERROR", format!("acquire {keys}: {err}").replace('\n', " "));
                tokio::time::sleep(Duration::from_millis(20)).await;
                false
            }
        }
    }

    /// 2 to `FW_SET` distinct keys of the worker's range (no more than it has), in random
    /// order, each read or written as `FW_READ_PCT` says.
    fn pick_set(&self) -> Vec<(String, Mode)> {
        let mut rng = rand::rng();
        let (first, keys) = (self.config.first_key, self.config.keys);
        let most = self.config.set.min(keys).max(1);
        let size = rng.random_range(most.min(2)..=most);
        let mut picked: Vec<(String, Mode)> = Vec::new();
        while (picked.len() as u64) < size {
            let key = format!("k{}", rng.random_range(first..first + keys));
            if picked.iter().any(|(k, _)| *k == key) {
                continue;
            }
            let read = rng.random_range(0..100) < self.config.read_pct;
            picked.push((key, if read { Mode::Read } else { Mode::Write }));
        }
        picked
    }

    /// A section under `set`: as [`section`](Self::section) does for one guard, for every
    /// key of the set, which all act together: checked together, registered on the
    /// referee together before any acts, and left together.
    async fn set_section(&self, set: MultiGuard) {
        let held: Vec<(String, &'static str, u64)> = set
            .keys()
            .map(|key| {
                let mode = match set.mode(key) {
                    Some(Mode::Write) => "w",
                    _ => "r",
                };
                (key.to_string(), mode, set.fencing_token(key).unwrap_or(0))
            })
            .collect();
        let id = set.id().to_string();
        for (key, mode, token) in &held {
            event!("ACQUIRED", mode, key, token, id);
        }
        let set = Arc::new(set);
        let (release, released) = oneshot::channel();
        let watcher = tokio::spawn(watch_set(Arc::clone(&set), held.clone(), released));
        let (min, max) = self.config.work;
        let work = Duration::from_millis(rand::rng().random_range(min..=max.max(min)));
        tokio::time::sleep(work).await;

        let short = set
            .valid_until()
            .saturating_duration_since(tokio::time::Instant::now())
            < self.config.margin;
        if set.is_cancelled() || short {
            let reason = set
                .cancel_reason()
                .map_or("margin".to_string(), |reason| format!("{reason:?}"));
            for (key, _, token) in &held {
                event!("ABANDONED", key, token, reason);
                self.fenced(key, *token, &id, "probe").await;
            }
        } else {
            for (key, _, token) in &held {
                event!("CHECKED", key, token);
            }
            if let Err(err) = self.act_set(&set, &held, &id).await {
                event!("ERROR", format!("referee: {err}"));
            }
        }

        let _ = release.send(());
        let fired = watcher.await.unwrap_or(true);
        let set = match Arc::try_unwrap(set) {
            Ok(set) => set,
            Err(_) => {
                event!("ERROR", "the watcher kept the set; dropped it");
                return;
            }
        };
        if !fired {
            for (key, _, token) in &held {
                event!("FIRED", key, token, "released");
            }
        }
        match set.unlock().await {
            Ok(all) => {
                for (key, _, token) in &held {
                    event!("RELEASED", key, token, format!("held={all}"));
                }
            }
            Err(err) => event!("ERROR", format!("unlock set: {err}").replace('\n', " ")),
        }
    }

    /// Registers on the referee for every key of the set (`held`: key, mode, token), then
    /// writes (a non-atomic read-modify-write of each write key's counter, then its fenced
    /// write) or reads each key, then leaves every key.
    async fn act_set(
        &self,
        set: &MultiGuard,
        held: &[(String, &'static str, u64)],
        id: &str,
    ) -> redis::RedisResult<()> {
        let name = &self.config.name;
        for (key, mode, token) in held {
            let overlap = self
                .referee
                .enter(key, mode, name, *token, now_us())
                .await?;
            event!(
                "ENTERED",
                key,
                token,
                if overlap { "overlap" } else { "ok" }
            );
        }
        for (key, mode, token) in held {
            if *mode == "w" {
                let value = self.referee.counter(key).await?;
                tokio::time::sleep(Duration::from_millis(1)).await;
                self.referee.commit(key, value + 1).await?;
                event!("WROTE", key, token, left_us(set.valid_until()));
                self.fenced(key, *token, id, "write").await;
            } else {
                self.referee.counter(key).await?;
                event!("READ", key, token);
            }
        }
        for (key, _, _) in held {
            self.referee.leave(key, name).await?;
        }
        Ok(())
    }

    /// Registers with the referee, writes or reads, and leaves. A writer that read the
    /// data counter (`seen`, with `FW_EXEC`) writes it after its fenced write.
    async fn act(
        &self,
        guard: &impl Section,
        mode: &str,
        id: &str,
        seen: Option<i64>,
    ) -> redis::RedisResult<()> {
        let (key, token) = (guard.key(), guard.fencing_token());
        let name = &self.config.name;
        let overlap = self.referee.enter(key, mode, name, token, now_us()).await?;
        event!(
            "ENTERED",
            key,
            token,
            if overlap { "overlap" } else { "ok" }
        );
        if mode == "w" {
            // Deliberately not atomic: GET, a pause, SET. Two writers inside at once
            // lose an update.
            let value = self.referee.counter(key).await?;
            tokio::time::sleep(Duration::from_millis(1)).await;
            self.referee.commit(key, value + 1).await?;
            event!("WROTE", key, token, left_us(guard.valid_until()));
            self.fenced(key, token, id, "write").await;
            if let (Some(seen), Some(writer)) = (seen, guard.writer()) {
                data_write(writer, seen, "write").await;
            }
        } else {
            self.referee.counter(key).await?;
            event!("READ", key, token);
        }
        self.referee.leave(key, name).await
    }

    /// A fenced write with `token` by the holder of lock id `id`.
    async fn fenced(&self, key: &str, token: u64, id: &str, what: &str) {
        fenced(&self.referee, key, token, id, what).await;
    }
}

/// What a section needs of its guard beyond [`Guard`]: the mode label of its events and,
/// for a writer, the write guard (for `FW_EXEC`'s guarded reads and writes, which only a
/// writer does).
trait Section: Guard {
    /// `w` or `r`, as events and the referee name the mode.
    const MODE: &'static str;

    /// The guard as a writer, `None` for a reader.
    fn writer(&self) -> Option<&WriteGuard>;
}

impl Section for WriteGuard {
    const MODE: &'static str = "w";

    fn writer(&self) -> Option<&WriteGuard> {
        Some(self)
    }
}

impl Section for ReadGuard {
    const MODE: &'static str = "r";

    fn writer(&self) -> Option<&WriteGuard> {
        None
    }
}

/// A fenced write on `referee` with `token` by the holder of lock id `id`, as a `write`
/// or a `probe` (`what`); prints `FENCED` with the verdict.
async fn fenced(referee: &Referee, key: &str, token: u64, id: &str, what: &str) {
    match referee.fenced(key, token, id).await {
        Ok(accepted) => {
            let verdict = if accepted { "accepted" } else { "rejected" };
            event!("FENCED", key, token, verdict, what);
        }
        Err(err) => event!("ERROR", format!("fenced {key}: {err}")),
    }
}

/// `FW_EXEC`: reads the data counter of `guard`'s key on the lock server through
/// `guard.exec` (0 when unset); `None` unless accepted.
async fn data_read(guard: &WriteGuard) -> Option<i64> {
    let mut pipe = redis::pipe();
    pipe.get(format!("{}:data", guard.key()));
    let (begun, before) = (now_us(), reason(guard));
    let read = guard.exec::<(Option<i64>,)>(&pipe).await;
    let read = read.map(|(value,)| value.unwrap_or(0));
    exec_event(guard, (begun, &before), "read", read)
}

/// `FW_EXEC`: sets the data counter of `guard`'s key to `seen + 1` through `guard.exec`,
/// as a section's `write` or an abandoned section's `probe`.
async fn data_write(guard: &WriteGuard, seen: i64, what: &str) {
    let mut pipe = redis::pipe();
    pipe.set(format!("{}:data", guard.key()), seen + 1).ignore();
    let (begun, before) = (now_us(), reason(guard));
    let written = guard.exec::<()>(&pipe).await;
    exec_event(guard, (begun, &before), what, written);
}

/// `guard`'s cancel reason (`Lost`, `Expired`, ...), `-` while it has none.
fn reason(guard: &impl Guard) -> String {
    guard
        .cancel_reason()
        .map_or("-".to_string(), |reason| format!("{reason:?}"))
}

/// Prints the `EXEC` event of an exec begun at `begun` (µs) with the guard's cancel
/// reason `before` it: accepted, refused (`NotHeld`) or an error (also printed as
/// `ERROR`), and the guard's cancel reason now; the value if accepted.
fn exec_event<T>(
    guard: &impl Guard,
    (begun, before): (u64, &str),
    what: &str,
    result: Result<T, Error>,
) -> Option<T> {
    let (key, token, after) = (guard.key(), guard.fencing_token(), reason(guard));
    match result {
        Ok(value) => {
            event!("EXEC", key, token, begun, "accepted", what, before, after);
            Some(value)
        }
        Err(Error::NotHeld { .. }) => {
            event!("EXEC", key, token, begun, "refused", what, before, after);
            None
        }
        Err(err) => {
            event!("EXEC", key, token, begun, "error", what, before, after);
            event!(
                "ERROR",
                format!("exec {what} {key}: {err}").replace('\n', " ")
            );
            None
        }
    }
}

/// Semaphore mode: takes permits one after another, holding each for `FW_HOLD_MS`.
async fn hold_permits(
    conn: ConnectionManager,
    client: redis::Client,
    permits: u32,
    config: &Config,
    stop: &AtomicBool,
) {
    let mut builder = Semaphore::builder(conn, var("FW_MUTEX", "faults"), permits)
        .ttl(Duration::from_millis(num("FW_TTL_MS", 1000)))
        .fair(var("FW_FAIR", "0") == "1")
        .describe_holder(var("FW_DESCRIBE", "0") == "1");
    if var("FW_NOTIFY", "1") == "1" {
        builder = builder.notifier(client);
    }
    let sem = builder.build().expect("valid semaphore options");
    let hold = config.hold.unwrap_or(Duration::from_secs(60));
    while !stop.load(Ordering::SeqCst) {
        match sem.acquire().timeout(config.acquire_timeout).await {
            Ok(permit) => {
                let (key, token) = (permit.key().to_string(), permit.fencing_token());
                event!("ACQUIRED", "p", key, token, permit.id());
                event!("HOLDING", key, token);
                tokio::time::sleep(hold).await;
                match permit.unlock().await {
                    Ok(held) => event!("RELEASED", key, token, format!("held={held}")),
                    Err(err) => event!("ERROR", format!("unlock {key}: {err}").replace('\n', " ")),
                }
            }
            Err(err) => {
                event!("ERROR", format!("acquire: {err}").replace('\n', " "));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// The time from now to `deadline` in µs, negative once it has passed.
fn left_us(deadline: tokio::time::Instant) -> i128 {
    let now = tokio::time::Instant::now();
    if deadline >= now {
        (deadline - now).as_micros() as i128
    } else {
        -((now - deadline).as_micros() as i128)
    }
}

/// Prints `FIRED` with the guard's reason when its token fires before the section
/// releases it; returns whether it did.
async fn watch(guard: Arc<impl Guard>, released: oneshot::Receiver<()>) -> bool {
    tokio::select! {
        biased;
        () = guard.cancellation_token().cancelled() => {
            let reason = guard
                .cancel_reason()
                .map_or("unknown".to_string(), |reason| format!("{reason:?}"));
            event!("FIRED", guard.key(), guard.fencing_token(), reason);
            true
        }
        _ = released => false,
    }
}

/// Set mode: waits until `set`'s token fires (prints `FIRED` for every key of `held`,
/// with the set's cancel reason, and returns true) or the section ends (false).
async fn watch_set(
    set: Arc<MultiGuard>,
    held: Vec<(String, &'static str, u64)>,
    released: oneshot::Receiver<()>,
) -> bool {
    tokio::select! {
        biased;
        () = set.cancellation_token().cancelled() => {
            let reason = set
                .cancel_reason()
                .map_or("unknown".to_string(), |reason| format!("{reason:?}"));
            for (key, _, token) in &held {
                event!("FIRED", key, token, reason);
            }
            true
        }
        _ = released => false,
    }
}

/// Election mode (`FW_ELECTION`): a candidate that campaigns, leads and campaigns again.
struct Candidate<C> {
    election: Election<C>,
    referee: Referee,
    config: Config,
    /// `FW_TERM_UNITS`: units of leader work before stepping down, 0 for no limit.
    units: u64,
    /// `FW_STEP_DOWN`: `true` to resign, `false` to drop the leadership.
    resign: bool,
    /// `FW_REST_MS`: the pause after a leadership before campaigning again.
    rest: Duration,
    stop: Arc<AtomicBool>,
}

impl<C: Deployment> Candidate<C> {
    /// Connects to the referee and builds the election `name` over `conn`, observing
    /// releases by `notifier` unless `FW_NOTIFY` is `0`.
    async fn new(
        conn: C,
        notifier: Notifier,
        name: String,
        config: Config,
        stop: Arc<AtomicBool>,
    ) -> Self {
        let referee = connect_referee().await;
        let mut builder =
            Election::builder(conn, name).ttl(Duration::from_millis(num("FW_TTL_MS", 1000)));
        if var("FW_NOTIFY", "1") == "1" {
            builder = builder.notifier(notifier);
        }
        let resign = match var("FW_STEP_DOWN", "resign").as_str() {
            "resign" => true,
            "drop" => false,
            other => panic!("FW_STEP_DOWN: {other}: resign or drop"),
        };
        Candidate {
            election: builder.build().expect("valid election options"),
            referee,
            config,
            units: num("FW_TERM_UNITS", 0),
            resign,
            rest: Duration::from_millis(num("FW_REST_MS", 0)),
            stop,
        }
    }

    /// Campaigns with `FW_NAME` as the value, leads, and campaigns again, until standard
    /// input closes. A campaign that times out is tried again at once.
    async fn run(&self) {
        while !self.stop.load(Ordering::SeqCst) {
            let campaign = self.election.campaign(self.config.name.clone());
            match campaign.timeout(self.config.acquire_timeout).await {
                Ok(leadership) => {
                    self.lead(leadership).await;
                    tokio::time::sleep(self.rest).await;
                }
                Err(Error::Timeout) => {}
                Err(err) => {
                    event!("ERROR", format!("campaign: {err}").replace('\n', " "));
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }

    /// Leads: registers on the referee, does units of leader work until the token fires
    /// (then probes) or it is time to step down, leaves the referee and steps down.
    async fn lead(&self, leadership: Leadership) {
        let guard = leadership.guard();
        let (key, term) = (guard.key().to_string(), leadership.fencing_token());
        let name = &self.config.name;
        event!("ACQUIRED", "w", key, term, guard.id());
        event!(
            "LEADING",
            key,
            term,
            name,
            left_us(leadership.valid_until())
        );
        match self.referee.enter(&key, "w", name, term, now_us()).await {
            Ok(overlap) => event!("ENTERED", key, term, if overlap { "overlap" } else { "ok" }),
            Err(err) => event!("ERROR", format!("referee: {err}")),
        }
        let (mut done, mut seen) = (0, None);
        let lost = loop {
            let due = self.units > 0 && done >= self.units;
            if due || self.stop.load(Ordering::SeqCst) {
                break None;
            }
            let (min, max) = self.config.work;
            let work = Duration::from_millis(rand::rng().random_range(min..=max.max(min)));
            tokio::select! {
                biased;
                () = leadership.cancelled() => {}
                () = tokio::time::sleep(work) => {}
            }
            // The check right before the write: after a freeze this runs before the
            // leadership's background task has had a chance to fire the token.
            if leadership.is_cancelled() {
                break Some(reason(guard));
            }
            seen = self.unit(&leadership).await.or(seen);
            done += 1;
        };
        if let Some(reason) = &lost {
            event!("ABANDONED", key, term, reason);
            // Probes: a former leader tries its writes anyway; they must be refused once
            // a later leader wrote.
            fenced(&self.referee, &key, term, guard.id(), "probe").await;
            if let Some(seen) = seen {
                data_write(guard, seen, "probe").await;
            }
        }
        if let Err(err) = self.referee.leave(&key, name).await {
            event!("ERROR", format!("referee: {err}"));
        }
        self.step_down(leadership, lost).await;
    }

    /// One unit of leader work, its validity checked just before: a fenced write with
    /// the term and, with `FW_EXEC`, a guarded read-modify-write of `<key>:data`; the
    /// value it read, if any.
    async fn unit(&self, leadership: &Leadership) -> Option<i64> {
        let guard = leadership.guard();
        let (key, term) = (guard.key(), leadership.fencing_token());
        event!("CHECKED", key, term, left_us(leadership.valid_until()));
        let seen = if self.config.exec {
            data_read(guard).await
        } else {
            None
        };
        fenced(&self.referee, key, term, guard.id(), "write").await;
        if let Some(seen) = seen {
            data_write(guard, seen, "write").await;
        }
        seen
    }

    /// Prints `ENDED` (with the cancel reason when the leadership was `lost`), then
    /// resigns (printing `RESIGNED`) or drops it.
    async fn step_down(&self, leadership: Leadership, lost: Option<String>) {
        let (key, term) = (
            leadership.guard().key().to_string(),
            leadership.fencing_token(),
        );
        match lost {
            Some(reason) => event!("ENDED", key, term, reason),
            None if self.resign => {
                event!("ENDED", key, term, "resign");
                match leadership.resign().await {
                    Ok(held) => event!("RESIGNED", key, term, format!("held={held}")),
                    Err(err) => event!("ERROR", format!("resign: {err}").replace('\n', " ")),
                }
                return;
            }
            None => event!("ENDED", key, term, "drop"),
        }
        drop(leadership);
    }
}
