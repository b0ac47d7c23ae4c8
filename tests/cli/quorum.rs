//! The `redismutex` command with several `--url`s (quorum mode), run as a real process
//! against three throwaway `redis-server`s: `status` side by side (a table with a column
//! per node, and JSON) on a free lock, a lock held in quorum mode, a minority holder,
//! readers, a node that differs (a semaphore with a real permit where the others hold
//! the lock), a node killed and all nodes killed; `lock` running a command while a majority of the nodes holds the
//! lock, excluding a second run, going on without a node that is down, refusing when a
//! majority is down, and leaving no lock keys behind; a server named twice.
#![cfg(feature = "cli")]

use std::path::Path;

use crate::common::cli_run::{self, finish, Run, BIN};
use crate::common::{eventually, raw, RedisServer};
use crate::run::{status_json, status_text};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use redis::aio::MultiplexedConnection;
use serde_json::{json, Value};
use tokio::process::{Child, Command};

/// Three throwaway servers and a connection to each, for raw checks.
struct Nodes {
    servers: Vec<RedisServer>,
    conns: Vec<MultiplexedConnection>,
}

impl Nodes {
    async fn start() -> Self {
        let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
        let mut conns = Vec::new();
        for server in &servers {
            conns.push(server.conn().await);
        }
        Self { servers, conns }
    }

    fn urls(&self) -> Vec<String> {
        self.servers.iter().map(RedisServer::url).collect()
    }

    /// `redis://127.0.0.1:<port>` of node `i` (from 0), as the command names it.
    fn shown(&self, i: usize) -> String {
        format!("redis://127.0.0.1:{}", self.servers[i].port())
    }

    /// The value of `key` on each node.
    async fn get(&self, key: &str) -> Vec<Option<String>> {
        let mut values = Vec::new();
        for conn in &self.conns {
            values.push(raw::get(conn, key).await);
        }
        values
    }

    /// Every key of each node, sorted.
    async fn keys(&self) -> Vec<Vec<String>> {
        let mut all = Vec::new();
        for conn in &self.conns {
            let mut keys: Vec<String> = raw::cmd(conn, "KEYS", &["*"]).await;
            keys.sort();
            all.push(keys);
        }
        all
    }
}

/// `redismutex --url URL... ARGS...`, started with its output piped; killed if dropped.
fn spawn(urls: &[String], args: &[&str]) -> Child {
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    cli_run::spawn(&urls, args)
}

async fn run(urls: &[String], args: &[&str]) -> Run {
    finish(spawn(urls, args)).await
}

/// Starts `lock jobs EXTRA...` without a command on `urls` and reads its first line:
/// the lock is held from then on.
async fn hold(urls: &[String], extra: &[&str]) -> (Child, String) {
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let (child, key, id) = cli_run::hold(&urls, extra).await;
    assert_eq!(key, "jobs");
    (child, id)
}

/// Ends a hold with SIGTERM; it must exit 0.
async fn release(child: Child) {
    let pid = i32::try_from(child.id().expect("still running")).unwrap();
    kill(Pid::from_raw(pid), Signal::SIGTERM).expect("signal redismutex");
    let out = finish(child).await;
    assert_eq!(out.code, Some(0), "{out:?}");
}

/// The cell of row `label` in the column of node `node` (from 1) of the side-by-side
/// table of `status` text, a line per entry; the column is found by its header,
/// `node <node> URL`, in the first line.
fn cell(text: &[String], label: &str, node: usize) -> Vec<String> {
    let header = &text[0];
    let start = header
        .find(&format!("node {node} "))
        .unwrap_or_else(|| panic!("no column for node {node} in {text:?}"));
    let end = header.find(&format!("node {} ", node + 1));
    let row = text
        .iter()
        .position(|line| {
            line.strip_prefix(label)
                .is_some_and(|rest| rest.starts_with("  "))
        })
        .unwrap_or_else(|| panic!("no row {label:?} in {text:?}"));
    let lines = std::iter::once(&text[row]).chain(
        text[row + 1..]
            .iter()
            .take_while(|line| line.starts_with(' ')),
    );
    lines
        .map(|line| {
            let end = end.unwrap_or(line.len()).min(line.len());
            line.get(start.min(end)..end)
                .unwrap_or("")
                .trim()
                .to_owned()
        })
        .filter(|part| !part.is_empty())
        .collect()
}

/// The header of the side-by-side table: `node I URL` for each node, in order.
fn assert_header(text: &[String], nodes: &Nodes) {
    let columns: Vec<&str> = text[0]
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let expected: Vec<String> = (0..3)
        .map(|i| format!("node {} {}", i + 1, nodes.shown(i)))
        .collect();
    assert_eq!(columns, expected, "{text:?}");
}

/// After a run: no lock key and no intent on any node (the fencing counter stays, as
/// with one server, and so does the last token each node granted).
async fn assert_no_lock_keys(nodes: &Nodes) {
    for (i, keys) in nodes.keys().await.into_iter().enumerate() {
        assert!(
            keys.iter()
                .all(|key| key == "jobs:fence" || key == "jobs:fence-granted"),
            "node {} kept {keys:?}",
            i + 1
        );
    }
}

#[tokio::test]
async fn status_of_a_free_lock_shows_every_node_and_the_quorum() {
    let nodes = Nodes::start().await;
    let urls = nodes.urls();
    let text = status_text(&urls, "jobs", &[]).await;
    assert_header(&text, &nodes);
    let labels = [
        "state",
        "writer",
        "readers",
        "holders",
        "described",
        "in use",
        "queue",
        "intent",
        "last fencing token",
        "PTTL",
    ];
    assert_eq!(text.len(), 1 + labels.len() + 1, "{text:?}");
    for (line, label) in text[1..].iter().zip(labels) {
        assert!(line.starts_with(label), "{label}: {text:?}");
    }
    for node in 1..=3 {
        assert_eq!(cell(&text, "state", node), ["free"], "{text:?}");
        for label in &labels[1..] {
            assert_eq!(cell(&text, label, node), ["-"], "{label}: {text:?}");
        }
    }
    assert_eq!(text.last().unwrap(), "quorum: free on 3 of 3 nodes");

    let status = status_json(&urls, "jobs", &[]).await;
    assert_eq!(status["key"], "jobs");
    let views = status["nodes"].as_array().expect("a nodes list");
    assert_eq!(views.len(), 3, "{status}");
    for (i, view) in views.iter().enumerate() {
        assert_eq!(view["node"], i + 1, "{view}");
        assert_eq!(view["url"], json!(nodes.shown(i)), "{view}");
        assert_eq!(view["reachable"], true, "{view}");
        assert_eq!(view["error"], Value::Null, "{view}");
        assert_eq!(view["state"], "free", "{view}");
        assert_eq!(view["writer"], Value::Null, "{view}");
    }
    assert_eq!(
        status["quorum"],
        json!({
            "state": "free", "writer": null, "readers": [], "on": 3,
            "answered": 3, "majority": 2, "nodes": 3,
        })
    );
    assert_eq!(
        nodes.keys().await,
        vec![Vec::<String>::new(); 3],
        "read only"
    );
}

#[tokio::test]
async fn status_of_a_lock_held_in_quorum_mode() {
    let nodes = Nodes::start().await;
    let urls = nodes.urls();
    let (holder, id) = hold(&urls, &["--ttl", "30s"]).await;
    let held = nodes.get("jobs").await;
    assert!(
        held.iter().filter(|v| v.as_deref() == Some(&*id)).count() >= 2,
        "the holder's id on a majority: {held:?}"
    );

    let text = status_text(&urls, "jobs", &[]).await;
    assert_eq!(text.len(), 1 + 10 + 1, "{text:?}");
    let on = held.iter().filter(|v| v.as_deref() == Some(&*id)).count();
    assert_eq!(
        text.last().unwrap(),
        &format!("quorum: write held by {id} on {on} of 3 nodes")
    );
    for (i, value) in held.iter().enumerate() {
        let (state, writer) = match value {
            Some(_) => ("write", id.as_str()),
            None => ("free", "-"),
        };
        assert_eq!(cell(&text, "state", i + 1), [state], "{text:?}");
        assert_eq!(cell(&text, "writer", i + 1), [writer], "{text:?}");
        let described = &cell(&text, "described", i + 1)[0];
        assert!(
            value.is_none()
                || described.starts_with(&format!("{id} ")) && described.contains(" redismutex"),
            "each node names the holder's host, pid and program: {text:?}"
        );
        let pttl = &cell(&text, "PTTL", i + 1)[0];
        assert!(
            (value.is_some() && pttl.ends_with(" ms")) || pttl == "-",
            "{text:?}"
        );
    }

    let status = status_json(&urls, "jobs", &[]).await;
    assert_eq!(status["quorum"]["state"], "write", "{status}");
    assert_eq!(status["quorum"]["writer"], json!(id), "{status}");
    assert_eq!(status["quorum"]["on"], on, "{status}");
    for (i, value) in held.iter().enumerate() {
        if value.as_deref() == Some(&*id) {
            assert_eq!(status["nodes"][i]["type"], "string", "{status}");
            assert_eq!(status["nodes"][i]["writer"], json!(id), "{status}");
        }
    }

    release(holder).await;
    assert_eq!(
        status_text(&urls, "jobs", &[]).await.last().unwrap(),
        "quorum: free on 3 of 3 nodes"
    );
    assert_no_lock_keys(&nodes).await;
}

/// A writer on one node of three (a lock being taken, or a stale one) holds nothing;
/// on two it holds the lock. Set by hand, so this checks the verdict alone.
#[tokio::test]
async fn a_writer_on_a_minority_is_no_quorum_and_on_a_majority_is() {
    let nodes = Nodes::start().await;
    let urls = nodes.urls();
    let set = |i: usize| {
        let conn = nodes.conns[i].clone();
        async move {
            let _: () = raw::cmd(&conn, "SET", &["jobs", "stray", "PX", "30000"]).await;
        }
    };
    set(1).await;
    let text = status_text(&urls, "jobs", &[]).await;
    assert_eq!(cell(&text, "state", 2), ["write"], "{text:?}");
    assert_eq!(cell(&text, "writer", 2), ["stray"], "{text:?}");
    assert_eq!(cell(&text, "writer", 1), ["-"], "{text:?}");
    assert_eq!(text.last().unwrap(), "quorum: free on 2 of 3 nodes");

    set(2).await;
    let text = status_text(&urls, "jobs", &[]).await;
    assert_eq!(
        text.last().unwrap(),
        "quorum: write held by stray on 2 of 3 nodes"
    );
    let lock = run(&urls, &["lock", "jobs", "--no-wait", "--", "true"]).await;
    assert_eq!(lock.code, Some(75), "busy on a majority: {lock:?}");
}

#[tokio::test]
async fn readers_in_quorum_mode_are_listed_with_their_nodes() {
    let nodes = Nodes::start().await;
    let urls = nodes.urls();
    let (a, id_a) = hold(&urls, &["--read", "--ttl", "30s"]).await;
    let (b, id_b) = hold(&urls, &["--read", "--ttl", "30s"]).await;
    let mut ids = [id_a, id_b];
    ids.sort();

    let status = status_json(&urls, "jobs", &[]).await;
    let quorum = &status["quorum"];
    assert_eq!(quorum["state"], "read", "{status}");
    let readers: Vec<&str> = quorum["readers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|holder| holder["id"].as_str().unwrap())
        .collect();
    assert_eq!(readers, ids, "{status}");
    let text = status_text(&urls, "jobs", &[]).await;
    assert!(
        text.iter()
            .any(|line| line.starts_with("quorum: read held by 2 reader(s) on ")),
        "{text:?}"
    );

    let writer = run(&urls, &["lock", "jobs", "--no-wait", "--", "true"]).await;
    assert_eq!(
        writer.code,
        Some(75),
        "readers keep the writer out: {writer:?}"
    );
    release(a).await;
    release(b).await;
    assert_no_lock_keys(&nodes).await;
}

/// One node differs: it holds a semaphore with a real permit under the lock's name, so
/// the lock is taken on the other two only. Side by side, each column shows its node:
/// the writer on nodes 1 and 2, the permit and its deadline on node 3; the verdict is
/// the majority's.
#[tokio::test]
async fn status_side_by_side_shows_the_node_that_differs() {
    let nodes = Nodes::start().await;
    let urls = nodes.urls();
    let semaphore = redismutex::Semaphore::builder(nodes.conns[2].clone(), "jobs", 2)
        .ttl(std::time::Duration::from_secs(30))
        .build()
        .unwrap();
    let permit = semaphore.acquire().await.unwrap();
    let (holder, id) = hold(&urls, &["--ttl", "30s"]).await;
    for conn in &nodes.conns[..2] {
        assert_eq!(raw::get(conn, "jobs").await, Some(id.clone()));
    }
    // The acquire's second round raises every node's fence counter to its token, the
    // third node's (held by the semaphore) after the majority's answers: read the
    // counters once it has.
    assert!(
        eventually(|| async {
            let tokens = nodes.get("jobs:fence").await;
            tokens
                .iter()
                .all(|token| token.is_some() && *token == tokens[0])
        })
        .await,
        "the fence counters never agreed: {:?}",
        nodes.get("jobs:fence").await
    );
    let tokens = nodes.get("jobs:fence").await;

    let out = run(&urls, &["status", "jobs", "--permits", "2"]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let text: Vec<String> = out.stdout.lines().map(str::to_owned).collect();
    assert_header(&text, &nodes);
    assert_eq!(
        (1..=3).map(|n| cell(&text, "state", n)).collect::<Vec<_>>(),
        [["write"], ["write"], ["semaphore"]],
        "{text:?}"
    );
    assert_eq!(
        (1..=3)
            .map(|n| cell(&text, "writer", n))
            .collect::<Vec<_>>(),
        [[id.as_str()], [id.as_str()], ["-"]],
        "{text:?}"
    );
    assert_eq!(cell(&text, "holders", 1), ["-"], "{text:?}");
    let holders = cell(&text, "holders", 3);
    assert_eq!(holders.len(), 1, "{text:?}");
    let left: i64 = holders[0]
        .strip_prefix(&format!("{} (", permit.id()))
        .and_then(|rest| rest.strip_suffix(" ms)"))
        .unwrap_or_else(|| panic!("{holders:?}"))
        .parse()
        .unwrap();
    assert!((1..=30_000).contains(&left), "{holders:?}");
    assert_eq!(cell(&text, "in use", 3), ["1 of 2"], "{text:?}");
    assert_eq!(cell(&text, "in use", 1), ["-"], "{text:?}");
    for (node, token) in (1..=3).zip(&tokens) {
        let token = token.as_deref().expect("a fence on every node");
        assert_eq!(cell(&text, "last fencing token", node), [token], "{text:?}");
        assert!(cell(&text, "PTTL", node)[0].ends_with(" ms"), "{text:?}");
    }
    assert_eq!(
        text.last().unwrap(),
        &format!("quorum: write held by {id} on 2 of 3 nodes")
    );

    let status = status_json(&urls, "jobs", &[]).await;
    let third = &status["nodes"][2];
    assert_eq!(third["state"], "semaphore", "{status}");
    assert_eq!(third["type"], "zset", "{status}");
    assert_eq!(third["semaphore"]["in_use"], 1, "{status}");
    assert_eq!(
        third["semaphore"]["holders"][0]["id"],
        permit.id(),
        "{status}"
    );
    assert_eq!(status["nodes"][0]["semaphore"], Value::Null, "{status}");
    assert_eq!(status["nodes"][0]["writer"], json!(id), "{status}");
    assert_eq!(
        status["nodes"][0]["last_fencing_token"].to_string(),
        tokens[0].clone().unwrap(),
        "{status}"
    );
    assert_eq!(status["quorum"]["state"], "write", "{status}");
    assert_eq!(status["quorum"]["on"], 2, "{status}");

    release(holder).await;
    assert!(permit.unlock().await.unwrap(), "status changed nothing");
}

#[tokio::test]
async fn status_with_a_node_killed_shows_it_unreachable_and_the_rest() {
    let mut nodes = Nodes::start().await;
    let urls = nodes.urls();
    let (holder, id) = hold(&urls, &["--ttl", "30s"]).await;
    // The holder may have the lock on two nodes only (an acquire stops at a majority):
    // kill a node it does not hold, if any, so that it still holds on the other two.
    let held = nodes.get("jobs").await;
    let down = held
        .iter()
        .position(|value| value.as_deref() != Some(&*id))
        .unwrap_or(1);
    let up: Vec<usize> = (0..3).filter(|&i| i != down).collect();
    nodes.servers[down].stop();

    let text = status_text(&urls, "jobs", &[]).await;
    assert_header(&text, &nodes);
    assert_eq!(cell(&text, "state", down + 1), ["unreachable"], "{text:?}");
    assert_eq!(cell(&text, "writer", down + 1), ["-"], "{text:?}");
    let error = cell(&text, "error", down + 1);
    assert!(error.len() == 1 && error[0] != "-", "{text:?}");
    for &i in &up {
        assert_eq!(cell(&text, "state", i + 1), ["write"], "{text:?}");
        assert_eq!(cell(&text, "writer", i + 1), [id.as_str()], "{text:?}");
        assert_eq!(cell(&text, "error", i + 1), ["-"], "{text:?}");
    }
    assert_eq!(
        text.last().unwrap(),
        &format!("quorum: write held by {id} on 2 of 3 nodes")
    );

    let status = status_json(&urls, "jobs", &[]).await;
    let view = &status["nodes"][down];
    assert_eq!(view["node"], down + 1, "{status}");
    assert_eq!(view["reachable"], false, "{status}");
    assert!(
        view["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{status}"
    );
    assert!(view.get("state").is_none(), "no view from it: {status}");
    assert_eq!(status["quorum"]["answered"], 2, "{status}");
    assert_eq!(status["quorum"]["writer"], json!(id), "{status}");

    // With two of three down, status still answers but knows no majority.
    nodes.servers[up[0]].stop();
    assert_eq!(
        status_text(&urls, "jobs", &[]).await.last().unwrap(),
        "quorum: unknown: 1 of 3 nodes answered, 2 needed"
    );
    // With none left, it fails, naming each node on stderr.
    nodes.servers[up[1]].stop();
    let out = run(&urls, &["status", "jobs"]).await;
    assert_eq!(out.code, Some(69), "{out:?}");
    assert_eq!(out.stdout, "", "{out:?}");
    assert_eq!(out.stderr.lines().count(), 3, "{out:?}");
    for i in 0..3 {
        assert!(out.stderr.contains(&nodes.shown(i)), "{out:?}");
    }
    drop(holder);
}

#[tokio::test]
async fn passwords_in_node_urls_are_used_and_never_printed() {
    let secured = RedisServer::start_with(&["--requirepass", "s3cret-pw"]);
    let others: Vec<RedisServer> = (0..2).map(|_| RedisServer::start()).collect();
    let port = secured.port();
    let mut urls = vec![format!("redis://:s3cret-pw@127.0.0.1:{port}/")];
    urls.extend(others.iter().map(RedisServer::url));
    let status = run(&urls, &["status", "jobs"]).await;
    assert_eq!(status.code, Some(0), "{status:?}");
    let text: Vec<String> = status.stdout.lines().map(str::to_owned).collect();
    assert!(
        text[0]
            .trim_start()
            .starts_with(&format!("node 1 redis://127.0.0.1:{port}  ")),
        "{status:?}"
    );
    assert_eq!(cell(&text, "state", 1), ["free"], "{status:?}");

    urls[0] = format!("redis://:wrong-pw@127.0.0.1:{port}/");
    for (args, down) in [
        (&["status", "jobs"][..], "  unreachable"),
        (&["status", "jobs", "--json"], r#""reachable":false"#),
    ] {
        let out = run(&urls, args).await;
        assert_eq!(out.code, Some(0), "two nodes answer: {out:?}");
        assert!(out.stdout.contains(down), "{out:?}");
        assert!(!out.stdout.contains("wrong-pw"), "leaked: {out:?}");
        assert!(!out.stderr.contains("wrong-pw"), "leaked: {out:?}");
    }
    let lock = run(&urls, &["lock", "jobs", "--", "true"]).await;
    assert_eq!(lock.code, Some(0), "two of three nodes suffice: {lock:?}");
    assert!(
        lock.stderr
            .contains(&format!("node 1 redis://127.0.0.1:{port} ")),
        "{lock:?}"
    );
    assert!(!lock.stderr.contains("wrong-pw"), "leaked: {lock:?}");
}

/// The command runs while the lock is on a majority of the nodes, a second run is kept
/// out, and nothing of the lock is left once the command is done.
#[tokio::test]
async fn lock_runs_the_command_while_a_majority_holds_it() {
    let nodes = Nodes::start().await;
    let urls = nodes.urls();
    let dir = tempfile::tempdir().unwrap();
    let (id_file, done) = (dir.path().join("id"), dir.path().join("done"));
    let script = r#"echo "$REDISMUTEX_KEY $REDISMUTEX_ID" > "$1.tmp"; mv "$1.tmp" "$1"
        while [ ! -e "$2" ]; do sleep 0.02; done; exit 3"#;
    let child = spawn(
        &urls,
        &[
            "lock",
            "jobs",
            "--",
            "sh",
            "-c",
            script,
            "sh",
            path(&id_file),
            path(&done),
        ],
    );
    assert!(
        eventually(|| async { id_file.exists() }).await,
        "the command never ran"
    );
    let line = std::fs::read_to_string(&id_file).unwrap();
    let (key, id) = line.trim().split_once(' ').expect("<key> <id>");
    assert_eq!(key, "jobs");
    let held = nodes.get("jobs").await;
    assert!(
        held.iter().filter(|v| v.as_deref() == Some(id)).count() >= 2,
        "while the command runs, its id is on a majority: {held:?}"
    );
    let second = run(&urls, &["lock", "jobs", "--no-wait", "--", "true"]).await;
    assert_eq!(second.code, Some(75), "kept out: {second:?}");
    let reader = run(
        &urls,
        &["lock", "jobs", "--read", "--no-wait", "--", "true"],
    )
    .await;
    assert_eq!(reader.code, Some(75), "kept out: {reader:?}");

    std::fs::write(&done, "").unwrap();
    let out = finish(child).await;
    assert_eq!(out.code, Some(3), "the command's exit code: {out:?}");
    assert_no_lock_keys(&nodes).await;
    let again = run(&urls, &["lock", "jobs", "--no-wait", "--", "true"]).await;
    assert_eq!(again.code, Some(0), "free again: {again:?}");
}

#[tokio::test]
async fn lock_goes_on_without_a_node_that_is_down() {
    let mut nodes = Nodes::start().await;
    let urls = nodes.urls();
    nodes.servers[2].stop();
    let out = run(
        &urls,
        &["lock", "jobs", "--", "sh", "-c", "echo $REDISMUTEX_KEY"],
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout.trim(), "jobs");
    assert!(
        out.stderr
            .contains(&format!("node 3 {} is unreachable", nodes.shown(2))),
        "{out:?}"
    );
    for conn in &nodes.conns[..2] {
        assert!(!raw::exists(conn, "jobs").await, "released");
    }
}

/// A node down when `lock` starts is reconnected once it is back: when another node then
/// fails, the lock's refresh takes the lock on it, and the lock is kept on a majority.
#[tokio::test]
async fn a_node_down_at_the_start_keeps_the_lock_once_back_when_another_fails() {
    let mut nodes = Nodes::start().await;
    let urls = nodes.urls();
    nodes.servers[2].stop();
    let dir = tempfile::tempdir().unwrap();
    let (id_file, done) = (dir.path().join("id"), dir.path().join("done"));
    let script = r#"echo "$REDISMUTEX_ID" > "$1.tmp"; mv "$1.tmp" "$1"
        while [ ! -e "$2" ]; do sleep 0.02; done"#;
    let child = spawn(
        &urls,
        &[
            "lock",
            "jobs",
            "--ttl",
            "2s",
            "--",
            "sh",
            "-c",
            script,
            "sh",
            path(&id_file),
            path(&done),
        ],
    );
    assert!(eventually(|| async { id_file.exists() }).await, "never ran");
    let id = std::fs::read_to_string(&id_file).unwrap().trim().to_owned();

    nodes.servers[2].restart();
    nodes.servers[1].stop();
    let third = nodes.servers[2].conn().await;
    let first = nodes.conns[0].clone();
    let on_third = eventually(|| {
        let (third, id) = (third.clone(), id.clone());
        async move { raw::get(&third, "jobs").await.as_deref() == Some(&*id) }
    })
    .await;
    assert!(on_third, "the refresh never took the lock on the node back");
    assert_eq!(
        raw::get(&first, "jobs").await,
        Some(id.clone()),
        "still held"
    );

    std::fs::write(&done, "").unwrap();
    let out = finish(child).await;
    assert_eq!(out.code, Some(0), "the lock was kept: {out:?}");
    for conn in [&first, &third] {
        let keys: Vec<String> = raw::cmd(conn, "KEYS", &["*"]).await;
        assert!(
            (keys.iter()).all(|key| key == "jobs:fence" || key == "jobs:fence-granted"),
            "{keys:?}"
        );
    }
}

#[tokio::test]
async fn lock_with_a_majority_down_gives_69_and_runs_nothing() {
    let mut nodes = Nodes::start().await;
    let urls = nodes.urls();
    nodes.servers[0].stop();
    nodes.servers[1].stop();
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let out = run(&urls, &["lock", "jobs", "--", "touch", path(&ran)]).await;
    assert_eq!(out.code, Some(69), "{out:?}");
    assert!(!ran.exists(), "the command must not run");
    assert!(
        out.stderr
            .lines()
            .last()
            .is_some_and(|line| line.contains("1 of 3 nodes reachable, 2 needed")
                && line.contains(r#""jobs""#)),
        "{out:?}"
    );
    assert!(!raw::exists(&nodes.conns[2], "jobs").await);
}

/// `--url`s before and after the subcommand add up; one server named twice is refused
/// before anything is sent.
#[tokio::test]
async fn urls_add_up_and_a_server_named_twice_is_refused() {
    let nodes = Nodes::start().await;
    let urls = nodes.urls();
    let out = Command::new(BIN)
        .args(["--url", &urls[0], "status", "jobs", "--url", &urls[1]])
        .args(["--url", &urls[2]])
        .env_remove("REDIS_URL")
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        text.ends_with("quorum: free on 3 of 3 nodes\n"),
        "three nodes: {text}"
    );

    let twice = [urls[0].clone(), urls[1].clone(), format!("{}0", urls[0])];
    for args in [&["status", "jobs"][..], &["lock", "jobs", "--", "true"]] {
        let out = run(&twice, args).await;
        assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
        assert!(out.stderr.contains("same server"), "{out:?}");
    }
    assert_eq!(nodes.keys().await, vec![Vec::<String>::new(); 3]);
}

fn path(file: &Path) -> &str {
    file.to_str().expect("utf-8 temp path")
}
