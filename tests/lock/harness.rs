//! The harness's server binary (`tests/common/binaries.rs`): the version it reports is
//! parsed as the matrix needs it, and the server a test starts is the one `REDIS_SERVER`
//! names (so a matrix run over `../shared/servers/` tests each version, not `PATH`'s).

use crate::common::binaries::{redis_cli, redis_server, server_version, ServerVersion};
use crate::common::{raw, RedisServer};

#[test]
fn version_lines_parse() {
    let redis = "Redis server v=6.2.16 sha=00000000:0 malloc=libc bits=64 build=e77f45f6";
    let parsed = ServerVersion::parse(redis).unwrap();
    assert_eq!(parsed.triple(), (6, 2, 16));
    assert!(!parsed.valkey);
    assert!(parsed.at_least(6, 2) && !parsed.at_least(7, 0));
    let milestone = "Redis server v=7.9.224 sha=00000000:1 malloc=libc bits=64 build=91f0";
    assert!(ServerVersion::parse(milestone).unwrap().at_least(7, 4));
    let valkey = "Valkey server v=8.0.1 sha=00000000:1 malloc=libc bits=64 build=6d2f56e3";
    let parsed = ServerVersion::parse(valkey).unwrap();
    assert_eq!((parsed.triple(), parsed.valkey), ((8, 0, 1), true));
    assert!(parsed.at_least(7, 2) && !parsed.at_least(7, 4));
    assert_eq!(parsed.to_string(), "Valkey 8.0.1");
    assert_eq!(ServerVersion::parse("no version here"), None);
}

/// `INFO server` of the started server agrees with `--version` of the binary the harness
/// runs: Redis's `redis_version`, or Valkey's `valkey_version`.
#[tokio::test]
async fn the_server_started_is_the_one_redis_server_names() {
    let version = server_version();
    println!(
        "REDIS_SERVER: {:?} ({version}); redis-cli: {:?}",
        redis_server(),
        redis_cli()
    );
    let server = RedisServer::start();
    let info: String = raw::cmd(&server.conn().await, "INFO", &["server"]).await;
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
            .map(String::from)
    };
    let reported = if version.valkey {
        field("valkey_version")
    } else {
        field("redis_version")
    };
    let expected = format!("{}.{}.{}", version.major, version.minor, version.patch);
    assert_eq!(reported.as_deref(), Some(expected.as_str()), "{info}");
}
