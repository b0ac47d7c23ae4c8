//! Whether the model and the server agree after a step: its replies, and the keys.
//!
//! Both follow the server's clock, the model from a reading taken before the step
//! (`before`, µs), the server as its script ran, before the dump's reading (`after`). So
//! what the server derived from its clock may be later than the model's by up to
//! `after - before`: an expiry or a time-scored score set in the step later, a wait or
//! a PTTL in a reply shorter, a token floored at the clock larger. [`SLACK_MS`] allows a
//! few ms more either way. Everything else must be equal.

use crate::scripts::inspect::Inspection;
use crate::scripts::Reply;
use crate::store::{Entry, Key, Member, Store, Val};

/// How far the server's time-valued figures may be off the model's beyond the window,
/// either way, in ms: the rounding of µs to ms, and, on a server before Redis 7.0 (no
/// `PEXPIRETIME`: `dump`), the expiries read as TIME + PTTL, whose PTTL is measured from
/// the time Redis cached when the dump began. Every TTL and step of time is a multiple of
/// 500 ms, so a script that sets a wrong one is still caught.
pub const SLACK_MS: i64 = 10;

/// The window the step ran in: the server's clock before and after it (µs).
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub before_us: i64,
    pub after_us: i64,
}

impl Window {
    fn ms(self) -> i64 {
        (self.after_us - self.before_us).div_euclid(1000) + 1
    }

    /// A time the server set (an expiry, a deadline; ms) against the model's: later by
    /// at most the window.
    fn later(self, model: i64, server: i64) -> bool {
        (model - SLACK_MS..=model + self.ms() + SLACK_MS).contains(&server)
    }

    /// A time left the server measured (a wait, a PTTL; ms) against the model's:
    /// shorter by at most the window.
    fn shorter(self, model: i64, server: i64) -> bool {
        if model < 0 || server < 0 {
            return model == server;
        }
        (model - self.ms() - SLACK_MS..=model + SLACK_MS).contains(&server)
    }
}

/// Whether the server's reply agrees with the model's. `timed`: an integer reply is a
/// PTTL (Go's locks).
pub fn replies(model: &Reply, server: &Reply, w: Window, timed: bool) -> bool {
    match (model, server) {
        (Reply::Token { token: m, clock }, Reply::Token { token: s, .. }) => {
            if *clock {
                let span = (w.after_us - w.before_us).max(0) as u64;
                (*m..=m + span).contains(s)
            } else {
                m == s
            }
        }
        (Reply::Blocked { wait: m }, Reply::Blocked { wait: s }) => w.shorter(*m, *s),
        (Reply::Tokens(m), Reply::Tokens(s)) => {
            let span = (w.after_us - w.before_us).max(0) as u64;
            m.len() == s.len()
                && m.iter().zip(s).all(|(&(m, clock), &(s, _))| {
                    if clock {
                        (m..=m + span).contains(&s)
                    } else {
                        m == s
                    }
                })
        }
        (Reply::BlockedAt { index: m, wait: mw }, Reply::BlockedAt { index: s, wait: sw }) => {
            m == s && w.shorter(*mw, *sw)
        }
        (Reply::Int(m), Reply::Int(s)) if timed => w.shorter(*m, *s),
        (
            Reply::Leader {
                holder: mh,
                pttl: mp,
                record: mr,
            },
            Reply::Leader {
                holder: sh,
                pttl: sp,
                record: sr,
            },
        ) => mh == sh && mr == sr && w.shorter(*mp, *sp),
        (Reply::Inspected(m), Reply::Inspected(s)) => inspections(m, s, w),
        _ => model == server,
    }
}

/// inspect.lua's replies: PTTLs within the window, deadlines too, the rest equal.
fn inspections(m: &Inspection, s: &Inspection, w: Window) -> bool {
    let deadlines = |m: &[(Member, i64)], s: &[(Member, i64)]| {
        m.len() == s.len()
            && m.iter()
                .zip(s)
                .all(|((mm, md), (sm, sd))| mm == sm && w.later(*md, *sd))
    };
    m.kind == s.kind
        && w.shorter(m.pttl, s.pttl)
        && m.intent == s.intent
        && m.fence == s.fence
        && m.holders == s.holders
        && m.queue == s.queue
        && m.intent_value == s.intent_value
        && m.pttls.iter().zip(&s.pttls).all(|(m, s)| w.shorter(*m, *s))
        && deadlines(&m.permits, &s.permits)
        && m.tickets == s.tickets
        && deadlines(&m.deadlines, &s.deadlines)
        && m.descriptions.len() == s.descriptions.len()
        && m.descriptions
            .iter()
            .zip(&s.descriptions)
            .all(|((mi, ma), (si, sa))| mi == si && w.later(*ma, *sa))
}

/// The keys where the server's keyspace disagrees with the model's, and how; empty when
/// they agree.
pub fn keys(model: &Store, server: &Store, w: Window) -> Vec<String> {
    let mut diffs = Vec::new();
    for key in Key::ALL {
        let (m, s) = (model.keys.get(&key), server.keys.get(&key));
        let agree = match (m, s) {
            (None, None) => true,
            (Some(m), Some(s)) => entries(key, m, s, w),
            _ => false,
        };
        if !agree {
            diffs.push(format!("{key:?}: model {m:?}, server {s:?}"));
        }
    }
    diffs
}

fn entries(key: Key, m: &Entry, s: &Entry, w: Window) -> bool {
    let expiry = match (m.expires, s.expires) {
        (None, None) => true,
        (Some(m), Some(s)) => w.later(m, s),
        _ => false,
    };
    let value = match (&m.val, &s.val) {
        (Val::ZSet(mz), Val::ZSet(sz)) if matches!(key, Key::Lock | Key::QueueDeadline) => {
            mz.len() == sz.len()
                && mz
                    .iter()
                    .zip(sz)
                    .all(|((mm, ms), (sm, ss))| mm == sm && w.later(*ms, *ss))
        }
        // A description's acquisition time is the server's clock, as an expiry is.
        (Val::Holders(mh), Val::Holders(sh)) => {
            mh.len() == sh.len()
                && mh
                    .iter()
                    .zip(sh)
                    .all(|((mi, ma), (si, sa))| mi == si && w.later(*ma, *sa))
        }
        (mv, sv) => mv == sv,
    };
    expiry && value
}
