//! Throughput measured in phases: each workload runs for a short phase at a time,
//! interleaved with the others, and the median phase is its rate.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use super::workload::{Bench, Workload};
use crate::table::{chain, per_s, ratio, Row};
use crate::{BoxError, Result};

/// Phases per workload, each this long, interleaved with the baseline; a shorter phase
/// first warms up.
const ROUNDS: usize = 5;
const PHASE: Duration = Duration::from_millis(500);
const WARM_UP: Duration = Duration::from_millis(200);

/// Cycles per second of `tasks` tasks doing `workload` for `length`.
async fn phase(
    bench: &Arc<Bench>,
    workload: Workload,
    tasks: usize,
    length: Duration,
) -> Result<f64> {
    let start = Instant::now();
    let deadline = start + length;
    let mut set = JoinSet::new();
    for task in 0..tasks {
        let bench = Arc::clone(bench);
        set.spawn(async move {
            let mut conn = bench.conn.clone();
            let mut cycles = 0u64;
            while Instant::now() < deadline {
                workload.cycle(&bench, &mut conn, task).await?;
                cycles += 1;
            }
            Ok::<_, BoxError>(cycles)
        });
    }
    let mut cycles = 0;
    while let Some(done) = set.join_next().await {
        cycles += done??;
    }
    Ok(cycles as f64 / start.elapsed().as_secs_f64())
}

/// The median rate of each workload over [`ROUNDS`] interleaved phases; a workload
/// that fails is dropped from the later phases and gives its error instead.
pub(crate) async fn rates(
    bench: &Arc<Bench>,
    workloads: &[Workload],
    tasks: usize,
) -> Vec<Result<f64, String>> {
    let mut samples: Vec<Result<Vec<f64>, String>> = vec![Ok(Vec::new()); workloads.len()];
    for round in 0..=ROUNDS {
        for (&workload, samples) in workloads.iter().zip(&mut samples) {
            let Ok(rates) = samples else { continue };
            // Round 0 warms up and is not kept.
            let length = if round == 0 { WARM_UP } else { PHASE };
            match phase(bench, workload, tasks, length).await {
                Ok(rate) if round > 0 => rates.push(rate),
                Ok(_) => {}
                Err(err) => *samples = Err(format!("{workload:?}: {}", chain(&*err))),
            }
        }
    }
    samples
        .into_iter()
        .map(|samples| {
            let mut rates = samples?;
            rates.sort_by(f64::total_cmp);
            Ok(rates[rates.len() / 2])
        })
        .collect()
}

/// A throughput row: the library's (or floor's) rate next to the raw rate.
pub(crate) fn rate_row(
    id: &'static str,
    what: String,
    library: &Result<f64, String>,
    raw: &Result<f64, String>,
) -> Row {
    let show = |rate: &Result<f64, String>| match rate {
        Ok(rate) => per_s(*rate),
        Err(err) => format!("FAILED: {}", err.replace('|', "/").replace('\n', " ")),
    };
    let ratio = match (library, raw) {
        (Ok(library), Ok(raw)) => ratio(*library, *raw),
        _ => "—".into(),
    };
    Row::new(id, what, show(library), show(raw), ratio)
}

/// The floor's share that the library must reach in rows 2 and 3.
const FLOOR_TARGET: f64 = 0.95;

/// `row` with the ratio of `library` to the floor `fenced` (called `floor` in the text)
/// added to its ratio.
pub(crate) fn floor_row(
    mut row: Row,
    library: &Result<f64, String>,
    fenced: &Result<f64, String>,
    floor: &str,
) -> Row {
    if let (Ok(library), Ok(fenced)) = (library, fenced) {
        let share = library / fenced;
        let verdict = if share >= FLOOR_TARGET {
            "met"
        } else {
            "missed"
        };
        row.ratio = format!(
            "{} of raw; {share:.2} of {floor} (target ≥ {FLOOR_TARGET}: {verdict})",
            row.ratio
        );
    }
    row
}
