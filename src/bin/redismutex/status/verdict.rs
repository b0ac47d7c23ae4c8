//! Whether a majority of the nodes holds the lock the same way, from each node's view.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Status;

/// What a majority of the nodes shows, if anything.
#[derive(Debug, PartialEq, Serialize)]
pub(super) struct Verdict {
    /// `write`, `read` or `free` when a majority of the nodes shows it (`semaphore` when a
    /// majority holds a semaphore, which has no quorum mode: each node's holders are its
    /// own; `foreign` when a majority holds a key of another type); `none` when the nodes
    /// that answered are a majority but agree on nothing (no holder on a majority: nobody
    /// holds the lock); `unknown` when fewer than a majority answered.
    state: &'static str,
    /// The writer that holds the lock on a majority.
    writer: Option<String>,
    /// The readers that each hold a read lock on a majority, by id.
    readers: Vec<Holder>,
    /// On how many nodes: the writer holds the lock; one of `readers` holds it; it is
    /// free; it is a semaphore; it is another type. 0 for `none` and `unknown`.
    on: usize,
    /// How many nodes answered.
    answered: usize,
    /// How many make a majority: N/2 + 1.
    majority: usize,
    /// How many nodes there are (N).
    nodes: usize,
}

/// A reader, and on how many nodes it holds a read lock.
#[derive(Debug, PartialEq, Serialize)]
pub(super) struct Holder {
    id: String,
    on: usize,
}

/// The verdict on `views`, one per node (`None` for a node that did not answer).
pub(super) fn verdict(views: &[Option<&Status>]) -> Verdict {
    let nodes = views.len();
    let majority = nodes / 2 + 1;
    let answered: Vec<&Status> = views.iter().flatten().copied().collect();
    let mut verdict = Verdict {
        state: "none",
        writer: None,
        readers: Vec::new(),
        on: 0,
        answered: answered.len(),
        majority,
        nodes,
    };
    let on = |state: &str| answered.iter().filter(|s| s.state == state).count();

    let writers = tally(answered.iter().filter_map(|s| s.writer.as_deref()));
    if let Some((writer, on)) = writers.into_iter().find(|&(_, on)| on >= majority) {
        verdict.state = "write";
        verdict.writer = Some(writer.to_owned());
        verdict.on = on;
        return verdict;
    }
    let readers = tally(
        answered
            .iter()
            .flat_map(|s| s.readers.iter().map(String::as_str)),
    );
    verdict.readers = readers
        .into_iter()
        .filter(|&(_, on)| on >= majority)
        .map(|(id, on)| Holder {
            id: id.to_owned(),
            on,
        })
        .collect();
    if !verdict.readers.is_empty() {
        verdict.state = "read";
        verdict.on = answered
            .iter()
            .filter(|s| {
                s.readers
                    .iter()
                    .any(|r| verdict.readers.iter().any(|h| &h.id == r))
            })
            .count();
        return verdict;
    }
    for state in ["free", "semaphore", "foreign"] {
        if on(state) >= majority {
            verdict.state = state;
            verdict.on = on(state);
            return verdict;
        }
    }
    if verdict.answered < majority {
        verdict.state = "unknown";
    }
    verdict
}

/// How often each id occurs.
fn tally<'a>(ids: impl Iterator<Item = &'a str>) -> BTreeMap<&'a str, usize> {
    let mut counts = BTreeMap::new();
    for id in ids {
        *counts.entry(id).or_insert(0) += 1;
    }
    counts
}

/// The verdict as text: one `quorum: ...` line (and a line per reader).
pub(super) fn text(verdict: &Verdict) -> String {
    let n = verdict.nodes;
    match verdict.state {
        "write" => format!(
            "quorum: write held by {} on {} of {n} nodes\n",
            verdict.writer.as_deref().unwrap_or("?"),
            verdict.on
        ),
        "read" => {
            let mut out = format!(
                "quorum: read held by {} reader(s) on {} of {n} nodes\n",
                verdict.readers.len(),
                verdict.on
            );
            for holder in &verdict.readers {
                out.push_str(&format!(
                    "  reader {} on {} of {n} nodes\n",
                    holder.id, holder.on
                ));
            }
            out
        }
        "free" => format!("quorum: free on {} of {n} nodes\n", verdict.on),
        "semaphore" => format!(
            "quorum: semaphore on {} of {n} nodes (a semaphore has no quorum mode: each \
             node's holders are its own)\n",
            verdict.on
        ),
        "foreign" => format!(
            "quorum: not a lock on {} of {n} nodes (left untouched)\n",
            verdict.on
        ),
        "unknown" => format!(
            "quorum: unknown: {} of {n} nodes answered, {} needed\n",
            verdict.answered, verdict.majority
        ),
        _ => format!(
            "quorum: none: nothing on a majority ({} of {n} nodes), so nobody holds it\n",
            verdict.majority
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn free() -> Status {
        Status {
            key: "jobs".into(),
            state: "free",
            kind: Some("none".into()),
            writer: None,
            readers: Vec::new(),
            reader_count: 0,
            pttl_ms: None,
            intent: None,
            fence: None,
            server_time_ms: Some(1_000_000),
            last_fencing_token: None,
            described: Vec::new(),
            semaphore: None,
            queue: None,
            note: None,
        }
    }

    fn write(id: &str) -> Status {
        Status {
            state: "write",
            kind: Some("string".into()),
            writer: Some(id.into()),
            pttl_ms: Some(4000),
            ..free()
        }
    }

    fn read(ids: &[&str]) -> Status {
        Status {
            state: "read",
            kind: Some("set".into()),
            readers: ids.iter().map(|id| id.to_string()).collect(),
            reader_count: ids.len(),
            pttl_ms: Some(4000),
            ..free()
        }
    }

    fn of(views: &[Option<Status>]) -> Verdict {
        let views: Vec<Option<&Status>> = views.iter().map(Option::as_ref).collect();
        verdict(&views)
    }

    #[test]
    fn a_writer_on_a_majority_holds_it() {
        let v = of(&[Some(write("a")), None, Some(write("a"))]);
        assert_eq!(
            (v.state, v.writer.as_deref(), v.on),
            ("write", Some("a"), 2)
        );
        assert_eq!((v.answered, v.majority, v.nodes), (2, 2, 3));
        assert_eq!(text(&v), "quorum: write held by a on 2 of 3 nodes\n");
    }

    #[test]
    fn a_writer_on_a_minority_leaves_it_free_or_split() {
        let v = of(&[Some(write("a")), Some(free()), Some(free())]);
        assert_eq!((v.state, v.on), ("free", 2));
        assert_eq!(text(&v), "quorum: free on 2 of 3 nodes\n");
        let v = of(&[Some(write("a")), Some(write("b")), Some(free())]);
        assert_eq!((v.state, v.on, v.writer.as_deref()), ("none", 0, None));
        assert!(text(&v).starts_with("quorum: none: "), "{}", text(&v));
    }

    #[test]
    fn readers_each_on_a_majority() {
        let v = of(&[
            Some(read(&["r1", "r2"])),
            Some(read(&["r1"])),
            Some(read(&["r2", "r3"])),
        ]);
        assert_eq!(v.state, "read");
        assert_eq!(v.on, 3);
        let ids: Vec<(&str, usize)> = v.readers.iter().map(|h| (h.id.as_str(), h.on)).collect();
        assert_eq!(ids, [("r1", 2), ("r2", 2)], "r3 is on one node only");
        assert_eq!(
            text(&v),
            "quorum: read held by 2 reader(s) on 3 of 3 nodes\n  reader r1 on 2 of 3 nodes\n  \
             reader r2 on 2 of 3 nodes\n"
        );
    }

    #[test]
    fn fewer_than_a_majority_answering_is_unknown() {
        let v = of(&[Some(write("a")), None, None]);
        assert_eq!((v.state, v.answered), ("unknown", 1));
        assert_eq!(
            text(&v),
            "quorum: unknown: 1 of 3 nodes answered, 2 needed\n"
        );
    }

    #[test]
    fn a_semaphore_on_a_majority_is_named_and_holds_no_lock() {
        let semaphore = || Status {
            state: "semaphore",
            kind: Some("zset".into()),
            pttl_ms: Some(4000),
            ..free()
        };
        let v = of(&[Some(semaphore()), Some(semaphore()), Some(write("a"))]);
        assert_eq!((v.state, v.on, v.writer.as_deref()), ("semaphore", 2, None));
        assert!(
            text(&v).starts_with("quorum: semaphore on 2 of 3 nodes (a semaphore has no quorum"),
            "{}",
            text(&v)
        );
    }

    #[test]
    fn two_nodes_need_both() {
        let v = of(&[Some(write("a")), Some(free())]);
        assert_eq!((v.state, v.majority), ("none", 2));
        let v = of(&[Some(write("a")), Some(write("a"))]);
        assert_eq!((v.state, v.on), ("write", 2));
    }
}
