//! `redismutex status` run from the tests of `tests/cli`, on one server or on the nodes
//! of a quorum: its text as lines, and its JSON parsed.
#![cfg(feature = "cli")]

use serde_json::Value;

use crate::common::cli_run::{self, finish, Run};

/// `redismutex --url URL... status NAME EXTRA...` run to its end (at most `LIVENESS`),
/// which must exit 0 with nothing on stderr.
async fn status(urls: &[impl AsRef<str>], name: &str, extra: &[&str]) -> Run {
    let urls: Vec<&str> = urls.iter().map(AsRef::as_ref).collect();
    let mut args = vec!["status", name];
    args.extend_from_slice(extra);
    let out = finish(cli_run::spawn(&urls, &args)).await;
    assert_eq!((out.code, out.stderr.as_str()), (Some(0), ""), "{out:?}");
    out
}

/// `redismutex --url URL... status NAME EXTRA...` as lines.
pub(crate) async fn status_text(
    urls: &[impl AsRef<str>],
    name: &str,
    extra: &[&str],
) -> Vec<String> {
    let out = status(urls, name, extra).await;
    out.stdout.lines().map(str::to_owned).collect()
}

/// `redismutex --url URL... status NAME --json EXTRA...`, parsed.
pub(crate) async fn status_json(urls: &[impl AsRef<str>], name: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--json"];
    args.extend_from_slice(extra);
    let out = status(urls, name, &args).await;
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|err| panic!("{err}: {out:?}"))
}
