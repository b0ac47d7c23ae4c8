//! The `redismutex` command's `--url`: a password in the URL, and `rediss://` (TLS)
//! with a server certificate from a CA given by `SSL_CERT_FILE`, against real servers
//! the test starts.
#![cfg(feature = "cli")]

use std::path::Path;
use std::process::{Command, Output};

use crate::common::RedisServer;

fn redismutex(url: &str, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_redismutex"));
    command
        .arg("--url")
        .arg(url)
        .args(args)
        .env_remove("REDIS_URL");
    command
}

fn run(mut command: Command) -> Output {
    command.output().expect("redismutex runs")
}

#[test]
fn a_password_in_the_url_is_used_and_never_printed() {
    let server = RedisServer::start_with(&["--requirepass", "s3cret-pw"]);
    let good = format!("redis://:s3cret-pw@127.0.0.1:{}/", server.port());
    let locked = run(redismutex(
        &good,
        &["lock", "pw", "--", "sh", "-c", "exit 4"],
    ));
    assert_eq!(locked.status.code(), Some(4), "{locked:?}");

    let bad = format!("redis://:wrong-pw@127.0.0.1:{}/", server.port());
    let refused = run(redismutex(&bad, &["lock", "pw", "--", "true"]));
    assert_eq!(refused.status.code(), Some(69), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("127.0.0.1:{}", server.port())),
        "{stderr}"
    );
    assert!(stderr.contains("\"pw\""), "{stderr}");
    assert!(
        !stderr.contains("wrong-pw"),
        "the password leaked: {stderr}"
    );
}

/// Makes a CA and a server certificate for 127.0.0.1 signed by it, with `openssl`.
fn certificates(dir: &Path) {
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .current_dir(dir)
            .args(args)
            .output()
            .expect("openssl runs");
        assert!(out.status.success(), "openssl {args:?}: {out:?}");
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=redismutex test CA",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    std::fs::write(dir.join("ext.cnf"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ]);
}

#[test]
fn rediss_urls_speak_tls_and_check_the_server_certificate() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let (cert, key) = (path("server.pem"), path("server.key"));
    // The plain port stays for the harness's readiness check; TLS is on its own port.
    let server = RedisServer::start_with(&[
        "--tls-port",
        &port,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-auth-clients",
        "no",
    ]);
    let url = format!("rediss://127.0.0.1:{port}/");

    let mut trusted = redismutex(
        &url,
        &["lock", "tls", "--", "sh", "-c", "echo $REDISMUTEX_KEY"],
    );
    trusted.env("SSL_CERT_FILE", path("ca.pem"));
    let locked = run(trusted);
    assert_eq!(locked.status.code(), Some(0), "{locked:?}");
    assert_eq!(String::from_utf8_lossy(&locked.stdout).trim(), "tls");
    // The fence key it left is on the server behind the TLS port.
    let fence: Option<String> = redis::cmd("GET")
        .arg("tls:fence")
        .query(&mut server.client().get_connection().unwrap())
        .unwrap();
    assert!(fence.is_some());

    // Without the CA the certificate is refused: a Redis error, not a lock.
    let mut untrusted = redismutex(&url, &["lock", "tls", "--", "true"]);
    untrusted.env("SSL_CERT_FILE", path("server.key"));
    let refused = run(untrusted);
    assert_eq!(refused.status.code(), Some(69), "{refused:?}");
}
