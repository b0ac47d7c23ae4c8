//! What a run measuring fire leads (`tests/faults/leads.rs`) prints per deployment: the
//! faults, the sections, the tokens fired as lost, the leads measured, how long it took,
//! and the distribution of the leads (min, p1, p10, p50, p90, p99, max).

use std::fmt::Write as _;

use super::report::Report;

/// The percentiles printed, with their names.
pub const POINTS: [(&str, f64); 7] = [
    ("min", 0.0),
    ("p1", 0.01),
    ("p10", 0.10),
    ("p50", 0.50),
    ("p90", 0.90),
    ("p99", 0.99),
    ("max", 1.0),
];

/// One deployment's run.
#[derive(Debug, Clone)]
pub struct LeadRow {
    pub label: String,
    /// Seconds from the fleet's start to its report.
    pub secs: f64,
    pub faults: usize,
    pub sections: u64,
    /// Tokens fired as `Lost` or `Expired`.
    pub fired: usize,
    /// The leads measured, in µs, smallest first.
    pub leads_us: Vec<i64>,
}

impl LeadRow {
    /// The row of `report`, with its leads already measured.
    pub fn new(label: &str, report: &Report, faults: usize) -> Self {
        let mut leads_us: Vec<i64> = report.leads.iter().map(|l| l.lead_us).collect();
        leads_us.sort_unstable();
        LeadRow {
            label: label.to_string(),
            secs: report.secs,
            faults,
            sections: report.referee.sections,
            fired: report.losses,
            leads_us,
        }
    }

    /// The lead at fraction `q` of the sorted leads (nearest rank), in ms.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        let last = self.leads_us.len().checked_sub(1)?;
        let rank = (last as f64 * q).round() as usize;
        Some(self.leads_us[rank.min(last)] as f64 / 1000.0)
    }

    /// The distribution, `min / p1 / ... / max` in ms, or `none`.
    pub fn distribution(&self) -> String {
        let points: Option<Vec<String>> = POINTS
            .iter()
            .map(|&(_, q)| self.quantile_ms(q).map(|ms| format!("{ms:.1}")))
            .collect();
        points.map_or("none".to_string(), |points| points.join(" / "))
    }

    /// Seconds of the run per lead measured.
    pub fn secs_per_lead(&self) -> f64 {
        self.secs / self.leads_us.len().max(1) as f64
    }

    /// The row on one line, to print as soon as the deployment is done.
    pub fn line(&self) -> String {
        format!(
            "{}: {} faults, {} sections, {} tokens fired as lost, {} leads measured in {:.0} s \
             ({:.2} s a lead); lead ms min / p1 / p10 / p50 / p90 / p99 / max: {}",
            self.label,
            self.faults,
            self.sections,
            self.fired,
            self.leads_us.len(),
            self.secs,
            self.secs_per_lead(),
            self.distribution()
        )
    }
}

/// The rows as a Markdown table.
pub fn table(rows: &[LeadRow]) -> String {
    let mut out = String::from(
        "| deployment | faults | sections | fired as lost | leads | s | s a lead \
         | lead ms min / p1 / p10 / p50 / p90 / p99 / max |\n|---|---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.0} | {:.2} | {} |",
            row.label,
            row.faults,
            row.sections,
            row.fired,
            row.leads_us.len(),
            row.secs,
            row.secs_per_lead(),
            row.distribution()
        );
    }
    out
}
