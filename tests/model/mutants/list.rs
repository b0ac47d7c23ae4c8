//! The seeded bugs: each a small change of one script of `lua/` that someone could make
//! by mistake, and that changes what the script decides. The differential test
//! (`differential`) must catch every one (`seeded_bugs_all`).
//!
//! Every script of `lua/` has at least one.
//!
//! A mutation's `from` occurs exactly once in `lua/<file>` (with enough context around
//! the changed part to make it so); `to` replaces it. A mutation of `base.lua` or
//! `shared.lua` changes every script sent after it (`tests/common/scripts.rs`).
//!
//! `EQUIVALENT` lists the mutations that were tried and dropped because they change
//! nothing the scripts decide, each with the reason: no test could catch them.

/// One seeded bug: `from` in `lua/<file>` replaced by `to`.
#[derive(Clone, Copy, Debug)]
pub struct Mutation {
    /// A unique name: `<script>_<what goes wrong>`.
    pub name: &'static str,
    /// The file of `lua/` it changes, e.g. "lock.lua".
    pub file: &'static str,
    /// The text replaced: occurs exactly once in the file.
    pub from: &'static str,
    /// What replaces it.
    pub to: &'static str,
    /// The bug it makes, as the protocol sees it (for `EQUIVALENT`: why it is none).
    pub why: &'static str,
}

/// Shorthand for the list below.
const fn m(
    name: &'static str,
    file: &'static str,
    from: &'static str,
    to: &'static str,
    why: &'static str,
) -> Mutation {
    Mutation {
        name,
        file,
        from,
        to,
        why,
    }
}

/// Every seeded bug, by script.
pub const MUTATIONS: &[Mutation] = &[
    // base.lua
    m(
        "base_now_ms_in_seconds",
        "base.lua",
        "math.floor(now_us() / 1000)",
        "math.floor(now_us() / 1000000)",
        "the server clock read in seconds where milliseconds are meant: every permit's \
         deadline and every queue deadline is in the past as it is written",
    ),
    m(
        "base_pttl_at_least_inverted",
        "base.lua",
        "if (pttl or redis.call('PTTL', key)) < ttl then",
        "if (pttl or redis.call('PTTL', key)) > ttl then",
        "a condition inverted: a longer PTTL is shortened and a shorter (or none, -1) is \
         left, so a new readers' set or queue keeps no TTL",
    ),
    m(
        "base_publish_fails",
        "base.lua",
        "return redis.pcall('PUBLISH', channel, message)",
        "return redis.pcall('PUBLISH', channel)",
        "a publish that never happens (wrong arity, an error reply): no waiter is told, \
         and every reply's +2 goes",
    ),
    // shared.lua
    m(
        "shared_clock_floor_skipped",
        "shared.lua",
        "return math.max(token, now_us())",
        "return token",
        "the clock floor skipped: a fence counter that expired or was lost restarts at 1, \
         below the tokens granted before it",
    ),
    m(
        "shared_cluster_floor_ignored",
        "shared.lua",
        "if token >= 1e15 and not floor then",
        "if token >= 1e15 then",
        "ARGV's floor flag (Redis Cluster) ignored: a counter behind the clock is not \
         floored, so a failover that lost increments repeats tokens",
    ),
    m(
        "shared_fence_noexpiry_accepted",
        "shared.lua",
        "    if redis.call('PTTL', key) == -1 then\n        return nil, {'noexpiry', key}\n    end\n    return tonumber(fence)",
        "    return tonumber(fence)",
        "a fence counter with no TTL accepted as a counter (the noexpiry refusal skipped)",
    ),
    m(
        "shared_intent_wrongtype_accepted",
        "shared.lua",
        "    if type(intent) ~= 'string' then\n        return nil, nil, {'wrongtype', key, redis.call('TYPE', key)['ok']}\n    end",
        "    if type(intent) ~= 'string' then\n        return nil, -2\n    end",
        "an intent key of a foreign type taken for no intent, instead of refused",
    ),
    m(
        "shared_queue_purge_skipped",
        "shared.lua",
        "        queue_purge(q, d, now)\n        return now",
        "        return now",
        "a purge skipped: fair waiters that stopped attempting stay in the queue and hold \
         up everyone behind them for ever",
    ),
    m(
        "shared_queue_ticket_not_incremented",
        "shared.lua",
        "ticket = tonumber(last[2]) + 1",
        "ticket = tonumber(last[2])",
        "a ticket not incremented: a new waiter shares the last one's ticket, and the \
         queue's order becomes the members' byte order, not arrival order",
    ),
    m(
        "shared_queue_unqueued_counts_first",
        "shared.lua",
        "return redis.call('ZRANK', q, member) or redis.call('ZCARD', q)",
        "return redis.call('ZRANK', q, member) or 0",
        "a waiter that is not queued counts as first, not last: a fair lock or permit \
         goes to whoever asks, past the queue",
    ),
    m(
        "shared_queue_head_sees_all",
        "shared.lua",
        "        if rank == 0 then\n            return {}\n        end\n",
        "",
        "the head of the queue is told everyone is ahead of it (ZRANGE 0 -1): a reader at \
         the head is kept out by a writer queued behind it",
    ),
    m(
        "shared_queue_leave_keeps_ticket",
        "shared.lua",
        "        redis.call('ZREM', q, member)\n        redis.call('ZREM', d, member)\n    end",
        "        redis.call('ZREM', d, member)\n    end",
        "a queue leave skipped (the ticket stays): the waiter that was granted still \
         counts as ahead of everyone behind it",
    ),
    m(
        "shared_queue_no_ttl",
        "shared.lua",
        "        pttl_at_least(q, ttl)\n        pttl_at_least(d, ttl)",
        "        pttl_at_least(d, ttl)",
        "a TTL dropped: the queue key made by a first waiter has none, so it never expires",
    ),
    m(
        "shared_queue_deadline_not_moved",
        "shared.lua",
        "        redis.call('ZADD', d, now + ttl, member)",
        "        redis.call('ZADD', d, 'NX', now + ttl, member)",
        "a waiter that attempts again keeps its first deadline: it is purged while still \
         waiting",
    ),
    // lock.lua
    m(
        "lock_ttl_dropped",
        "lock.lua",
        "redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)",
        "redis.call('SET', KEYS[1], ARGV[1])",
        "a TTL dropped: a writer that crashes holds the lock for ever",
    ),
    m(
        "lock_token_not_incremented",
        "lock.lua",
        "at_least_the_clock(last + 1, ARGV[5] == '1')",
        "at_least_the_clock(last, ARGV[5] == '1')",
        "a token not incremented: the next writer gets the token of the last holder",
    ),
    m(
        "lock_fence_ttl_dropped",
        "lock.lua",
        "redis.call('SET', KEYS[3], string.format('%.0f', token), 'PX', ARGV[4])",
        "redis.call('SET', KEYS[3], string.format('%.0f', token))",
        "a TTL dropped: the fence counter lives for ever (and every later request refuses \
         it as noexpiry)",
    ),
    m(
        "lock_id_check_removed",
        "lock.lua",
        "if holder == ARGV[1] or (holder == false and",
        "if type(holder) == 'string' or (holder == false and",
        "an id check removed: a writer takes a lock another writer holds",
    ),
    m(
        "lock_intent_not_set",
        "lock.lua",
        "    if intent == nil then\n        redis.call('SET', KEYS[2], ARGV[1], 'PX', ttl)\n",
        "    if intent == nil then\n",
        "an intent not set: a blocked writer does not keep new readers out, and starves",
    ),
    m(
        "lock_intent_not_deleted",
        "lock.lua",
        "    if intent == ARGV[1] then\n        redis.call('DEL', KEYS[2])\n    end\n    redis.call('SET', KEYS[3]",
        "    redis.call('SET', KEYS[3]",
        "an intent not deleted: the writer that got the lock keeps readers out after it \
         releases, until its intent runs out",
    ),
    m(
        "lock_intent_deleted_when_anothers",
        "lock.lua",
        "    if intent == ARGV[1] then\n        redis.call('DEL', KEYS[2])",
        "    if intent ~= nil then\n        redis.call('DEL', KEYS[2])",
        "an intent deleted when another's: a writer that finds the lock free wipes the \
         intent of the writer waiting before it",
    ),
    m(
        "lock_intent_renewed_when_anothers",
        "lock.lua",
        "    elseif intent == ARGV[1] then\n        redis.call('PEXPIRE', KEYS[2], ttl)",
        "    else\n        redis.call('PEXPIRE', KEYS[2], ttl)",
        "another writer's intent (or Go's \"1\") renewed by this writer's attempt: it never \
         runs out while this one waits",
    ),
    m(
        "lock_fair_rank_inverted",
        "lock.lua",
        "queue.rank(KEYS[4], member) == 0",
        "queue.rank(KEYS[4], member) ~= 0",
        "a condition inverted: in fair mode a free lock goes to a writer with waiters \
         ahead, and not to the first",
    ),
    m(
        "lock_fair_leave_skipped",
        "lock.lua",
        "        queue.leave(KEYS[4], KEYS[5], member)",
        "",
        "a queue leave skipped: the writer that got the lock stays queued, ahead of \
         everyone",
    ),
    // attach.lua
    m(
        "attach_writer_unchecked",
        "attach.lua",
        "return redis.pcall('GET', key) == old",
        "return true",
        "a writer's lease attaches whoever holds the key, or when nobody does: a lost \
         hold revived over another writer's",
    ),
    m(
        "attach_writer_get_unprotected",
        "attach.lua",
        "return redis.pcall('GET', key) == old",
        "return redis.call('GET', key) == old",
        "a write key that holds a readers' set or a foreign type fails the script with \
         an error instead of refusing the lease as not held",
    ),
    m(
        "attach_reader_any_member",
        "attach.lua",
        "return redis.pcall('SISMEMBER', key, old) == 1",
        "return redis.pcall('SCARD', key) ~= 0",
        "a reader's lease attaches while any reader holds the set, though its own id \
         has left it",
    ),
    m(
        "attach_permit_deadline_ignored",
        "attach.lua",
        "return tonumber(deadline) > now",
        "return now > 0",
        "a permit whose deadline has passed (still a member until someone purges it) \
         attaches: a lost permit revived beside the count",
    ),
    m(
        "attach_first_key_only",
        "attach.lua",
        "for i = 1, n do\n    if not holds",
        "for i = 1, 1 do\n    if not holds",
        "a set's lease is checked at its first key only: a second key lost to another \
         holder is taken over from it",
    ),
    m(
        "attach_moves_first_key_only",
        "attach.lua",
        "for i = 1, n do\n    local key, mode",
        "for i = 1, 1 do\n    local key, mode",
        "a set's lease moves its first key only and replies 1: the other keys keep the \
         old id, which nobody renews, and the new guard does not hold them",
    ),
    m(
        "attach_refusal_names_first_key",
        "attach.lua",
        "return {0, i}",
        "return {0, 1}",
        "a refused set names its first key as the one not held, whichever it was",
    ),
    m(
        "attach_writer_ttl_kept",
        "attach.lua",
        "redis.call('SET', key, new, 'PX', ttl)",
        "redis.call('SET', key, new, 'KEEPTTL')",
        "a writer's key keeps the detached hold's remaining TTL, not this handle's: the \
         new guard's deadline outlives the key",
    ),
    m(
        "attach_reader_old_kept",
        "attach.lua",
        "redis.call('SREM', key, old)\n",
        "",
        "the old id stays a reader beside the new one: the lease attaches again",
    ),
    m(
        "attach_reader_ttl_not_raised",
        "attach.lua",
        "redis.call('SADD', key, new)\n        pttl_at_least(key, ttl)",
        "redis.call('SADD', key, new)",
        "a readers' set keeps the detached hold's remaining TTL: the new guard's deadline \
         outlives the key",
    ),
    m(
        "attach_permit_old_kept",
        "attach.lua",
        "redis.call('ZREM', key, old)\n",
        "",
        "the old permit stays beside the new one: one hold counts twice against the \
         permits, and the lease attaches again",
    ),
    m(
        "attach_permit_deadline_now",
        "attach.lua",
        "redis.call('ZADD', key, now + ttl, new)",
        "redis.call('ZADD', key, now, new)",
        "the new permit's deadline is the server's clock: it has run out as it is \
         written",
    ),
    m(
        "attach_permit_ttl_not_raised",
        "attach.lua",
        "redis.call('ZADD', key, now + ttl, new)\n        pttl_at_least(key, ttl)",
        "redis.call('ZADD', key, now + ttl, new)",
        "the semaphore's key keeps its TTL, which may run out before the new permit's \
         deadline",
    ),
    m(
        "attach_description_of_new_deleted",
        "attach.lua",
        "redis.pcall('HDEL', KEYS[n + i], old)",
        "redis.pcall('HDEL', KEYS[n + i], new)",
        "the old id's description stays, naming a holder that holds nothing",
    ),
    m(
        "attach_description_unprotected",
        "attach.lua",
        "redis.pcall('HDEL', KEYS[n + i], old)",
        "redis.call('HDEL', KEYS[n + i], old)",
        "a holders key of a foreign type fails the script after the hold moved: an error \
         though the attach happened",
    ),
    // lock_all.lua
    m(
        "lock_all_first_key_only",
        "lock_all.lua",
        "local n = #KEYS / 3",
        "local n = 1",
        "a set checks and takes its first key only: the others are left to whoever \
         comes, and the guard believes it holds them",
    ),
    m(
        "lock_all_read_holder_ignored",
        "lock_all.lua",
        "holder_blocks = true",
        "holder_blocks = false",
        "a read key held by a writer does not block: the SADD on the writer's string \
         fails mid-way, after the keys before it were written",
    ),
    m(
        "lock_all_read_intent_ignored",
        "lock_all.lua",
        "intent_blocks = intent ~= nil and intent ~= id",
        "intent_blocks = false",
        "a set reads past a waiting writer's intent: the writer the intent protects can \
         wait for ever behind sets that read",
    ),
    m(
        "lock_all_keeps_intent_when_blocked_by_intent",
        "lock_all.lua",
        "local keep = ARGV[5] == '1' and not by_intent",
        "local keep = ARGV[5] == '1'",
        "a set that another waiter's intent blocks keeps (or sets) its own intents: two \
         sets that each write a key the other reads keep each other out for ever",
    ),
    m(
        "lock_all_own_intent_kept_on_success",
        "lock_all.lua",
        "        if intents[i] == id then\n            redis.call('DEL', intent_key)\n        end\n",
        "",
        "a set that is granted leaves its intent on its write keys: readers stay out of \
         a key that nobody waits for, until the intent expires",
    ),
    m(
        "lock_all_token_not_incremented",
        "lock_all.lua",
        "at_least_the_clock(lasts[i] + 1, floor)",
        "at_least_the_clock(lasts[i], floor)",
        "a key's token is the last one again: two holders of one key share a token",
    ),
    m(
        "lock_all_clock_floor_skipped",
        "lock_all.lua",
        "tokens[i] = at_least_the_clock(lasts[i] + 1, floor)",
        "tokens[i] = lasts[i] + 1",
        "tokens not floored at the clock: a fence counter that expired restarts at 1, \
         below the tokens granted before it",
    ),
    m(
        "lock_all_blocked_index_first",
        "lock_all.lua",
        "blocked_at = i\n",
        "blocked_at = 1\n",
        "the blocking key misnamed: the set waits for a release of the wrong key",
    ),
    m(
        "lock_all_blocked_wait_of_lock",
        "lock_all.lua",
        "blocked_pttl = holder_blocks and pttl or intent_pttl",
        "blocked_pttl = pttl",
        "a set blocked by an intent waits the lock key's PTTL (-2 when free) instead of \
         the intent's",
    ),
    m(
        "lock_all_intent_not_renewed",
        "lock_all.lua",
        "            elseif keep and intent == id then\n                redis.call('PEXPIRE', intent_key, ttl)\n",
        "            elseif keep and intent == id then\n",
        "a waiting set's intent is not renewed by its next attempt: it lapses while the \
         set still waits, and readers pass it",
    ),
    m(
        "lock_all_read_ttl_not_raised",
        "lock_all.lua",
        "pttl_at_least(lock, ttl, pttls[i])",
        "pttl_at_least(lock, 0, pttls[i])",
        "a set's read key is not given its TTL: a new readers' set is deleted at once \
         (PEXPIRE 0), an existing one keeps a PTTL that may end before the set's guard",
    ),
    m(
        "lock_all_resent_write_blocked",
        "lock_all.lua",
        "(lock_type == 'string' and redis.call('GET', lock) ~= id)",
        "lock_type == 'string'",
        "a resent request (its write key already holds its id) blocks on itself until \
         the key expires",
    ),
    // rlock.lua
    m(
        "rlock_intent_ignored",
        "rlock.lua",
        "if not blocked and member == 0 then\n    blocked = intent_blocks()",
        "if false then\n    blocked = intent_blocks()",
        "a waiting writer's intent ignored on the checked path: new readers overtake it",
    ),
    m(
        "rlock_counting_intent_ignored",
        "rlock.lua",
        "local blocked = added == 1 and intent_blocks()",
        "local blocked = added == 0 and intent_blocks()",
        "a condition inverted on the counting path: a new reader ignores the intent, and \
         a resent one is refused by it",
    ),
    m(
        "rlock_token_not_incremented",
        "rlock.lua",
        "at_least_the_clock(last + 1, ARGV[5] == '1')",
        "at_least_the_clock(last, ARGV[5] == '1')",
        "a token not incremented: a reader gets the token of the request before it",
    ),
    m(
        "rlock_ttl_shortened",
        "rlock.lua",
        "pttl_at_least(KEYS[1], ttl, pttl)\nif queue then",
        "redis.call('PEXPIRE', KEYS[1], ttl)\nif queue then",
        "a reader joining shortens the readers' set's TTL (PEXPIRE for pttl_at_least): a \
         reader with a longer TTL loses the lock early",
    ),
    m(
        "rlock_counting_ttl_dropped",
        "rlock.lua",
        "    pttl_at_least(KEYS[1], ttl, pttl)\n    return token",
        "    return token",
        "a TTL dropped on the counting path: a readers' set made by a counting reader has \
         none",
    ),
    m(
        "rlock_counting_restart_no_ttl",
        "rlock.lua",
        "        redis.call('SET', KEYS[3], string.format('%.0f', token), 'PX', ARGV[3])\n    end",
        "        redis.call('SET', KEYS[3], string.format('%.0f', token))\n    end",
        "a TTL dropped: a fence counter restarted from the clock by a counting reader has \
         none",
    ),
    m(
        "rlock_fair_writer_ahead_ignored",
        "rlock.lua",
        "if ahead:sub(1, 2) == 'w:' then",
        "if ahead:sub(1, 2) == 'r:' then",
        "fair mode: a reader checks for readers ahead of it, not writers, so it overtakes \
         a queued writer and waits behind readers",
    ),
    m(
        "rlock_fair_leave_skipped",
        "rlock.lua",
        "    queue.leave(KEYS[4], KEYS[5], queued)",
        "",
        "a queue leave skipped: a reader that got the lock stays queued",
    ),
    // describe.lua
    m(
        "describe_unchecked",
        "describe.lua",
        "    if holds(KEYS[i], lock_type) then",
        "    if true then",
        "a description written for an id that holds nothing: a waiter that was blocked \
         is described as a holder",
    ),
    m(
        "describe_reader_unchecked",
        "describe.lua",
        "return redis.call('SISMEMBER', key, id) == 1",
        "return true",
        "any reader's id described while the readers hold the lock: a blocked writer's \
         description beside readers",
    ),
    m(
        "describe_expired_permit",
        "describe.lua",
        "return deadline ~= false and tonumber(deadline) > now",
        "return deadline ~= false",
        "a permit whose deadline has passed described as a holder",
    ),
    m(
        "describe_no_ttl",
        "describe.lua",
        "            pttl_at_least(holders, lock_pttl > 0 and lock_pttl or ttl)\n",
        "",
        "the holders hash written without a TTL: descriptions outlive every hold",
    ),
    m(
        "describe_ttl_not_the_locks",
        "describe.lua",
        "pttl_at_least(holders, lock_pttl > 0 and lock_pttl or ttl)",
        "pttl_at_least(holders, ttl)",
        "the holders hash given the full TTL, not the lock's PTTL: the description outlives \
         its lock by the time since the lock was set",
    ),
    m(
        "describe_run_out_permits_kept",
        "describe.lua",
        "        if deadline == false or tonumber(deadline) <= now then",
        "        if deadline == false then",
        "the description of a permit that ran out kept while its entry waits to be purged",
    ),
    m(
        "describe_purged_permits_kept",
        "describe.lua",
        "        prune(KEYS[i], holders)\n",
        "",
        "the descriptions of run-out and purged permits kept: they stay as long as other \
         permits keep the hash alive",
    ),
    m(
        "describe_second_key_skipped",
        "describe.lua",
        "for i = 1, n do",
        "for i = 1, 1 do",
        "only the first key of a set described",
    ),
    // renew.lua: the holders keys
    m(
        "renew_holders_not_renewed",
        "renew.lua",
        "            pttl_at_least(KEYS[n + others], ttl)\n",
        "",
        "a renewal that keeps the lock but not its description: the description expires \
         while the hold lives on",
    ),
    m(
        "renew_holders_renewed_unheld",
        "renew.lua",
        "        if replies[i] == 1 then\n            pttl_at_least",
        "        if true then\n            pttl_at_least",
        "a renewal that was refused still keeps the holders hash alive",
    ),
    m(
        "renew_holders_key_not_counted",
        "renew.lua",
        "        -- Its description lives as long as its hold.\n        others = others + 1",
        "        -- Its description lives as long as its hold.",
        "the holders key not counted among the other keys: the next key's upgrader or \
         holders key is read from the wrong place",
    ),
    // unlock.lua: the description
    m(
        "unlock_description_kept",
        "unlock.lua",
        "    redis.pcall('HDEL', KEYS[nkeys], ARGV[1])\n",
        "",
        "a release that leaves its description behind",
    ),
    // force_unlock.lua: the descriptions
    m(
        "force_unlock_descriptions_kept",
        "force_unlock.lua",
        "    redis.call('DEL', KEYS[4])\n",
        "",
        "a forced release that leaves every removed holder's description behind",
    ),
    // inspect.lua: the descriptions
    m(
        "inspect_descriptions_dropped",
        "inspect.lua",
        "            if texts[i] then",
        "            if false then",
        "no holder's description read",
    ),
    // unlock.lua
    m(
        "unlock_id_check_removed",
        "unlock.lua",
        "if redis.pcall('GET', KEYS[1]) == ARGV[1] then\n        redis.call('DEL', KEYS[1])",
        "if redis.pcall('GET', KEYS[1]) then\n        redis.call('DEL', KEYS[1])",
        "an id check removed: a writer's release deletes whatever holds the lock",
    ),
    m(
        "unlock_publish_skipped",
        "unlock.lua",
        "if freed then\n    local published",
        "if false then\n    local published",
        "a publish skipped: waiters are not told the lock is free (the reply's +2 goes)",
    ),
    m(
        "unlock_intent_deleted_when_anothers",
        "unlock.lua",
        "if nkeys >= 2 and redis.pcall('GET', KEYS[2]) == ARGV[1] then",
        "if nkeys >= 2 and redis.pcall('GET', KEYS[2]) then",
        "an intent deleted when another's: a writer that gives up wipes the intent of \
         another waiting writer",
    ),
    m(
        "unlock_queue_leave_skipped",
        "unlock.lua",
        "if nkeys >= 4 then",
        "if nkeys >= 5 then",
        "a queue leave skipped: a fair waiter that gives up keeps its place, and holds up \
         those behind it until its deadline",
    ),
    m(
        "unlock_permit_deadline_inverted",
        "unlock.lua",
        "if tonumber(deadline) > now_ms() then",
        "if tonumber(deadline) < now_ms() then",
        "a deadline compared the wrong way: a live permit's release counts as not held, \
         a run-out one's as held",
    ),
    m(
        "unlock_last_reader_inverted",
        "unlock.lua",
        "freed = redis.call('SCARD', KEYS[1]) <= 1",
        "freed = redis.call('SCARD', KEYS[1]) > 1",
        "a condition inverted: a reader's release publishes while readers remain, and \
         not when the last one or two go",
    ),
    m(
        "unlock_one_reader_left_unpublished",
        "unlock.lua",
        "freed = redis.call('SCARD', KEYS[1]) <= 1",
        "freed = redis.call('SCARD', KEYS[1]) == 0",
        "the release before upgradable reads: a reader that leaves one reader behind does \
         not publish, so an upgradable reader waiting for it to go is not woken",
    ),
    m(
        "unlock_upgrader_of_another_deleted",
        "unlock.lua",
        "if ARGV[3] == 'u' and nkeys >= 3 and redis.pcall('GET', KEYS[3]) == ARGV[1] then",
        "if ARGV[3] == 'u' and nkeys >= 3 and redis.pcall('GET', KEYS[3]) then",
        "an id check removed: an upgradable reader's release deletes the upgrader key of \
         another (a later upgradable reader's), letting a second one in beside it",
    ),
    m(
        "unlock_upgrader_kept",
        "unlock.lua",
        "if ARGV[3] == 'u' and",
        "if ARGV[3] == 'U' and",
        "an upgradable reader's release keeps its upgrader key: nobody is told, and it \
         outlives the reader (ignored once the id has left the set, but it blocks the id's \
         resent take and is left for its TTL)",
    ),
    // refresh.lua
    m(
        "refresh_id_check_removed",
        "refresh.lua",
        "if redis.call('GET', KEYS[1]) == ARGV[1] then",
        "if redis.call('GET', KEYS[1]) then",
        "an id check removed: any writer's refresh extends another writer's lock",
    ),
    m(
        "refresh_shortens_readers",
        "refresh.lua",
        "if held then\n    pttl_at_least(KEYS[1], ttl)",
        "if held then\n    redis.call('PEXPIRE', KEYS[1], ttl)",
        "a renewal that shortens a readers' set's TTL (PEXPIRE for pttl_at_least): \
         another reader with a longer TTL loses the lock early",
    ),
    m(
        "refresh_permit_deadline_inverted",
        "refresh.lua",
        "held = tonumber(deadline) > now",
        "held = tonumber(deadline) < now",
        "a deadline compared the wrong way: a live permit is dropped, a run-out one \
         revived",
    ),
    m(
        "refresh_run_out_permit_kept",
        "refresh.lua",
        "        else\n            redis.call('ZREM', KEYS[1], ARGV[1])\n",
        "",
        "a run-out permit is not removed when its refresh fails",
    ),
    // renew.lua
    m(
        "renew_id_check_removed",
        "renew.lua",
        "        if value == id then",
        "        if value then",
        "an id check removed on the writer's fast path: the key's other holder (a writer, \
         or readers' set: GET's error is truthy) is extended and counted as held",
    ),
    m(
        "renew_shortens_readers",
        "renew.lua",
        "    if held then\n        pttl_at_least(key, ttl)",
        "    if held then\n        redis.call('PEXPIRE', key, ttl)",
        "a renewal that shortens a readers' set's TTL (PEXPIRE for pttl_at_least)",
    ),
    m(
        "renew_ids_shifted",
        "renew.lua",
        "renew(KEYS[i], ARGV[i + 2],",
        "renew(KEYS[i], ARGV[i + 1],",
        "an index off by one: each key is renewed for the id of the one before it (the \
         first for ARGV[2], the kinds)",
    ),
    m(
        "renew_run_out_permit_revived",
        "renew.lua",
        "held = tonumber(deadline) > now",
        "held = tonumber(deadline) > now - ttl",
        "a deadline compared with the wrong time: a permit that ran out less than a TTL \
         ago is revived",
    ),
    m(
        "renew_upgrader_not_extended",
        "renew.lua",
        "redis.call('PEXPIRE', upgrader, ttl)",
        "redis.call('PEXPIRE', upgrader, ttl / 2)",
        "an upgradable reader's renewal gives its upgrader key half the TTL: it expires \
         while the reader holds, and a second upgradable reader gets in",
    ),
    m(
        "renew_upgrader_of_another_extended",
        "renew.lua",
        "if replies[i] == 1 and redis.pcall('GET', upgrader) == ARGV[i + 2] then",
        "if replies[i] == 1 then",
        "an id check removed: a reader renewed as `u` extends the upgrader key of another \
         upgradable reader",
    ),
    m(
        "renew_upgrader_unheld_extended",
        "renew.lua",
        "if replies[i] == 1 and redis.pcall",
        "if replies[i] == 0 and redis.pcall",
        "a condition inverted: the upgrader key is extended only when its reader no longer \
         holds the lock key",
    ),
    // upgradable.lua
    m(
        "upgradable_upgrader_ignored",
        "upgradable.lua",
        "if upgrader ~= nil and upgrader ~= ARGV[1] and pttl ~= -2",
        "if false and upgrader ~= ARGV[1] and pttl ~= -2",
        "the upgrader check removed: a second upgradable reader gets in beside one that \
         still reads",
    ),
    m(
        "upgradable_stale_upgrader_blocks",
        "upgradable.lua",
        "\n    and redis.call('SISMEMBER', KEYS[1], upgrader) == 1 then",
        " then",
        "a departed upgrader's key (its id no longer a reader) keeps new upgradable \
         readers out until it expires",
    ),
    m(
        "upgradable_intent_ignored",
        "upgradable.lua",
        "    if intent then\n        return -1 - intent_pttl",
        "    if false then\n        return -1 - intent_pttl",
        "the intent ignored: a new upgradable reader gets in past a waiting writer",
    ),
    m(
        "upgradable_intent_blocks_members",
        "upgradable.lua",
        "if member == 0 then",
        "if true then",
        "a resent take (the id already a reader) is refused by an intent set since",
    ),
    m(
        "upgradable_upgrader_without_ttl",
        "upgradable.lua",
        "redis.call('SET', KEYS[4], ARGV[1], 'PX', ttl)",
        "redis.call('SET', KEYS[4], ARGV[1])",
        "the upgrader key without a TTL: it never expires",
    ),
    m(
        "upgradable_token_not_incremented",
        "upgradable.lua",
        "at_least_the_clock(last + 1, ARGV[4] == '1')",
        "at_least_the_clock(last, ARGV[4] == '1')",
        "the last token minted again",
    ),
    m(
        "upgradable_shortens_readers",
        "upgradable.lua",
        "pttl_at_least(KEYS[1], ttl, pttl)",
        "redis.call('PEXPIRE', KEYS[1], ttl)",
        "the readers' set's TTL set, not raised: a reader with a longer TTL loses the \
         lock early",
    ),
    // upgrade.lua
    m(
        "upgrade_other_readers_ignored",
        "upgrade.lua",
        "if resent or redis.call('SCARD', KEYS[1]) == 1 then",
        "if true then",
        "the other readers ignored: the upgrade takes the write lock beside them",
    ),
    m(
        "upgrade_upgrader_check_removed",
        "upgrade.lua",
        "if not resent and upgrader ~= ARGV[1] then",
        "if false then",
        "the upgrader check removed: a plain reader (or a departed upgrader) upgrades",
    ),
    m(
        "upgrade_reader_reply_as_not_held",
        "upgrade.lua",
        "    return {'reader'}",
        "    return 0",
        "a reader that is no longer the upgradable one is told it holds nothing, so the \
         crate takes its lock as lost and never releases its id",
    ),
    m(
        "upgrade_resent_refused",
        "upgrade.lua",
        "local resent = holder == ARGV[1]",
        "local resent = false",
        "a resent upgrade (the key already this id's string) is refused as not held",
    ),
    m(
        "upgrade_intent_of_another_deleted",
        "upgrade.lua",
        "    if intent == ARGV[1] then\n        redis.call('DEL', KEYS[2])",
        "    if intent then\n        redis.call('DEL', KEYS[2])",
        "an upgrade deletes a waiting writer's intent, letting new readers past it once \
         the upgraded writer leaves",
    ),
    m(
        "upgrade_wait_overwrites_intent",
        "upgrade.lua",
        "    if intent == nil then\n        redis.call('SET', KEYS[2], ARGV[1], 'PX', ttl)",
        "    if intent ~= ARGV[1] then\n        redis.call('SET', KEYS[2], ARGV[1], 'PX', ttl)",
        "a waiting upgrade overwrites a waiting writer's intent with its own",
    ),
    m(
        "upgrade_try_sets_intent",
        "upgrade.lua",
        "if op == 'wait' then",
        "if op ~= 'plain' then",
        "a single attempt (try_upgrade) sets the intent",
    ),
    m(
        "upgrade_plain_keeps_upgrader",
        "upgrade.lua",
        "        redis.call('DEL', KEYS[4])\n        publish(",
        "        publish(",
        "back to a plain reader, the id stays the upgrader: no other upgradable reader \
         gets in",
    ),
    m(
        "upgrade_upgrader_kept",
        "upgrade.lua",
        "    if upgrader == ARGV[1] then\n        redis.call('DEL', KEYS[4])\n    end\n    if intent",
        "    if intent",
        "the upgraded writer keeps the upgrader key",
    ),
    m(
        "upgrade_writer_without_ttl",
        "upgrade.lua",
        "redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)",
        "redis.call('SET', KEYS[1], ARGV[1])",
        "the upgraded writer's key without a TTL",
    ),
    m(
        "upgrade_token_not_incremented",
        "upgrade.lua",
        "at_least_the_clock(last + 1, ARGV[7] == '1')",
        "at_least_the_clock(last, ARGV[7] == '1')",
        "the upgraded writer's token is the last one again",
    ),
    // semaphore.lua
    m(
        "semaphore_permits_off_by_one",
        "semaphore.lua",
        "if holds or live + ahead < permits then",
        "if holds or live + ahead <= permits then",
        "a permit count off by one: permits + 1 holders at once",
    ),
    m(
        "semaphore_run_out_counted",
        "semaphore.lua",
        "local live = redis.call('ZCOUNT', KEYS[1], string.format('(%.0f', now), '+inf')",
        "local live = redis.call('ZCARD', KEYS[1])",
        "holders whose deadline has passed counted as live: a crashed holder's permit \
         is not free when it runs out",
    ),
    m(
        "semaphore_purge_skipped",
        "semaphore.lua",
        "    redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])\n    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)\n",
        "    redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])\n",
        "a purge skipped: run-out holders stay in the sorted set after a grant",
    ),
    m(
        "semaphore_resend_not_recognised",
        "semaphore.lua",
        "local holds = own and tonumber(own) > now",
        "local holds = own and tonumber(own) < now",
        "a deadline compared the wrong way: a holder's resent request is blocked when \
         the permits are taken, and a run-out holder gets its permit back past the count",
    ),
    m(
        "semaphore_wait_ignores_holders",
        "semaphore.lua",
        "local wait = until_first_deadline(KEYS[1], now, ttl)",
        "local wait = ttl",
        "a blocked request told to wait a whole TTL, not until the first holder's \
         deadline",
    ),
    m(
        "semaphore_fence_ttl_dropped",
        "semaphore.lua",
        "redis.call('SET', KEYS[2], string.format('%.0f', token), 'PX', ARGV[4])",
        "redis.call('SET', KEYS[2], string.format('%.0f', token))",
        "a TTL dropped: the semaphore's fence counter lives for ever",
    ),
    // exec.lua
    m(
        "exec_writer_check_loosened",
        "exec.lua",
        "return value == id",
        "return value ~= false",
        "exec's held check loosened: any writer's lock counts as held, so a pipeline runs \
         under another's lock",
    ),
    m(
        "exec_reader_check_loosened",
        "exec.lua",
        "return redis.call('SISMEMBER', lock, id) == 1",
        "return redis.call('SCARD', lock) > 0",
        "exec's held check loosened: any readers' set counts as held by every id",
    ),
    m(
        "exec_permit_deadline_ignored",
        "exec.lua",
        "return deadline ~= false and tonumber(deadline) > now_ms()",
        "return deadline ~= false",
        "exec's held check loosened: a permit whose deadline has passed still runs the \
         pipeline",
    ),
    m(
        "exec_replies_shifted",
        "exec.lua",
        "replies[command + 1] = reply",
        "replies[command] = reply",
        "an index off by one: each command's reply overwrites the one before (the first \
         the status)",
    ),
    m(
        "exec_first_lock_only",
        "exec.lua",
        "for i = 1, m do",
        "for i = 1, 1 do",
        "a set's exec checks its first key only: the pipeline runs while another key of \
         the set is lost",
    ),
    m(
        "exec_not_held_index_first",
        "exec.lua",
        "return {0, i}",
        "return {0, 1}",
        "the key not held misnamed: the guard blames (and cancels for) the wrong key of \
         its set",
    ),
    m(
        "exec_command_keys_after_one_lock",
        "exec.lua",
        "local key_at, arg_at, command = m + 1, 3, 0",
        "local key_at, arg_at, command = 2, 3, 0",
        "the commands' keys read from KEYS[2] on, as before several lock keys: a set's \
         pipeline runs its commands on its own lock keys",
    ),
    // force_unlock.lua
    m(
        "force_unlock_fence_not_raised",
        "force_unlock.lua",
        "    redis.call('INCR', KEYS[2])\n",
        "",
        "force_unlock's fence mark skipped: the counter is not raised, so the granted mark \
         is above it",
    ),
    m(
        "force_unlock_granted_not_marked",
        "force_unlock.lua",
        "        redis.call('SET', KEYS[3], string.format('%.0f', tonumber(fence) + 1), 'PX', fence_pttl)\n",
        "",
        "force_unlock's granted mark skipped: quorum mode's refresh takes back a lock \
         that was released by force",
    ),
    m(
        "force_unlock_granted_not_above",
        "force_unlock.lua",
        "string.format('%.0f', tonumber(fence) + 1)",
        "string.format('%.0f', tonumber(fence))",
        "the granted mark equals the last token, not one above it: a holder removed by \
         force with the last token takes the lock back",
    ),
    m(
        "force_unlock_live_inverted",
        "force_unlock.lua",
        "    if live == 0 then\n        held = 0",
        "    if live > 0 then\n        held = 0",
        "a condition inverted: a semaphore with live permits is reported as not held, \
         one whose permits all ran out as held",
    ),
    m(
        "force_unlock_publish_skipped",
        "force_unlock.lua",
        "local published = publish(ARGV[1], ARGV[2], ARGV[3])",
        "local published = nil",
        "a publish skipped: waiters are not told of the forced release (the reply's +2 \
         goes)",
    ),
    // leader.lua
    m(
        "leader_record_from_lock_key",
        "leader.lua",
        "local record = redis.pcall('GET', KEYS[2])",
        "local record = redis.pcall('GET', KEYS[1])",
        "the wrong key read: the record is the lock's value",
    ),
    m(
        "leader_semaphore_refused",
        "leader.lua",
        "if lock_type ~= 'set' and lock_type ~= 'zset' then",
        "if lock_type ~= 'set' then",
        "a semaphore's sorted set refused as a foreign type, instead of read as no leader",
    ),
    m(
        "leader_noexpiry_accepted",
        "leader.lua",
        "if pttl == -1 then\n    return {'noexpiry', KEYS[1]}\nend",
        "",
        "a lock key with no TTL read as a leader, not refused",
    ),
    // proclaim.lua
    m(
        "proclaim_without_holding",
        "proclaim.lua",
        "if holder ~= ARGV[1] then\n    return 0",
        "if not holder then\n    return 0",
        "proclaim writing without holding: any writer's lock lets an id write the \
         leader's record",
    ),
    m(
        "proclaim_ttl_dropped",
        "proclaim.lua",
        "redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])",
        "redis.call('SET', KEYS[2], ARGV[2])",
        "a TTL dropped: the leader's record lives for ever",
    ),
    m(
        "proclaim_publish_skipped",
        "proclaim.lua",
        "local published = publish(KEYS[2], ARGV[2], ARGV[4])",
        "local published = nil",
        "a publish skipped: observers are not told of the new record (the reply's +2 \
         goes)",
    ),
    // downgrade.lua
    m(
        "downgrade_id_not_kept",
        "downgrade.lua",
        "    redis.call('DEL', KEYS[1])\n    redis.call('SADD', KEYS[1], ARGV[1])\n",
        "    redis.call('DEL', KEYS[1])\n",
        "downgrade not keeping the id: the write lock is released, not turned into a \
         read lock, so another writer may take it",
    ),
    m(
        "downgrade_ttl_dropped",
        "downgrade.lua",
        "    redis.call('PEXPIRE', KEYS[1], ttl)\n",
        "",
        "a PEXPIRE removed: the readers' set made by a downgrade has no TTL",
    ),
    m(
        "downgrade_resend_shortens",
        "downgrade.lua",
        "    pttl_at_least(KEYS[1], ttl)",
        "    redis.call('PEXPIRE', KEYS[1], ttl)",
        "a resent downgrade shortens the readers' set's TTL (PEXPIRE for pttl_at_least)",
    ),
    m(
        "downgrade_id_check_removed",
        "downgrade.lua",
        "if redis.pcall('GET', KEYS[1]) == ARGV[1] then",
        "if type(redis.pcall('GET', KEYS[1])) == 'string' then",
        "an id check removed: any id downgrades another writer's lock into its own read \
         lock",
    ),
    // fence.lua
    m(
        "fence_raises_one_key",
        "fence.lua",
        "if granted < token then\n    redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])\nend\n",
        "",
        "fence.lua raising only one key: the granted token stays behind, so quorum mode's \
         refresh takes back a lock another holder was granted",
    ),
    m(
        "fence_lowers_counter",
        "fence.lua",
        "if last < token then",
        "if last ~= token then",
        "a condition loosened: a counter above the token is lowered to it, so the next \
         token repeats one already granted",
    ),
    m(
        "fence_ttl_dropped",
        "fence.lua",
        "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])",
        "redis.call('SET', KEYS[1], ARGV[1])",
        "a TTL dropped: the raised counter lives for ever",
    ),
    // retake.lua
    m(
        "retake_granted_ignored",
        "retake.lua",
        "if granted > token then\n    return 0\nend",
        "",
        "retake ignoring the granted token: a lock released by force, or granted to \
         another since, is taken back",
    ),
    m(
        "retake_granted_ge",
        "retake.lua",
        "if granted > token then",
        "if granted >= token then",
        "a condition off by one: a node that granted exactly the guard's token (the \
         normal case after fence.lua) is not taken back",
    ),
    m(
        "retake_writer_id_check_removed",
        "retake.lua",
        "redis.call('GET', KEYS[1]) ~= ARGV[1] then",
        "redis.call('GET', KEYS[1]) == nil then",
        "an id check removed (GET never returns nil): a writer's retake overwrites \
         another writer's lock",
    ),
    m(
        "retake_reader_shortens",
        "retake.lua",
        "    pttl_at_least(KEYS[1], ttl, pttl)",
        "    redis.call('PEXPIRE', KEYS[1], ttl)",
        "a reader's retake shortens the readers' set's TTL (PEXPIRE for pttl_at_least)",
    ),
    m(
        "retake_intent_deleted_when_anothers",
        "retake.lua",
        "    if intent == ARGV[1] then\n        redis.call('DEL', KEYS[2])",
        "    if intent then\n        redis.call('DEL', KEYS[2])",
        "an intent deleted when another's: a writer's retake wipes the intent of a \
         waiting writer",
    ),
    m(
        "retake_fence_not_raised",
        "retake.lua",
        "if last < token then\n    redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[5])\nend\n",
        "",
        "the counter not raised to the guard's token on a node that restarted empty: \
         its next token may repeat one already granted",
    ),
    // inspect.lua
    m(
        "inspect_run_out_permits_held",
        "inspect.lua",
        "holders = redis.call('ZRANGEBYSCORE', KEYS[1], string.format('(%.0f', now), '+inf')",
        "holders = redis.call('ZRANGE', KEYS[1], 0, -1)",
        "permits whose deadline passed are shown as holders: an operator sees a semaphore \
         full that the next request finds free",
    ),
    m(
        "inspect_queue_keeps_passed",
        "inspect.lua",
        "gone[member] = true",
        "gone[member] = false",
        "waiters whose deadline passed are shown queued, though the next fair request \
         drops them",
    ),
    m(
        "inspect_fence_pttl_of_lock",
        "inspect.lua",
        "fence_pttl = redis.call('PTTL', KEYS[3])",
        "fence_pttl = redis.call('PTTL', KEYS[1])",
        "the fence key's PTTL read off the lock key",
    ),
    m(
        "inspect_semaphore_as_lock",
        "inspect.lua",
        "local lock_types = {string = true, set = true}",
        "local lock_types = {string = true, set = true, zset = true}",
        "a lock's inspection accepts a semaphore's sorted set instead of refusing it as \
         a type a lock does not use",
    ),
    m(
        "inspect_noexpiry_accepted",
        "inspect.lua",
        "    if pttl == -1 then\n        return nil, {'noexpiry', key}\n    end\n",
        "",
        "a key with no TTL (which no request of the crate leaves) is shown as if it \
         were the crate's",
    ),
    m(
        "inspect_intent_value_dropped",
        "inspect.lua",
        "intent_value = redis.call('GET', KEYS[2])",
        "intent_value = ''",
        "the waiting writer's id not shown",
    ),
];

/// Mutations that were tried and dropped: each changes nothing the scripts decide
/// (`why` says why), so no test could catch it. Kept so that nobody adds them again.
pub const EQUIVALENT: &[Mutation] = &[
    m(
        "unlock_holders_key_counted",
        "unlock.lua",
        "    nkeys = nkeys - 1\n",
        "",
        "equivalent: the holders hash then stands where the intent (GET fails on a hash) \
         or the queue's deadlines (ZREM fails on a hash) are read, and with \"u\" the \
         upgrader's string where the queue is (ZREM fails on a string): every call on \
         them is a pcall that fails and changes nothing",
    ),
    m(
        "base_pttl_at_least_le",
        "base.lua",
        "if (pttl or redis.call('PTTL', key)) < ttl then",
        "if (pttl or redis.call('PTTL', key)) <= ttl then",
        "equivalent: when the PTTL is exactly `ttl`, PEXPIRE sets it to `ttl` again; the \
         key's expiry is the same either way",
    ),
    m(
        "base_publish_sharded_inverted",
        "base.lua",
        "if sharded == '1' then",
        "if sharded ~= '1' then",
        "equivalent on one standalone Redis 7 (the differential test's server): SPUBLISH \
         there reaches the same subscribers as PUBLISH and replies a count just the same; \
         it differs only on a cluster, which the model does not model",
    ),
    m(
        "shared_queue_ahead_includes_self",
        "shared.lua",
        "return redis.call('ZRANGE', q, 0, rank - 1)",
        "return redis.call('ZRANGE', q, 0, rank)",
        "equivalent: queue_ahead's only caller, rlock.lua, looks for a writer ('w:') \
         among the members ahead of a reader; the member added is the reader itself",
    ),
    m(
        "rlock_counting_restart_condition",
        "rlock.lua",
        "if floored ~= token or token < 1e15 then",
        "if floored ~= token then",
        "equivalent while the server clock is past 10^15 us (since 2001-09): a counter \
         below 10^15 is always floored to the clock, so `floored ~= token` already holds",
    ),
];
