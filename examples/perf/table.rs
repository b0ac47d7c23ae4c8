//! The table the runner prints: its rows, how a failure shows in one, and how figures
//! are written (rates, ratios, latencies).

use crate::{BoxError, Result};

/// `err` and its sources, joined by `: `.
pub(crate) fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(err) = source {
        text.push_str(&format!(": {err}"));
        source = err.source();
    }
    text
}

/// One row of the table.
pub(crate) struct Row {
    pub(crate) id: &'static str,
    pub(crate) what: String,
    pub(crate) library: String,
    pub(crate) raw: String,
    pub(crate) ratio: String,
}

impl Row {
    /// A row of the measurement `what`: the library's cell, the raw baseline's, and how
    /// they compare.
    pub(crate) fn new(
        id: &'static str,
        what: impl Into<String>,
        library: String,
        raw: String,
        ratio: String,
    ) -> Self {
        Self {
            id,
            what: what.into(),
            library,
            raw,
            ratio,
        }
    }

    /// The row of a measurement that could not be made.
    pub(crate) fn failed(id: &'static str, what: &str, err: &BoxError) -> Self {
        let err = chain(&**err).replace('|', "/").replace('\n', " ");
        Self::new(id, what, format!("FAILED: {err}"), "—".into(), "—".into())
    }
}

/// Appends the rows `made`, or one failed row `id`/`what` when it is an error.
pub(crate) fn push_rows(rows: &mut Vec<Row>, id: &'static str, what: &str, made: Result<Vec<Row>>) {
    match made {
        Ok(made) => rows.extend(made),
        Err(err) => {
            eprintln!("{id} {what}: {}", chain(&*err));
            rows.push(Row::failed(id, what, &err));
        }
    }
}

/// Prints the table: `header`, `rows`, `notes`, and the command that reproduces the run
/// (`args` after `--example perf`).
pub(crate) fn print(header: &str, rows: &[Row], notes: &[String], args: &str) {
    println!("{header}");
    println!();
    println!("| # | measurement | library | raw baseline (same run) | ratio |");
    println!("|---|---|---|---|---|");
    for row in rows {
        println!(
            "| {} | {} | {} | {} | {} |",
            row.id, row.what, row.library, row.raw, row.ratio
        );
    }
    println!();
    for note in notes {
        println!("- {note}");
    }
    println!();
    println!("Reproduce: `cargo run --release --example perf{args}`");
}

/// A rate per second, in thousands separated by commas.
pub(crate) fn per_s(rate: f64) -> String {
    format!("{} /s", thousands(rate))
}

/// `x` rounded, its thousands separated by commas.
fn thousands(x: f64) -> String {
    let digits = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `library` over `raw`, to two places.
pub(crate) fn ratio(library: f64, raw: f64) -> String {
    format!("{:.2}", library / raw)
}

/// The `p`-quantile (0..=1) of sorted `values`, nearest rank.
pub(crate) fn quantile<T: Copy>(sorted: &[T], p: f64) -> T {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Nanoseconds as milliseconds, to two places.
pub(crate) fn ms(ns: f64) -> String {
    format!("{:.2} ms", ns / 1e6)
}

/// `p50 / p99 / max` of `values` in ns.
pub(crate) fn spread(values: &mut [i128]) -> String {
    values.sort_unstable();
    format!(
        "p50 {} / p99 {} / max {}",
        ms(quantile(values, 0.5) as f64),
        ms(quantile(values, 0.99) as f64),
        ms(values[values.len() - 1] as f64)
    )
}

/// `p50 / max` of sorted `values` in ns.
pub(crate) fn brief(values: &[i128]) -> String {
    format!(
        "p50 {} / max {}",
        ms(quantile(values, 0.5) as f64),
        ms(values[values.len() - 1] as f64)
    )
}
