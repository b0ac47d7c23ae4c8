//! Seeded bugs of the model itself: each a wrong decision a script could take, switched
//! on in one run of the checker (`Store::bug`), which must then find the property it
//! breaks (`checker/runs.rs`, `each_seeded_bug_of_the_model_breaks_its_property`). They
//! show that each property can fail: none holds only because the model cannot break it.
//! A wrong decision that no fault-free run of the checker reaches (a renewal that
//! extends another writer's key, a readers' TTL set rather than raised, which only
//! differing TTLs tell apart) is the differential test's to catch, as a mutation of the
//! Lua (`mutants/`).
//! (The seeded bugs of the Lua scripts, which the differential test catches, are
//! `mutants/`.)

/// A wrong decision, named by the script that takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bug {
    /// rlock.lua lets a new reader in past a waiting writer's intent.
    RlockIgnoresIntent,
    /// lock.lua takes a free lock whatever the fair queue holds.
    LockIgnoresQueue,
    /// lock.lua sets the writer's key without a TTL.
    LockWithoutTtl,
    /// lock.lua mints the last token again instead of the next.
    TokenNotIncremented,
    /// semaphore.lua grants one permit more than the count.
    SemaphoreOffByOne,
    /// semaphore.lua takes no account of the waiters queued ahead.
    SemaphoreIgnoresQueue,
    /// downgrade.lua keeps the writer's PTTL instead of setting the TTL.
    DowngradeKeepsTtl,
    /// unlock.lua deletes a writer's key whoever holds it.
    UnlockIgnoresId,
    /// exec.lua runs the commands without checking the lock.
    ExecUnchecked,
    /// exec.lua refuses a guard that does not hold, after running its commands.
    ExecRunsWhenRefusing,
    /// leader.lua names the record's id as the holder, whoever holds the lock.
    LeaderNamesRecord,
    /// proclaim.lua writes the record without checking the lock.
    ProclaimUnchecked,
    /// upgradable.lua lets a second upgradable reader in beside one that still reads.
    UpgradableIgnoresUpgrader,
    /// upgradable.lua lets a new upgradable reader in past a waiting writer's intent.
    UpgradableIgnoresIntent,
    /// upgrade.lua takes a free lock (the key gone) as a resent upgrade, whoever came
    /// between.
    UpgradeTakesAFreeLock,
    /// lock_all.lua checks and takes the first key of a set only.
    LockAllChecksFirstOnly,
    /// lock_all.lua lets a set read a key that a writer holds.
    LockAllIgnoresReadHolder,
    /// lock_all.lua keeps (or sets) a set's intents when another waiter's intent blocks
    /// one of its read keys.
    LockAllKeepsIntentWhenBlockedByIntent,
    /// attach.lua moves the hold without checking that the old id holds it.
    AttachUnchecked,
    /// attach.lua adds the new id to a readers' set or a semaphore without removing the
    /// old one.
    AttachKeepsOldId,
    /// attach.lua leaves the old id's description.
    AttachKeepsOldDescription,
    /// unlock.lua leaves the released id's description.
    UnlockKeepsDescription,
    /// describe.lua keeps the descriptions of a semaphore's run-out or purged permits.
    DescribeKeepsRunOutPermits,
}
