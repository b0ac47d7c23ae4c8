//! The harness's server binary (`tests/common/binaries.rs`): the version it reports is
//! parsed as the matrix needs it, and the server a test starts is the one `REDIS_SERVER`
//! names (so a matrix run over `../shared/servers/` tests each version, not `PATH`'s).
//! The scripts the tests run or look for (`tests/common/scripts.rs`) are assembled as the
//! crate sends them.

use std::time::Duration;

use crate::common::binaries::{redis_cli, redis_server, server_version, ServerVersion};
use crate::common::{self, raw, scripts, RedisServer};
use redismutex::Semaphore;

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

/// A server is ready only when the process answering on its port is the one started: a
/// `redis-server` started where another server of this test answers (its bind fails and
/// it exits) is refused, though the port answers PING, with a password too. And no
/// `RedisServer` starts on a port another claims, not even while that one is stopped for
/// a restart, so the restart finds its port free.
#[test]
fn a_server_answering_for_another_process_is_refused() {
    let password: &[&str] = &["--requirepass", "s3cret"];
    for extra in [&[][..], password] {
        let other = RedisServer::start_with(extra);
        let dir = tempfile::tempdir().unwrap();
        let taken = common::server::spawn_redis(other.port(), dir.path(), extra);
        let err = taken.expect_err("started where another server answers");
        assert!(err.contains("exited with"), "{err}");
        println!("refused: {}", err.lines().next().unwrap_or_default());
    }
    let mut stopped = RedisServer::start();
    stopped.stop();
    let err = RedisServer::try_start_on(stopped.port(), &[]).expect_err("port claimed");
    assert!(err.contains("claimed"), "{err}");
    stopped.restart();
}

/// The rule `common::scripts` assembles scripts by (after `base.lua`, and after
/// `shared.lua` for the scripts that take a lock or a permit or raise a fence counter)
/// is the crate's: a script uses `shared.lua`'s functions exactly when the rule sends it
/// after `shared.lua`.
#[test]
fn scripts_sent_after_shared_lua_are_those_that_use_it() {
    let shared = scripts::file(scripts::SHARED);
    let functions: Vec<String> = shared
        .lines()
        .filter_map(|line| line.strip_prefix("local function "))
        .filter_map(|rest| rest.split('(').next())
        .map(|name| format!("{name}("))
        .collect();
    assert!(functions.len() >= 5, "{functions:?}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != scripts::BASE && name != scripts::SHARED)
        .collect();
    names.sort();
    assert!(names.len() >= 14, "{names:?}");
    for name in &names {
        let uses_shared = functions.iter().any(|f| scripts::file(name).contains(f));
        assert_eq!(
            uses_shared,
            scripts::WITH_SHARED.contains(&name.as_str()),
            "{name}"
        );
        let source = scripts::source(name);
        assert!(source.starts_with("-- base.lua:"), "{name}");
        assert_eq!(source.contains("\n-- shared.lua:"), uses_shared, "{name}");
        assert!(source.ends_with(&scripts::file(name)), "{name}");
    }
}

/// What `common::scripts` assembles is what the crate sends: after the crate ran a script
/// of each kind (with and without `shared.lua`), the server's script cache holds the SHA1
/// the helper computes for each, and none of the other ways to assemble it.
#[tokio::test]
async fn scripts_assembled_by_the_helper_are_the_ones_the_crate_sends() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "assembled", Duration::from_secs(30));
    let reader = mx.read().await.unwrap();
    assert!(mx.try_write().await.unwrap().is_none(), "a reader holds it");
    let mut pipe = redis::pipe();
    pipe.get("data");
    let _: (Option<String>,) = reader.exec(&pipe).await.unwrap();
    assert!(reader.unlock().await.unwrap());
    let writer = mx.write().await.unwrap();
    assert!(writer.downgrade().await.unwrap().unlock().await.unwrap());
    let _ = mx.inspect("").await.unwrap();
    assert!(!mx.force_unlock("").await.unwrap());
    let permits = Semaphore::builder(conn.clone(), "permits", 2)
        .build()
        .unwrap();
    assert!(permits.acquire().await.unwrap().unlock().await.unwrap());

    let ran = [
        "rlock.lua",
        "lock.lua",
        "semaphore.lua",
        "exec.lua",
        "unlock.lua",
        "downgrade.lua",
        "inspect.lua",
        "force_unlock.lua",
    ];
    let mut cache = conn.clone();
    for name in ran {
        assert!(
            scripts::cached(&mut cache, name).await,
            "{name} as the helper assembles it"
        );
        // Neither the bare file nor the other assembly was sent.
        let base = scripts::file(scripts::BASE);
        let shared = scripts::file(scripts::SHARED);
        let file = scripts::file(name);
        for other in [
            file.clone(),
            format!("{base}\n{file}"),
            format!("{base}\n{shared}\n{file}"),
        ] {
            if other == scripts::source(name) {
                continue;
            }
            let sha = redis::Script::new(&other).get_hash().to_owned();
            let exists: Vec<i64> = raw::cmd(&conn, "SCRIPT", &["EXISTS", &sha]).await;
            assert_eq!(exists, [0], "{name} assembled otherwise");
        }
    }
    assert!(
        !scripts::cached(&mut cache, "proclaim.lua").await,
        "no election ran"
    );
}
