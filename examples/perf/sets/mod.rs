//! Rows 16 (`-- sets`) and 17 (`-- set-limit`): sets of keys taken by `lock_all`.
//!
//! Row 16 measures, in the same run and the same interleaved phases as rows 1–5, one
//! task's cycle `lock_all().write(n keys).await` + `unlock()` next to the same `n` keys
//! of the same mutex taken one by one (`write().key(k)` in order, then `n` unlocks in
//! order) and next to the raw multi-key cycle (one all-or-none `SET PX` script and one
//! compare-and-delete script, `benches/raw.rs`), for each of [`SIZES`]. Row 17
//! (`limit.rs`) sends `lua/lock_all.lua` itself for sets far beyond
//! [`MAX_SET_KEYS`](redismutex::MAX_SET_KEYS) and reports how long one call holds the
//! server.

mod limit;

use std::sync::Arc;

use redismutex::RwMutex;

use crate::server::RedisServer;
use crate::table::{per_s, Row};
use crate::throughput::{rates, Bench, Workload};
use crate::Result;
pub(crate) use limit::{rows as limit_rows, SIZES as LIMIT_SIZES};

/// The numbers of keys row 16 measures.
const SIZES: [usize; 4] = [1, 2, 8, 32];

/// Row 16 on `server`: one row per size of [`SIZES`].
pub(crate) async fn rows(server: &RedisServer) -> Result<Vec<Row>> {
    let conn = server.conn().await;
    let bench = Arc::new(Bench {
        mx: RwMutex::new(conn.clone(), "perf"),
        conn,
        nodes: Vec::new(),
        quorum: None,
    });
    let mut rows = Vec::new();
    for (n, id) in SIZES.into_iter().zip(["16a", "16b", "16c", "16d"]) {
        eprintln!("row {id}: sets of {n} keys ...");
        let measured = rates(
            &bench,
            &[
                Workload::RawSet(n),
                Workload::Set(n),
                Workload::Sequential(n),
            ],
            1,
        )
        .await;
        rows.push(row(id, n, &measured));
    }
    Ok(rows)
}

/// The row of `n` keys from the rates of the raw set, the set and the sequential cycle.
fn row(id: &'static str, n: usize, measured: &[Result<f64, String>]) -> Row {
    let what = format!(
        "{n} keys, 1 task: `lock_all().write(keys)` + `unlock()`, cycles/s (µs a cycle); \
         raw: one all-or-none SET PX script + one compare-delete script; beside it the \
         same keys by {n} `write().key(k)` in order + {n} unlocks"
    );
    let cell = |rate: &Result<f64, String>| match rate {
        Ok(rate) => format!("{} ({:.0} µs)", per_s(*rate), 1e6 / rate),
        Err(err) => format!("FAILED: {}", err.replace('|', "/").replace('\n', " ")),
    };
    let [raw, set, sequential] = measured else {
        unreachable!("one rate per workload")
    };
    let ratio = match (raw, set, sequential) {
        (Ok(raw), Ok(set), Ok(sequential)) => format!(
            "{:.2} of raw; set/sequential time a cycle {:.2} (sequential: {})",
            set / raw,
            sequential / set,
            cell(&Ok(*sequential))
        ),
        _ => format!("sequential: {}", cell(sequential)),
    };
    Row::new(id, what, cell(set), cell(raw), ratio)
}
