//! Lock ids up to renaming. The crate draws a random id per acquisition, so an id that
//! nothing refers to any more (no client, no key) is as good as a fresh one: the checker
//! numbers the ids of a state in order of first appearance (the clients' first, then the
//! keys'), so that states that differ only in which ids were drawn are one state, and a
//! new acquisition's id is the first number not in use.

use std::collections::{BTreeMap, BTreeSet};

use super::client::Phase;
use crate::store::{Entry, Id, Member, Store, Text, Val};

/// The ids of `store`, in key order.
fn store_ids(store: &Store, out: &mut Vec<Id>) {
    for e in store.keys.values() {
        match &e.val {
            Val::Str(Text::Id(id)) | Val::Str(Text::Record { id, .. }) => out.push(*id),
            Val::Set(ids) => out.extend(ids.iter().copied()),
            Val::ZSet(z) => out.extend(z.keys().map(|m| match *m {
                Member::Id(id) | Member::Queued(_, id) => id,
            })),
            Val::Holders(h) => out.extend(h.keys().copied()),
            Val::Str(_) | Val::Hash => {}
        }
    }
}

/// How many ids `clients` and `store` use: the first fresh one, once they are renamed.
pub fn in_use(clients: &[Phase], store: &Store) -> Id {
    let mut seen: Vec<Id> = clients.iter().filter_map(Phase::id).collect();
    store_ids(store, &mut seen);
    seen.sort_unstable();
    seen.dedup();
    seen.len() as Id
}

/// Renames the ids of `clients` and `store` to 0, 1, … in order of first appearance;
/// returns how many are in use (the next fresh id).
pub fn canonical(clients: &mut [Phase], store: &mut Store) -> Id {
    let mut seen = Vec::new();
    for c in clients.iter() {
        if let Some(id) = c.id() {
            seen.push(id);
        }
    }
    store_ids(store, &mut seen);
    let mut map = BTreeMap::new();
    for id in seen {
        let next = map.len() as Id;
        map.entry(id).or_insert(next);
    }
    let to = |id: Id| map[&id];
    for c in clients.iter_mut() {
        c.rename(to);
    }
    for e in store.keys.values_mut() {
        rename_entry(e, to);
    }
    map.len() as Id
}

fn rename_entry(e: &mut Entry, to: impl Fn(Id) -> Id) {
    match &mut e.val {
        Val::Str(Text::Id(id)) => *id = to(*id),
        Val::Str(Text::Record { id, .. }) => *id = to(*id),
        Val::Set(ids) => *ids = ids.iter().map(|&id| to(id)).collect::<BTreeSet<_>>(),
        Val::ZSet(z) => {
            *z = z
                .iter()
                .map(|(m, &score)| {
                    let m = match *m {
                        Member::Id(id) => Member::Id(to(id)),
                        Member::Queued(kind, id) => Member::Queued(kind, to(id)),
                    };
                    (m, score)
                })
                .collect();
        }
        Val::Holders(h) => *h = h.iter().map(|(&id, &at)| (to(id), at)).collect(),
        Val::Str(_) | Val::Hash => {}
    }
}
