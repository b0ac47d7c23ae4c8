//! Faults on the data nodes of a [`Sentinels`] deployment: kill, freeze and thaw, and a
//! killed node brought back as a replica of the current primary.

use super::settled::{poll_until_async, settled};
use super::{replica_args, Sentinels, State, SETTLE};

impl Sentinels {
    /// SIGKILL to data node `i`: its connections are reset and new ones refused.
    pub fn kill(&mut self, i: usize) {
        if self.states[i] == State::Frozen {
            self.nodes[i].resume();
        }
        self.nodes[i].stop();
        self.states[i] = State::Killed;
    }

    /// SIGSTOP to data node `i`: it keeps its connections and answers nothing, not
    /// even the Sentinels' pings.
    pub fn freeze(&mut self, i: usize) {
        assert_eq!(self.states[i], State::Running, "node {i} does not run");
        self.nodes[i].pause();
        self.states[i] = State::Frozen;
    }

    /// SIGCONT to data node `i` after [`freeze`](Self::freeze): it answers what it was
    /// sent meanwhile. A thawed former primary is a master until a Sentinel turns it
    /// into a replica; [`settle`](Self::settle) waits for that.
    pub fn thaw(&mut self, i: usize) {
        assert_eq!(self.states[i], State::Frozen, "node {i} is not frozen");
        self.nodes[i].resume();
        self.states[i] = State::Running;
    }

    /// Kills the primary the Sentinels name; returns its index.
    pub fn kill_primary(&mut self) -> usize {
        let primary = self.primary();
        self.kill(primary);
        primary
    }

    /// Freezes the primary the Sentinels name; returns its index.
    pub fn freeze_primary(&mut self) -> usize {
        let primary = self.primary();
        self.freeze(primary);
        primary
    }

    /// Freezes data node `i`, which must be a replica now.
    pub fn freeze_replica(&mut self, i: usize) {
        assert_ne!(i, self.primary(), "node {i} is the primary");
        self.freeze(i);
    }

    /// Starts killed data node `i` again, empty, on its port, as a replica of the primary
    /// the Sentinels name, and waits until the deployment is settled with it in sync.
    pub async fn restart_as_replica(&mut self, i: usize) {
        assert_eq!(self.states[i], State::Killed, "node {i} was not killed");
        let primary = self.nodes[self.primary()].port().to_string();
        self.nodes[i].restart_with(&replica_args(&primary));
        self.states[i] = State::Running;
        self.settle().await;
    }

    /// Waits until the deployment is settled: the Sentinels agree on a running primary
    /// that says it is a master, see every other running node as its healthy replica,
    /// and those nodes replicate from it in sync. Returns the primary; panics with the
    /// logs after [`SETTLE`].
    pub async fn settle(&mut self) -> usize {
        let layout = self.layout();
        match poll_until_async(SETTLE, move || settled(&layout)).await {
            Ok(port) => {
                self.settled_primary = self.index(port);
                self.settled_primary
            }
            Err(why) => self.fail(&format!("did not settle within {SETTLE:?}: {why}")),
        }
    }
}
