//! One sequence run on the model and on the server, step by step, compared after each.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use redis::Value;

use super::compare::{self, Window};
use super::dump;
use super::op::Op;
use super::wire::{self, Loaded, Names, Shape};
use crate::scripts::{Refusal, Reply};
use crate::store::Store;

/// A step whose window (the server's clock before and after it) is longer than this
/// (µs) ends its sequence uncompared: on a machine that stalled that long a key near its
/// grid point could expire on one side only (every TTL and step of time is a multiple of
/// 500 ms, so a key is never closer to expiring than that less the time a sequence took).
pub const STALL_US: i64 = 250_000;

/// What one sequence did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Ran {
    /// Steps run and compared.
    pub steps: u64,
    /// Whether it ended early on a stall ([`STALL_US`]).
    pub stalled: bool,
}

/// What the steps run so far replied, by step and reply kind ("Lock: Token",
/// "Unlock: Int(3)", "Semaphore: Refused(NoExpiry { key: Lock })"): how much of each
/// script the sequences reach.
pub static SEEN: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

/// The name of `op`'s kind and of `reply`'s, as [`SEEN`] counts them.
fn outcome(op: &Op, reply: &Reply) -> String {
    let reply = match reply {
        Reply::Token { .. } => "Token".to_owned(),
        Reply::Blocked { .. } => "Blocked".to_owned(),
        Reply::Int(n) if *n > 0 && matches!(op, Op::GoWrite { .. } | Op::GoRead { .. }) => {
            "Int(pttl)".to_owned()
        }
        Reply::Renewed(r) => format!("Renewed({})", r.iter().sum::<i64>()),
        Reply::Ran(r) => format!("Ran({})", r.len()),
        Reply::Leader { holder, record, .. } => {
            format!("Leader({}, {})", holder.is_some(), record.is_some())
        }
        Reply::Refused(Refusal::WrongType { key, found }) => format!("WrongType({key:?}, {found})"),
        other => format!("{other:?}"),
    };
    format!("{}: {reply}", op.name())
}

/// A lock key no other sequence of this process uses: `{dm<pid>-<n>}`.
fn fresh_lock_key() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{{dm{}-{n}}}", std::process::id())
}

fn query(conn: &mut redis::Connection, cmd: &redis::Cmd) -> Result<Value, String> {
    cmd.query(conn).map_err(|err| format!("{err}"))
}

/// Runs `ops` on the model and on the server behind `conn` (with `scripts`), on a fresh
/// lock key; `Err` says at which step they first disagreed, and how.
pub fn sequence(conn: &mut redis::Connection, scripts: &Loaded, ops: &[Op]) -> Result<Ran, String> {
    let lock = fresh_lock_key();
    let names = Names { lock: &lock };
    let dump_cmd = scripts.call("dump", &names.all(), &[]);
    let mut model: Store = dump::parse(&names, &query(conn, &dump_cmd)?)?;
    let mut ran = Ran::default();
    let result = steps(conn, scripts, &names, &dump_cmd, &mut model, ops, &mut ran);
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
) -> Result<(), String> {
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
            .map_err(|err| format!("step {i} ({op:?}): {err}"))?;
        let [reply, dumped] = &replies[..] else {
            return Err(format!("step {i}: {} replies", replies.len()));
        };
        let server = dump::parse(names, dumped)?;
        let window = Window {
            before_us: before.clock_us,
            after_us: server.clock_us,
        };
        if window.after_us - window.before_us > STALL_US {
            ran.stalled = true;
            return Ok(());
        }
        let mut diffs = Vec::new();
        if let Some(expected) = &mut expected {
            let got = wire::reply(names, shape, reply)?;
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
            let timed = matches!(op, Op::GoWrite { .. } | Op::GoRead { .. });
            *SEEN
                .lock()
                .expect("a tally")
                .entry(outcome(op, expected))
                .or_default() += 1;
            if !compare::replies(expected, &got, window, timed) {
                diffs.push(format!("reply: model {expected:?}, server {got:?}"));
            }
        } else if shape == Shape::None && matches!(reply, Value::ServerError(_)) {
            return Err(format!("step {i} ({op:?}): {reply:?}"));
        }
        diffs.extend(compare::keys(model, &server, window));
        if !diffs.is_empty() {
            return Err(format!(
                "step {i}: {op:?}{}, {} µs after the state before it\n  {}\n  before: {:?}",
                token.map_or(String::new(), |t| format!(" (token argument {t})")),
                window.after_us - window.before_us,
                diffs.join("\n  "),
                before.keys,
            ));
        }
        // Agreed: the server's state from here, so that time-valued drift never adds up.
        *model = server;
        ran.steps += 1;
    }
    Ok(())
}
