//! `examples/metrics.rs` serves the crate's metrics over HTTP: run against a
//! harness-started redis-server, its `/metrics` page shows every series the example's
//! work makes, in Prometheus's text format, with the buckets it set and the `name` label,
//! and never the lock key.
#![cfg(feature = "metrics")]

use crate::common;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long the example may take to show every series.
const BOUND: Duration = Duration::from_secs(20);

/// The series the example's work makes: each must be on the page, as printed (the
/// exporter keeps the labels in the order the crate gives them, `name` last but for `le`).
const SERIES: [&str; 11] = [
    "# HELP redismutex_acquire_duration_seconds ",
    "# TYPE redismutex_acquire_duration_seconds histogram",
    r#"redismutex_acquire_duration_seconds_bucket{kind="write",outcome="acquired",name="redismutex-example-metrics",le="0.001"} "#,
    r#"redismutex_acquire_duration_seconds_bucket{kind="read",outcome="acquired",name="redismutex-example-metrics",le="+Inf"} "#,
    r#"redismutex_acquire_duration_seconds_count{kind="permit",outcome="acquired",name="redismutex-example-metrics-permits"} "#,
    r#"redismutex_held_duration_seconds_bucket{kind="write",name="redismutex-example-metrics",le="10"} "#,
    r#"redismutex_held{kind="write",name="redismutex-example-metrics"} "#,
    r#"redismutex_waiting{kind="read",name="redismutex-example-metrics"} "#,
    r#"redismutex_refresh_total{outcome="ok",name="redismutex-example-metrics-permits"} "#,
    r#"redismutex_lost_total{kind="write",reason="lost",name="redismutex-example-metrics"} "#,
    "# HELP redismutex_held Locks and permits held now.",
];

/// Kills and reaps the example when the test ends, passed or failed.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_serves_every_series_on_metrics() {
    let server = common::RedisServer::start();
    let port = free_port();
    let child = Command::new(common::worker_bin::example("metrics"))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--redis", &server.url(), "--seconds", "60"])
        .stdout(Stdio::null())
        .spawn()
        .expect("run the metrics example");
    let mut child = Killed(child);

    let deadline = tokio::time::Instant::now() + BOUND;
    let mut page = String::new();
    while tokio::time::Instant::now() < deadline {
        if let Some(status) = child.0.try_wait().expect("the example's status") {
            panic!("the example ended early ({status}); last page:\n{page}");
        }
        page = scrape(port).await.unwrap_or_default();
        if SERIES.iter().all(|series| page.contains(series)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let missing: Vec<_> = SERIES.iter().filter(|s| !page.contains(*s)).collect();
    assert!(missing.is_empty(), "missing {missing:?} in:\n{page}");
    assert!(!page.contains("key="), "a lock key as a label:\n{page}");
    // No gauge leaks: the example has 3 writing tasks, 2 reading, 1 taking permits.
    for (kind, tasks) in [("write", 3.0), ("read", 2.0), ("permit", 1.0)] {
        for gauge in ["redismutex_held{", "redismutex_waiting{"] {
            let series = format!("{gauge}kind=\"{kind}\",");
            let value = values(&page, &series);
            assert!(
                value.len() == 1 && (0.0..=tasks).contains(&value[0]),
                "{series}…}} {value:?} not in 0..={tasks}:\n{page}"
            );
        }
    }
    // A lock is timed as held after its request was timed as acquired.
    let count = |series: &str| values(&page, series).iter().sum::<f64>();
    let held = count(r#"redismutex_held_duration_seconds_count{kind="write","#);
    let acquired = count(r#"redismutex_acquire_duration_seconds_count{kind="write","#);
    assert!(
        1.0 <= held && held <= acquired,
        "{held} held, {acquired} acquired:\n{page}"
    );
    drop(child);
    drop(server);
}

/// The values of the lines of `page` that start with `series`.
fn values(page: &str, series: &str) -> Vec<f64> {
    page.lines()
        .filter(|line| line.starts_with(series))
        .map(|line| {
            let value = line.rsplit(' ').next().expect("a value");
            value
                .parse()
                .unwrap_or_else(|_| panic!("a number in {line:?}"))
        })
        .collect()
}

/// `GET /metrics` on `127.0.0.1:port` by HTTP/1.0: the body of a 200 answer, or `None`
/// (nothing listens yet, another status).
async fn scrape(port: u16) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    let request = format!("GET /metrics HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = String::new();
    let read = stream.read_to_string(&mut answer);
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .ok()?
        .ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.").then_some(())?;
    head.split(' ').nth(1).filter(|&code| code == "200")?;
    Some(body.to_owned())
}

/// A port nothing listens on now: the kernel's pick for a listener closed at once.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("its address").port()
}
