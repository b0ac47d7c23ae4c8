//! What a [`Sentinels`] deployment says when a wait fails: the ports and states of its
//! processes, what each Sentinel sees, and the end of every log.

use super::probe::seen_master;
use super::settled::Layout;
use super::{Sentinels, State, MASTER_NAME};

/// The lines of each log a failure message shows.
const TAIL: usize = 400;

impl Sentinels {
    /// The ports that make up the deployment now, for the settle checks.
    pub(super) fn layout(&self) -> Layout {
        Layout {
            name: MASTER_NAME,
            sentinels: self.sentinels.iter().map(|s| s.port()).collect(),
            running: (0..self.len())
                .filter(|&i| self.states[i] == State::Running)
                .map(|i| self.nodes[i].port())
                .collect(),
        }
    }

    /// Panics with `why`, what each Sentinel sees, and the end of every log.
    pub fn fail(&self, why: &str) -> ! {
        panic!("Sentinel deployment: {why}\n{}", self.describe())
    }

    /// The data nodes with their states, what each Sentinel sees, and the end of every
    /// process's log (Sentinels' with their rewritten configs), for failure messages.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for (i, node) in self.nodes.iter().enumerate() {
            out += &format!(
                "--- data node {i} on {} ({:?}), log:\n{}\n",
                node.port(),
                self.states[i],
                tail(&node.log())
            );
        }
        for sentinel in &self.sentinels {
            let port = sentinel.port();
            let seen = seen_master(port, MASTER_NAME);
            out += &format!(
                "--- Sentinel on {port} sees {seen:?}\nconfig:\n{}\nlog:\n{}\n",
                sentinel.config(),
                tail(&sentinel.log())
            );
        }
        out
    }
}

/// The last [`TAIL`] lines of `log`.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(TAIL)..].join("\n")
}
