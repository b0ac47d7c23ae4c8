//! One sequence run on the model and on the server, step by step, compared after each.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use redis::Value;

use super::compare::{self, Window};
use super::dump;
use super::op::Op;
use super::wire::{self, Loaded, Names, Shape};
use crate::scripts::attach::Mode;
use crate::scripts::{Refusal, Reply};
use crate::store::{Key, Member, Store};

/// A sequence whose steps have taken longer than this in all (µs, by the server's clock)
/// ends there, uncompared from the step that passed it. Every TTL and step of time is a
/// multiple of 500 ms, so a key set during a sequence is never closer to expiring than
/// 500 ms less the time the sequence has taken; past this, on a machine that stalls, a
/// key could expire between the model's reading of the clock and the script's, on one
/// side only.
pub const STALL_US: i64 = 400_000;

/// What one sequence did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Ran {
    /// Steps run and compared.
    pub steps: u64,
    /// Whether it ended early, having taken longer than [`STALL_US`].
    pub stalled: bool,
}

/// The name of `op`'s kind and of the model's `reply` ("Lock: Token", "Unlock: Int(3)",
/// "Semaphore: Refused(NoExpiry { key: Lock })"), as a run counts them: how much of each
/// script the sequences reach.
pub fn outcome(op: &Op, reply: &Reply) -> String {
    let reply = match reply {
        Reply::Token { .. } => "Token".to_owned(),
        Reply::Blocked { .. } => "Blocked".to_owned(),
        Reply::Int(n) if *n > 0 && matches!(op, Op::GoWrite { .. } | Op::GoRead { .. }) => {
            "Int(pttl)".to_owned()
        }
        Reply::Renewed(r) => format!("Renewed({})", r.iter().sum::<i64>()),
        Reply::Ran(r) => format!("Ran({})", r.len()),
        Reply::Tokens(t) => format!("Tokens({})", t.len()),
        Reply::BlockedAt { index, .. } => format!("BlockedAt({index})"),
        Reply::Leader { holder, record, .. } => {
            format!("Leader({}, {})", holder.is_some(), record.is_some())
        }
        Reply::Inspected(i) => format!("Inspected({}, queue {})", i.kind, !i.queue.is_empty()),
        Reply::Refused(Refusal::WrongType { key, found }) => format!("WrongType({key:?}, {found})"),
        other => format!("{other:?}"),
    };
    format!("{}: {reply}", op.name())
}

/// What an attach met that its reply does not name, counted as an outcome of its own:
/// a key of another type than its mode reads (a writer's lease at a set or a sorted
/// set, a reader's at a string, ...), or a permit of the old id whose deadline has passed
/// while its key lives on. `before`: the keys before the step.
pub fn attach_case(op: &Op, before: &Store) -> Option<&'static str> {
    let Op::Attach { old, parts, .. } = op else {
        return None;
    };
    let mut case = None;
    for &(l, mode) in parts {
        let key = Key::Lock.on(l);
        let found = before.type_of(key);
        let reads = match mode {
            Mode::Writer => "string",
            Mode::Reader => "set",
            Mode::Permit => "zset",
        };
        if found != "none" && found != reads {
            case = Some("Attach: a key of another type");
        }
        if mode == Mode::Permit {
            if let Ok(Some(deadline)) = before.zscore(key, Member::Id(*old)) {
                if deadline <= before.now_ms() {
                    return Some("Attach: a permit run out");
                }
            }
        }
    }
    case
}

/// Why a sequence failed.
#[derive(Debug)]
pub enum Failure {
    /// The model and the server disagreed (or the server replied what no script of
    /// the crate replies).
    Differ(String),
    /// The server did not answer (a script that never ends, a server that went away).
    Server(String),
}

/// A lock key no other sequence of this process uses: `{dm<pid>-<n>}`.
fn fresh_lock_key() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{{dm{}-{n}}}", std::process::id())
}

fn query(conn: &mut redis::Connection, cmd: &redis::Cmd) -> Result<Value, Failure> {
    cmd.query(conn)
        .map_err(|err| Failure::Server(format!("{err}")))
}

/// Runs `ops` on the model and on the server behind `conn` (with `scripts`), on a fresh
/// lock key; `Err` says at which step they first disagreed, and how.
pub fn sequence(
    conn: &mut redis::Connection,
    scripts: &Loaded,
    ops: &[Op],
    seen: &mut BTreeMap<String, u64>,
) -> Result<Ran, Failure> {
    let lock = fresh_lock_key();
    let names = Names::of_lock(&lock);
    let dump_cmd = scripts.call("dump", &names.all(), &[]);
    let mut model: Store =
        dump::parse(&names, &query(conn, &dump_cmd)?).map_err(Failure::Differ)?;
    let mut ran = Ran::default();
    let result = steps(
        conn, scripts, &names, &dump_cmd, &mut model, ops, &mut ran, seen,
    );
    let _: Result<i64, _> = redis::cmd("DEL").arg(names.all()).query(conn);
    result.map(|()| ran)
}

#[allow(clippy::too_many_arguments)]
fn steps(
    conn: &mut redis::Connection,
    scripts: &Loaded,
    names: &Names,
    dump_cmd: &redis::Cmd,
    model: &mut Store,
    ops: &[Op],
    ran: &mut Ran,
    seen: &mut BTreeMap<String, u64>,
) -> Result<(), Failure> {
    let started_us = model.clock_us;
    for (i, op) in ops.iter().enumerate() {
        let before = model.clone();
        let token = match op {
            Op::Fence { token, .. } | Op::Retake { token, .. } => Some(token.resolve(model)),
            _ => None,
        };
        let (cmd, shape) = wire::command(scripts, names, op, token.unwrap_or(1));
        let mut expected = op.on_model(model);
        // The step and the dump after it, in one round trip.
        let replies: Vec<Value> = redis::pipe()
            .ignore_errors()
            .add_command(cmd)
            .add_command(dump_cmd.clone())
            .query(conn)
            .map_err(|err| Failure::Server(format!("step {i} ({op:?}): {err}")))?;
        let at = |err: String| Failure::Differ(format!("step {i} ({op:?}): {err}"));
        let [reply, dumped] = &replies[..] else {
            return Err(at(format!("{} replies", replies.len())));
        };
        let server = dump::parse(names, dumped).map_err(at)?;
        let window = Window {
            before_us: before.clock_us,
            after_us: server.clock_us,
        };
        if window.after_us - started_us > STALL_US {
            ran.stalled = true;
            return Ok(());
        }
        let mut diffs = Vec::new();
        if let Some(expected) = &mut expected {
            // A step on lock 1's keys reads its refusals' keys as lock 0's, as the model
            // names them (`Store::on_lock`).
            let step_names = match op {
                Op::OnLock1(_) => names.on_lock(1),
                _ => *names,
            };
            let got = wire::reply(&step_names, shape, reply).map_err(at)?;
            // A token floored at the clock: the server read its clock later than the
            // model. Within the window, the model takes the step again at the server's
            // reading, so that what it stores (the fence) must match exactly.
            if let (
                Reply::Token {
                    token: m,
                    clock: true,
                },
                Reply::Token { token: s, .. },
            ) = (&*expected, &got)
            {
                if m < s && compare::replies(expected, &got, window, false) {
                    *model = before.clone();
                    model.set_clock_us(*s as i64);
                    *expected = op.on_model(model).expect("a script's step");
                }
            }
            // lock_all.lua reads the clock once per key: where it floored a token at its
            // clock, within the window, the model takes that reading as its own, so the
            // fence key it stores must be the token it replied.
            if let (Op::LockAll { take }, Reply::Tokens(m), Reply::Tokens(s)) =
                (op, &mut *expected, &got)
            {
                if m.len() == s.len()
                    && compare::replies(&Reply::Tokens(m.clone()), &got, window, false)
                {
                    for ((key, (m, clock)), (s, _)) in take.keys.iter().zip(m.iter_mut()).zip(s) {
                        if *clock && *m < *s {
                            *m = *s;
                            let fence = crate::store::Key::Fence.on(key.lock);
                            let px = model.pttl(fence);
                            model.set(fence, crate::store::Text::Int(*s), Some(px));
                        }
                    }
                }
            }
            let timed = matches!(op, Op::GoWrite { .. } | Op::GoRead { .. });
            *seen.entry(outcome(op, expected)).or_default() += 1;
            if let Some(case) = attach_case(op, &before) {
                *seen.entry(case.to_owned()).or_default() += 1;
            }
            if !compare::replies(expected, &got, window, timed) {
                diffs.push(format!("reply: model {expected:?}, server {got:?}"));
                if let Value::ServerError(err) = reply {
                    diffs.push(format!("the server's error: {err:?}"));
                }
            }
        } else if shape == Shape::None && matches!(reply, Value::ServerError(_)) {
            return Err(at(format!("{reply:?}")));
        }
        diffs.extend(compare::keys(model, &server, window));
        if !diffs.is_empty() {
            return Err(Failure::Differ(format!(
                "step {i}: {op:?}{}, {} µs after the state before it\n  {}\n  before: {:?}",
                token.map_or(String::new(), |t| format!(" (token argument {t})")),
                window.after_us - window.before_us,
                diffs.join("\n  "),
                before.keys,
            )));
        }
        // Agreed: the server's state from here, so that time-valued drift never adds up.
        *model = server;
        ran.steps += 1;
    }
    Ok(())
}
