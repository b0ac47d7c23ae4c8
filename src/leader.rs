//! What [`Election::leader`](crate::Election::leader) and
//! [`Election::observe`](crate::Election::observe) report: the leader of an election.

/// The leader of an [`Election`](crate::Election): the value it published and its term.
///
/// Read from the election's record (`<lock key>:leader`) and believed only while the
/// election's lock key holds the id the record names, in the same read: a record left by
/// a leader whose lock is gone is no leader.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Leader {
    /// The value the leader published with [`Election::campaign`](crate::Election::campaign)
    /// or, since, [`Leadership::proclaim`](crate::Leadership::proclaim): what it tells the
    /// others about itself (an address, a name).
    pub value: String,
    /// The leader's term: the fencing token its lock was taken with, strictly larger for
    /// every new leader of the election (see the [fencing guide](crate::guide::fencing)).
    pub fencing_token: u64,
}
