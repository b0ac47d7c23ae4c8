//! Counting the commands a server ran, from `INFO commandstats`.

use std::collections::BTreeMap;

use redis::aio::MultiplexedConnection;

use crate::Result;

/// Calls per command from `INFO commandstats`, without INFO itself.
pub(crate) async fn commandstats(
    conn: &mut MultiplexedConnection,
) -> Result<BTreeMap<String, u64>> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    let mut calls = BTreeMap::new();
    for line in info.lines() {
        let Some((name, fields)) = line
            .strip_prefix("cmdstat_")
            .and_then(|rest| rest.split_once(':'))
        else {
            continue;
        };
        if name == "info" {
            continue;
        }
        let count = fields
            .split(',')
            .find_map(|field| field.strip_prefix("calls="))
            .ok_or_else(|| format!("no calls= in {line:?}"))?
            .parse()?;
        calls.insert(name.to_string(), count);
    }
    Ok(calls)
}

/// Calls made between two [`commandstats`] snapshots.
pub(crate) fn calls_between(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(name, &n)| (name.clone(), n - before.get(name).copied().unwrap_or(0)))
        .filter(|&(_, n)| n > 0)
        .collect()
}

/// All the calls in `calls`.
pub(crate) fn total(calls: &BTreeMap<String, u64>) -> u64 {
    calls.values().sum()
}

/// `name n, ...` of `calls`, each divided by `per`.
pub(crate) fn breakdown(calls: &BTreeMap<String, u64>, per: f64) -> String {
    let mut items: Vec<_> = calls.iter().collect();
    items.sort_by(|a, b| b.1.cmp(a.1));
    items
        .iter()
        .map(|(name, &n)| format!("{name} {:.2}", n as f64 / per))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Script invocations (the round trips of script-based clients) in `calls`.
pub(crate) fn evals(calls: &BTreeMap<String, u64>) -> u64 {
    ["evalsha", "eval", "evalsha_ro", "eval_ro"]
        .iter()
        .filter_map(|name| calls.get(*name))
        .sum()
}
