//! What the feature `metrics` costs a lock cycle: one uncontended `write()` → `unlock()`
//! against a harness-started redis-server, with no recorder installed and with a
//! Prometheus recorder installed, next to the raw redis-rs write cycle of `raw.rs` (`SET
//! NX PX`, then the compare-and-delete script by EVALSHA). The mutex has
//! `name_label(true)`, so each record carries the `name` label too.
//!
//! Everything runs on one current-thread runtime, the crate's tasks included, so that a
//! recorder installed for the thread (`metrics::set_default_local_recorder`) sees every
//! record and both cases alternate in one process. Two parts:
//!
//! - criterion's group `metrics`: `raw`, `no_recorder`, `recorder`;
//! - then, as the machine's speed drifts more than the cost looked for, [`ROUNDS`] rounds
//!   of [`CYCLES`] cycles of each case, in an order that rotates from round to round;
//!   each round gives the ratio recorder / no recorder of its two blocks, and the median
//!   and spread of those ratios are printed (the goal: within 3 %).
//!
//! It ends by checking that the recorder saw every cycle of the rounds and that its
//! gauges are back to 0. `cargo bench --features metrics --bench metrics` measures;
//! `-- --test`, and `cargo test --benches` (which runs it without `--bench`), run a few
//! cycles of each.

#[path = "../tests/common/server.rs"]
#[allow(dead_code, unreachable_pub)]
mod server;

#[path = "raw.rs"]
#[allow(dead_code, unreachable_pub)]
mod raw;

use std::time::{Duration, Instant};

use criterion::Criterion;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};
use redis::aio::MultiplexedConnection;
use redismutex::RwMutex;
use tokio::runtime::Runtime;

/// The PX of raw locks, the library's default TTL.
const TTL_MS: u64 = 4000;
/// The alternating rounds and the cycles of each case per round: measured, quick.
const ROUNDS: (usize, usize) = (30, 3);
const CYCLES: (usize, usize) = (200, 5);
/// The mutex's name, and so its `name` label.
const NAME: &str = "bench-metrics";

/// One case: what a cycle runs and under which recorder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    /// The raw redis-rs write cycle.
    Raw,
    /// `write()` → `unlock()`, no recorder installed.
    NoRecorder,
    /// `write()` → `unlock()`, a Prometheus recorder installed for the thread.
    Recorder,
}

/// What the cycles run on.
struct Bench {
    runtime: Runtime,
    conn: MultiplexedConnection,
    mx: RwMutex<MultiplexedConnection>,
    raw_id: String,
}

impl Bench {
    /// One cycle of `case` (for [`Case::Recorder`], the caller installs the recorder).
    async fn cycle(&self, case: Case) {
        if case == Case::Raw {
            let mut conn = self.conn.clone();
            raw::raw_cycle(&mut conn, "bench-metrics-raw", &self.raw_id, TTL_MS).await;
            return;
        }
        let guard = self.mx.write().key("k").await.expect("write");
        assert!(guard.unlock().await.expect("unlock"), "the lock was lost");
    }

    /// The time of `cycles` cycles of `case`, with `recorder` installed for
    /// [`Case::Recorder`].
    fn block(&self, case: Case, cycles: usize, recorder: &PrometheusRecorder) -> Duration {
        let _local =
            (case == Case::Recorder).then(|| metrics::set_default_local_recorder(recorder));
        self.runtime.block_on(async {
            let started = Instant::now();
            for _ in 0..cycles {
                self.cycle(case).await;
            }
            started.elapsed()
        })
    }
}

/// A Prometheus recorder with buckets for both `_seconds` histograms, as an
/// application would install it (`examples/metrics.rs`).
fn prometheus() -> PrometheusRecorder {
    let buckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 1.0, 10.0];
    let mut builder = PrometheusBuilder::new();
    for name in [
        "redismutex_acquire_duration_seconds",
        "redismutex_held_duration_seconds",
    ] {
        builder = builder
            .set_buckets_for_metric(Matcher::Full(name.into()), &buckets)
            .expect("buckets");
    }
    builder.build_recorder()
}

/// Criterion's group `metrics`: the three cases, each as one cycle per iteration.
fn criterion_group(c: &mut Criterion, bench: &Bench, recorder: &PrometheusRecorder) {
    let mut group = c.benchmark_group("metrics");
    for (name, case) in [
        ("raw", Case::Raw),
        ("no_recorder", Case::NoRecorder),
        ("recorder", Case::Recorder),
    ] {
        let _local =
            (case == Case::Recorder).then(|| metrics::set_default_local_recorder(recorder));
        group.bench_function(name, |b| {
            b.to_async(&bench.runtime).iter(|| bench.cycle(case))
        });
    }
    group.finish();
}

/// The per-round times of each case, in µs per cycle: `rounds` rounds of `cycles` cycles
/// of each case, the order rotating from round to round, after one unmeasured round.
fn alternate(
    bench: &Bench,
    recorder: &PrometheusRecorder,
    rounds: usize,
    cycles: usize,
) -> [Vec<f64>; 3] {
    let cases = [Case::Raw, Case::NoRecorder, Case::Recorder];
    for case in cases {
        bench.block(case, cycles, recorder);
    }
    let mut times: [Vec<f64>; 3] = Default::default();
    for round in 0..rounds {
        for at in 0..cases.len() {
            let case = (round + at) % cases.len();
            let took = bench.block(cases[case], cycles, recorder);
            times[case].push(took.as_secs_f64() * 1e6 / cycles as f64);
        }
        recorder.handle().run_upkeep();
    }
    times
}

/// The `q` quantile of `values` (sorted here), by the nearest rank.
fn quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[rank]
}

/// Prints the per-cycle medians and the ratios of the rounds, round by round.
fn report(times: &[Vec<f64>; 3], cycles: usize) {
    let [raw, plain, recorded] = times;
    let ratios: Vec<f64> = recorded.iter().zip(plain).map(|(r, p)| r / p).collect();
    let over_raw: Vec<f64> = plain.iter().zip(raw).map(|(p, r)| p / r).collect();
    let extra: Vec<f64> = recorded
        .iter()
        .zip(plain)
        .map(|(r, p)| (r - p) * 1e3)
        .collect();
    println!();
    println!(
        "{} alternating rounds of {cycles} cycles of each case (µs per cycle, median):",
        ratios.len()
    );
    println!(
        "  raw {:.1}, no recorder {:.1}, recorder {:.1}",
        quantile(raw, 0.5),
        quantile(plain, 0.5),
        quantile(recorded, 0.5)
    );
    let spread = |values: &[f64]| {
        format!(
            "median {:.4}, p25–p75 {:.4}–{:.4}, min–max {:.4}–{:.4}",
            quantile(values, 0.5),
            quantile(values, 0.25),
            quantile(values, 0.75),
            quantile(values, 0.0),
            quantile(values, 1.0),
        )
    };
    println!("  ratio recorder / no recorder: {}", spread(&ratios));
    println!("  ratio no recorder / raw:      {}", spread(&over_raw));
    println!(
        "  recorder's extra time per cycle: median {:.0} ns",
        quantile(&extra, 0.5)
    );
}

/// Checks what the rounds left in `recorder`: one acquire and one held time per
/// measured cycle (`expected`), no lock held, nobody waiting.
fn check_recorded(recorder: &PrometheusRecorder, expected: usize) {
    let page = recorder.handle().render();
    let value = |series: &str| {
        let line = page.lines().find(|line| line.starts_with(series));
        let line = line.unwrap_or_else(|| panic!("no {series} in:\n{page}"));
        line.rsplit(' ')
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .expect("a value")
    };
    let labels = format!("kind=\"write\",outcome=\"acquired\",name=\"{NAME}\"");
    let acquired = value(&format!(
        "redismutex_acquire_duration_seconds_count{{{labels}}}"
    ));
    let held = value(&format!(
        "redismutex_held_duration_seconds_count{{kind=\"write\",name=\"{NAME}\"}}"
    ));
    assert_eq!(
        (acquired, held),
        (expected as f64, expected as f64),
        "{page}"
    );
    for gauge in ["redismutex_held", "redismutex_waiting"] {
        let now = value(&format!("{gauge}{{kind=\"write\",name=\"{NAME}\"}}"));
        assert_eq!(now, 0.0, "{gauge} after the cycles:\n{page}");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|arg| arg == "--test") || !args.iter().any(|arg| arg == "--bench");
    let (rounds, cycles) = if quick {
        (ROUNDS.1, CYCLES.1)
    } else {
        (ROUNDS.0, CYCLES.0)
    };
    let server = server::RedisServer::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    let conn = runtime.block_on(server.conn());
    let mx = RwMutex::builder(conn.clone(), NAME)
        .name_label(true)
        .build()
        .expect("a mutex");
    let bench = Bench {
        runtime,
        conn,
        mx,
        raw_id: raw::raw_id(0),
    };

    let mut criterion = Criterion::default().configure_from_args();
    criterion_group(&mut criterion, &bench, &prometheus());
    criterion.final_summary();

    let recorder = prometheus();
    let times = alternate(&bench, &recorder, rounds, cycles);
    report(&times, cycles);
    check_recorded(&recorder, (rounds + 1) * cycles);
}
