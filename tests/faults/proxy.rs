//! The fault-injecting proxy against a real `redis-server`: pass, delay, blackhole,
//! reset, connection counting and shutdown.

use std::time::{Duration, Instant};

use crate::common::proxy::{Fault, Proxy};
use crate::common::{eventually, raw, RedisServer};
use redis::aio::MultiplexedConnection;
use redis::RedisResult;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a test waits to conclude that no reply is coming.
const SILENCE: Duration = Duration::from_millis(300);

async fn connect(proxy: &Proxy) -> RedisResult<MultiplexedConnection> {
    redis::Client::open(proxy.url())?
        .get_multiplexed_async_connection()
        .await
}

async fn ping(conn: &MultiplexedConnection) -> RedisResult<String> {
    redis::cmd("PING").query_async(&mut conn.clone()).await
}

/// A raw client socket through the proxy that has seen one PING answered.
async fn raw_client(proxy: &Proxy) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();
    stream.write_all(b"PING\r\n").await.unwrap();
    let mut reply = [0u8; 7];
    stream.read_exact(&mut reply).await.unwrap();
    assert_eq!(&reply, b"+PONG\r\n");
    stream
}

#[tokio::test]
async fn pass_forwards_commands_to_the_server() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port()).await;
    assert_eq!(proxy.fault(), Fault::Pass);
    assert_eq!(proxy.url(), format!("redis://127.0.0.1:{}/", proxy.port()));

    let conn = connect(&proxy).await.unwrap();
    assert_eq!(ping(&conn).await.unwrap(), "PONG");
    raw::cmd::<()>(&conn, "SET", &["through", "proxy"]).await;
    assert_eq!(raw::get(&conn, "through").await.as_deref(), Some("proxy"));
    let direct = server.conn().await;
    assert_eq!(raw::get(&direct, "through").await.as_deref(), Some("proxy"));
}

#[tokio::test]
async fn delay_holds_each_direction() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port()).await;
    let conn = connect(&proxy).await.unwrap();
    let delay = Fault::Delay {
        base: Duration::from_millis(100),
        jitter: Duration::ZERO,
    };
    proxy.set(delay);
    assert_eq!(proxy.fault(), delay);

    let start = Instant::now();
    assert_eq!(ping(&conn).await.unwrap(), "PONG");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(200),
        "round trip took {took:?}"
    );
    assert!(took < Duration::from_secs(5), "round trip took {took:?}");
}

#[tokio::test]
async fn delay_with_jitter_keeps_order() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port()).await;
    let mut stream = raw_client(&proxy).await;
    proxy.set(Fault::Delay {
        base: Duration::from_millis(1),
        jitter: Duration::from_millis(30),
    });

    // One command per chunk, closer together than the jitter: reordered chunks would
    // show as replies out of order.
    let mut expected = Vec::new();
    for i in 0..30 {
        stream
            .write_all(format!("ECHO {i}\r\n").as_bytes())
            .await
            .unwrap();
        expected.extend_from_slice(format!("${}\r\n{i}\r\n", i.to_string().len()).as_bytes());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut replies = vec![0u8; expected.len()];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut replies))
        .await
        .expect("replies within 5 s")
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&replies),
        String::from_utf8_lossy(&expected)
    );
}

#[tokio::test]
async fn blackhole_hangs_then_pass_needs_a_new_connection() {
    let server = RedisServer::start();
    let direct = server.conn().await;
    let proxy = Proxy::start(server.port()).await;
    let conn = connect(&proxy).await.unwrap();
    assert_eq!(ping(&conn).await.unwrap(), "PONG");

    proxy.set(Fault::Blackhole);
    assert_eq!(proxy.fault(), Fault::Blackhole);
    let mut set = redis::cmd("SET");
    set.arg("lost").arg("1");
    let mut blackholed = conn.clone();
    let sent = set.query_async::<()>(&mut blackholed);
    match tokio::time::timeout(Duration::from_secs(1), sent).await {
        Ok(Ok(())) => panic!("a reply came through the blackhole"),
        Ok(Err(err)) => assert!(err.is_timeout(), "expected a response timeout: {err}"),
        Err(_elapsed) => {}
    }
    // A new connection is accepted and held open, but nothing comes back.
    let mut fresh = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();
    fresh.write_all(b"PING\r\n").await.unwrap();
    let mut byte = [0u8; 1];
    assert!(tokio::time::timeout(SILENCE, fresh.read(&mut byte))
        .await
        .is_err());
    assert!(eventually(|| async { proxy.connections() == 2 }).await);
    assert_eq!(ping(&direct).await.unwrap(), "PONG");

    proxy.set(Fault::Pass);
    assert!(eventually(|| async { proxy.connections() == 0 }).await);
    assert!(
        ping(&conn).await.is_err(),
        "blackholed connection was resumed"
    );
    let again = connect(&proxy).await.unwrap();
    assert_eq!(ping(&again).await.unwrap(), "PONG");
    assert!(
        !raw::exists(&direct, "lost").await,
        "a blackholed SET arrived"
    );
}

#[tokio::test]
async fn reset_all_drops_connections_with_rst() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port()).await;
    let conn = connect(&proxy).await.unwrap();
    assert_eq!(ping(&conn).await.unwrap(), "PONG");
    let mut stream = raw_client(&proxy).await;

    proxy.reset_all();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(1), stream.read(&mut byte)).await;
    match read.expect("the reset arrives at once") {
        Err(err) => assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset),
        Ok(n) => panic!("expected a reset, read {n} bytes"),
    }
    let err = ping(&conn).await.expect_err("a reset connection answered");
    assert!(
        !err.is_timeout() && (err.is_connection_dropped() || err.is_io_error()),
        "expected a dropped connection: {err}"
    );

    let again = connect(&proxy).await.unwrap();
    assert_eq!(ping(&again).await.unwrap(), "PONG");
}

#[tokio::test]
async fn connections_counts_open_clients() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port()).await;
    assert_eq!(proxy.connections(), 0);

    let first = raw_client(&proxy).await;
    let _second = raw_client(&proxy).await;
    assert_eq!(proxy.connections(), 2);
    drop(first);
    assert!(eventually(|| async { proxy.connections() == 1 }).await);
    proxy.reset_all();
    assert!(eventually(|| async { proxy.connections() == 0 }).await);
    let _third = raw_client(&proxy).await;
    assert_eq!(proxy.connections(), 1);
}

#[tokio::test]
async fn dropping_the_proxy_closes_everything() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port()).await;
    let port = proxy.port();
    let mut stream = raw_client(&proxy).await;

    drop(proxy);
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(1), stream.read(&mut byte)).await;
    assert!(
        matches!(read, Ok(Ok(0) | Err(_))),
        "connection still open: {read:?}"
    );
    assert!(eventually(|| async { TcpStream::connect(("127.0.0.1", port)).await.is_err() }).await);
}
