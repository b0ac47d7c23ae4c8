//! Every request runs in one tracing span `acquire` whose fields name its lock (`kind`,
//! `key`, `id`) and, at its end, how it ended (`outcome`, `fencing_token`); the span
//! closes when the request ends, so a subscriber's timing of it covers the wait. And a
//! guard tells when it was acquired and how often its lock was renewed.
//!
//! Each test records the spans with a layer of its own, the default subscriber of its
//! thread, on which a current-thread runtime runs the requests and the crate's tasks.

use crate::common;
use crate::common::either::Either;
use std::collections::HashMap;
use std::future::{Future, IntoFuture};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use redismutex::{Error, Mode, RwMutex, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// One `acquire` span: its fields as text, when it opened and when it closed.
#[derive(Debug, Clone)]
struct Recorded {
    fields: HashMap<String, String>,
    opened: Instant,
    closed: Option<Instant>,
}

impl Recorded {
    /// The field `name`, if it was recorded.
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }

    /// How long the span was open; it must have closed.
    fn open_for(&self) -> Duration {
        let closed = self.closed.expect("the span closed");
        closed - self.opened
    }
}

/// A layer that records the crate's `acquire` spans, in the order they opened.
#[derive(Debug, Clone, Default)]
struct Spans(Arc<Mutex<Seen>>);

/// The spans recorded, and the index of each open one by its id.
#[derive(Debug, Default)]
struct Seen {
    spans: Vec<Recorded>,
    open: HashMap<u64, usize>,
}

impl Spans {
    /// Every `acquire` span recorded so far.
    fn all(&self) -> Vec<Recorded> {
        self.0.lock().unwrap().spans.clone()
    }

    /// The last `acquire` span, which must exist.
    fn last(&self) -> Recorded {
        self.all().pop().expect("an acquire span")
    }

    /// Runs `update` on the open span `id`, if it is one of ours.
    fn update(&self, id: &Id, update: impl FnOnce(&mut Recorded)) {
        let mut seen = self.0.lock().unwrap();
        if let Some(&at) = seen.open.get(&id.into_u64()) {
            update(&mut seen.spans[at]);
        }
    }
}

/// Writes each recorded field as text: a string as it is, anything else as `{:?}`.
struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: Subscriber> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let metadata = attrs.metadata();
        if metadata.name() != "acquire" || !metadata.target().starts_with("redismutex") {
            return;
        }
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        let mut seen = self.0.lock().unwrap();
        seen.spans.push(Recorded {
            fields,
            opened: Instant::now(),
            closed: None,
        });
        let at = seen.spans.len() - 1;
        seen.open.insert(id.into_u64(), at);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        self.update(id, |span| values.record(&mut Fields(&mut span.fields)));
    }

    fn on_close(&self, id: Id, _: Context<'_, S>) {
        self.update(&id, |span| span.closed = Some(Instant::now()));
        self.0.lock().unwrap().open.remove(&id.into_u64());
    }
}

/// Runs `body` with a fresh redis-server's connection on a current-thread runtime,
/// with a [`Spans`] layer as this thread's default subscriber.
fn traced<F, Fut>(body: F)
where
    F: FnOnce(redis::aio::MultiplexedConnection, Spans) -> Fut,
    Fut: Future<Output = ()>,
{
    let server = common::RedisServer::start();
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    let _default = tracing::subscriber::set_default(subscriber);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(async { body(server.conn().await, spans).await });
}

/// The `kind` field a guard of `mode` was taken with.
fn kind(mode: Mode) -> &'static str {
    match mode {
        Mode::Read => "read",
        Mode::Write => "write",
    }
}

/// Asserts that `span` ended with `outcome` on the lock `key`, under a fresh 32-hex id
/// and with no fencing token, and is closed.
fn assert_no_guard(span: &Recorded, kind: &str, key: &str, outcome: &str) {
    assert_eq!(span.field("kind"), Some(kind), "{span:?}");
    assert_eq!(span.field("key"), Some(key), "{span:?}");
    let id = span.field("id").expect("an id");
    assert!(
        id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{span:?}"
    );
    assert_eq!(span.field("outcome"), Some(outcome), "{span:?}");
    assert_eq!(span.field("fencing_token"), None, "{span:?}");
    assert!(span.closed.is_some(), "{span:?}");
}

#[test]
fn each_request_has_one_span_naming_its_lock_and_outcome() {
    traced(|conn, spans| async move {
        let mx = RwMutex::new(conn.clone(), "spans");
        let sem = Semaphore::new(conn, "spans-permits", 2);
        let write = Either::from(mx.write().key("a").await.unwrap());
        let read = Either::from(mx.read().key("b").await.unwrap());
        let permit = sem.acquire().key("p").await.unwrap();
        let busy = mx.try_write().key("a").await.unwrap();
        assert!(busy.is_none(), "spans:a is held");

        let all = spans.all();
        assert_eq!(all.len(), 4, "one span per request: {all:#?}");
        for (span, guard) in all.iter().zip([&write, &read]) {
            assert_eq!(span.field("kind"), Some(kind(guard.mode())), "{span:?}");
            assert_eq!(span.field("key"), Some(guard.key()), "{span:?}");
            assert_eq!(span.field("id"), Some(guard.id()), "{span:?}");
            assert_eq!(span.field("outcome"), Some("acquired"), "{span:?}");
            let token = guard.fencing_token().to_string();
            assert_eq!(
                span.field("fencing_token"),
                Some(token.as_str()),
                "{span:?}"
            );
            assert!(span.closed.is_some(), "closed with its request: {span:?}");
        }
        let span = &all[2];
        assert_eq!(span.field("kind"), Some("permit"), "{span:?}");
        assert_eq!(span.field("key"), Some(permit.key()), "{span:?}");
        assert_eq!(span.field("id"), Some(permit.id()), "{span:?}");
        assert_eq!(span.field("outcome"), Some("acquired"), "{span:?}");
        let token = permit.fencing_token().to_string();
        assert_eq!(
            span.field("fencing_token"),
            Some(token.as_str()),
            "{span:?}"
        );
        assert_no_guard(&all[3], "write", write.key(), "busy");
        assert_ne!(all[3].field("id"), Some(write.id()), "a request's own id");

        for unlocked in [
            write.unlock().await,
            read.unlock().await,
            permit.unlock().await,
        ] {
            assert!(unlocked.unwrap());
        }
        assert_eq!(spans.all().len(), 4, "unlocking makes no acquire span");
    });
}

#[test]
fn a_request_that_gives_up_says_why() {
    traced(|conn, spans| async move {
        let mx = RwMutex::new(conn, "spans-give-up");
        let held = mx.write().key("a").await.unwrap();

        let timed_out = mx.write().key("a").timeout(Duration::from_millis(100));
        assert!(matches!(timed_out.await, Err(Error::Timeout)));
        assert_no_guard(&spans.last(), "write", held.key(), "timeout");

        let parent = CancellationToken::new();
        let cancel = parent.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            cancel.cancel();
        });
        let cancelled = mx.read().key("a").parent(parent);
        assert!(matches!(cancelled.await, Err(Error::Cancelled)));
        assert_no_guard(&spans.last(), "read", held.key(), "cancelled");
        assert_eq!(spans.all().len(), 3, "one span per request");
        assert!(held.unlock().await.unwrap());
    });
}

#[test]
fn a_dropped_request_says_cancelled() {
    traced(|conn, spans| async move {
        let mx = RwMutex::new(conn, "spans-dropped");
        let held = mx.write().key("a").await.unwrap();
        let wait = mx.write().key("a").into_future();
        let dropped = tokio::time::timeout(Duration::from_millis(100), wait).await;
        assert!(dropped.is_err(), "spans-dropped:a is held");
        assert_no_guard(&spans.last(), "write", held.key(), "cancelled");
        assert_eq!(spans.all().len(), 2, "one span per request");
        assert!(held.unlock().await.unwrap());
    });
}

#[test]
fn a_span_lasts_as_long_as_its_wait() {
    traced(|conn, spans| async move {
        let mx = RwMutex::new(conn, "spans-wait");
        let held = mx.write().key("a").await.unwrap();
        let holder = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            held.unlock().await.unwrap()
        });
        let started = Instant::now();
        let guard = mx.write().key("a").await.unwrap();
        let waited = started.elapsed();
        // Closed by the time the request returns: the guard does not keep it open.
        let span = spans.last();
        assert_eq!(span.field("id"), Some(guard.id()), "{span:?}");
        assert!(span.closed.is_some(), "{span:?}");
        let open_for = span.open_for();
        assert!(
            open_for >= Duration::from_millis(150) && open_for <= waited,
            "open {open_for:?} for a wait of {waited:?}"
        );
        assert!(holder.await.unwrap());
        assert!(guard.unlock().await.unwrap());
    });
}

#[test]
fn a_guard_tells_when_it_was_acquired_and_how_often_it_was_renewed() {
    traced(|conn, spans| async move {
        let mx = RwMutex::builder(conn.clone(), "spans-renewed")
            .ttl(Duration::from_millis(200))
            .reentrant(true)
            .build()
            .unwrap();
        let before = SystemTime::now();
        let outer = mx.write().key("a").await.unwrap();
        let after = SystemTime::now();
        assert!(before <= outer.acquired_at() && outer.acquired_at() <= after);
        assert_eq!(outer.refreshes(), 0, "not renewed yet");

        tokio::time::sleep(Duration::from_millis(100)).await;
        let inner = mx.write().key("a").await.unwrap();
        let span = spans.last();
        assert_eq!(
            span.field("id"),
            Some(outer.id()),
            "the outer lock's: {span:?}"
        );
        assert_eq!(span.field("key"), Some(outer.key()), "{span:?}");
        let token = inner.fencing_token().to_string();
        assert_eq!(
            span.field("fencing_token"),
            Some(token.as_str()),
            "{span:?}"
        );
        let since_outer = inner.acquired_at().duration_since(outer.acquired_at());
        assert!(
            since_outer.unwrap() >= Duration::from_millis(90),
            "its own request's time"
        );

        tokio::time::sleep(Duration::from_millis(650)).await;
        let (first, nested, last) = (outer.refreshes(), inner.refreshes(), outer.refreshes());
        assert!(
            nested >= 2,
            "{nested} renewals in 750 ms with a ttl of 200 ms"
        );
        assert!(first <= nested && nested <= last, "the outer guard's count");
        drop(inner);
        assert!(outer.unlock().await.unwrap());

        let sem = Semaphore::builder(conn, "spans-renewed-permits", 1)
            .ttl(Duration::from_millis(200))
            .build()
            .unwrap();
        let before = SystemTime::now();
        let permit = sem.acquire().await.unwrap();
        assert!(before <= permit.acquired_at() && permit.acquired_at() <= SystemTime::now());
        tokio::time::sleep(Duration::from_millis(650)).await;
        assert!(permit.refreshes() >= 2, "{} renewals", permit.refreshes());
        assert!(permit.unlock().await.unwrap());
    });
}
