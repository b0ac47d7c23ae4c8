//! The runner: a mutation applied to a copy of `lua/`, and the differential test run on
//! the copy until it catches the mutation or spends its budget.

use std::time::{Duration, Instant};

use super::differential::{self, Scripts};
use super::list::Mutation;
use crate::differential::server::RedisServer;

/// The seed of the first chunk of sequences (chunk `i` uses `seed + i`) unless
/// `MUTANTS_SEED` says another. Fixed, so that a run is repeatable.
pub const SEED: u64 = 0x5eed_0040;

/// What the differential test's reports of a mutation caught start with: a reply or a
/// key that differs, or a script that never ends (the server stops answering). Any
/// other `Err` means it could not run (the mutated script does not load, say).
const CAUGHT: [&str; 2] = [
    "the model and the server disagree",
    "the server stopped answering",
];

/// How long a step may take before the server counts as stopped (a mutated script that
/// never ends): the call fails, and so does the rest of that mutation's run.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest chunk of sequences run at once.
const MAX_CHUNK: u32 = 256;

/// What running the differential test on one mutation found.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The mutation's name.
    pub name: &'static str,
    /// Its file of `lua/`.
    pub file: &'static str,
    /// Whether the differential test disagreed with the mutated scripts.
    pub caught: bool,
    /// The sequences run until it was caught (an upper bound: the sequences of the
    /// chunk that caught it are all counted), or the whole budget when it was not.
    pub cases: u32,
    /// The steps of the shrunk sequence that caught it, when the report names them.
    pub shortest: Option<usize>,
    /// The differential test's report of the disagreement (empty when not caught).
    pub report: String,
    /// Wall time spent on it.
    pub elapsed: Duration,
}

/// Runs the differential test on `lua/` with `m` applied, on a `redis-server` of its
/// own (so that a script that never ends stops no other mutation's run), in chunks of sequences that double in size (1, 2, 4, ... up to [`MAX_CHUNK`] at
/// once) until it is caught or `budget` sequences have run. Each chunk draws its own
/// sequences (`seed` + its index), so no sequence runs twice, and `cases` says within a
/// chunk when it was caught.
///
/// # Panics
/// When `m` does not apply to `lua/` (`every_mutation_applies` says which), or the
/// differential test could not run it (a mutated script that does not load is no
/// behaviour caught: the mutation must be fixed).
pub fn run(m: &Mutation, budget: u32, seed: u64) -> Outcome {
    let started = Instant::now();
    let scripts = Scripts::from_dir()
        .mutated(m.file, m.from, m.to)
        .unwrap_or_else(|err| panic!("mutation {} does not apply: {err}", m.name));
    let server = RedisServer::start();
    let mut conn = server.client().get_connection().expect("a connection");
    conn.set_read_timeout(Some(STEP_TIMEOUT))
        .expect("a read timeout");
    let mut cases = 0;
    let mut chunk = 1;
    let mut index = 0;
    while cases < budget {
        let n = chunk.min(budget - cases);
        let result = differential::check_on(&mut conn, &scripts, n, seed.wrapping_add(index));
        cases += n;
        if let Err(report) = result {
            assert!(
                CAUGHT.iter().any(|start| report.starts_with(start)),
                "mutation {}: the differential test could not run: {report}",
                m.name
            );
            return Outcome {
                name: m.name,
                file: m.file,
                caught: true,
                cases,
                shortest: steps_in(&report),
                report,
                elapsed: started.elapsed(),
            };
        }
        chunk = (chunk * 2).min(MAX_CHUNK);
        index += 1;
    }
    Outcome {
        name: m.name,
        file: m.file,
        caught: false,
        cases,
        shortest: None,
        report: String::new(),
        elapsed: started.elapsed(),
    }
}

/// The number of steps of the shrunk sequence in a report of the differential test
/// ("... shrunk to 3 steps: ...").
fn steps_in(report: &str) -> Option<usize> {
    let (_, after) = report.split_once("shrunk to ")?;
    after.split_once(" step")?.0.parse().ok()
}

/// One line of the table `seeded_bugs_all` prints.
pub fn row(o: &Outcome) -> String {
    let shortest = o.shortest.map_or("-".to_owned(), |n| n.to_string());
    format!(
        "{:<38} | {:<16} | {:<6} | {:>6} | {:>8} | {:>6.1}s",
        o.name,
        o.file,
        if o.caught { "yes" } else { "NO" },
        o.cases,
        shortest,
        o.elapsed.as_secs_f64()
    )
}

/// What the table's columns hold.
pub const LEGEND: &str = "cases: sequences run until caught, all of the chunk that \
caught it counted (under twice the count needed, or 256 more); shortest: steps of the \
shrunk sequence that caught it";

/// The table's header, as [`row`] lays it out.
pub fn header() -> String {
    format!(
        "{:<38} | {:<16} | {:<6} | {:>6} | {:>8} | {:>7}",
        "name", "file", "caught", "cases", "shortest", "time"
    )
}
