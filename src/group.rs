//! Group commit across threads: requests that arrive while a commit is
//! under way share the next transaction and its one fsync.
//!
//! Leader/follower, with no timer. A request that finds no commit under
//! way and nobody waiting becomes the leader at once and runs alone, so a
//! lone request pays one uncontended mutex more than it would without
//! grouping, and never waits for company. A request that finds a leader
//! busy queues its bytes and sleeps. As soon as the leader's transaction
//! has committed it hands over: the first waiter is woken to take the
//! whole queue and run it as one batch (the rules of `Service::handle`'s runs),
//! while the old leader waits for its group's fsync (see
//! [`crate::store::wal`]): one group's disk wait overlaps the next
//! group's statements. Then it publishes its group's answers and wakes
//! exactly their threads. Wake hooks run after the answers are out,
//! without the database lock and without leadership, once per bot per
//! group.

use crate::entry::{Input, Owned};
use crate::error::ApiError;
use crate::txn::TxEffects;
use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::Thread;

/// How many requests were written, and in how many transactions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Requests that went through `handle_request`, getMe aside (it reads
    /// a cached identity and takes no transaction).
    pub requests: u64,
    /// Transactions they took: fewer than `requests` when grouping happened.
    pub groups: u64,
    /// Requests waiting for the next commit right now.
    pub waiting: u64,
    /// Round trips to a database server (PostgreSQL) for everything the
    /// service did; 0 on SQLite.
    pub round_trips: u64,
    /// Commits made durable by the service's own WAL sync, run after the
    /// database lock is released (a file database with `synchronous =
    /// full`; 0 elsewhere).
    pub durable_commits: u64,
    /// The `fdatasync` calls that took: fewer than `durable_commits` when
    /// groups shared one.
    pub syncs: u64,
}

#[derive(Default)]
pub(crate) struct Group {
    state: Mutex<State>,
    /// For `pause`, waiting for the leadership to be free.
    free: Condvar,
}

#[derive(Default)]
struct State {
    /// Someone is running a transaction now, or has been handed the turn.
    leading: bool,
    /// The waiter handed the turn, which has not taken the queue yet.
    promoted: Option<u64>,
    /// Requests waiting for the next commit, with their ticket.
    queue: Vec<(u64, Owned)>,
    /// The sleeping thread of each queued or running ticket: each is woken
    /// for its turn or its answer, never for someone else's.
    waiters: HashMap<u64, Thread>,
    /// Answers not yet collected by their waiter.
    answers: HashMap<u64, Vec<u8>>,
    next_ticket: u64,
    /// `pause` calls waiting on `free`.
    pausers: usize,
    stats: CommitStats,
}

impl Group {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every step leaves the state consistent: a poisoned lock is usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn stats(&self) -> CommitStats {
        let st = self.lock();
        CommitStats { waiting: st.queue.len() as u64, ..st.stats }
    }

    /// Takes the leadership without running anything: requests queue up
    /// until `resume`. Waits for a commit under way to end first.
    #[cfg(feature = "test-hooks")]
    pub fn pause(&self) {
        let mut st = self.lock();
        st.pausers += 1;
        while st.leading {
            st = self.free.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.pausers -= 1;
        st.leading = true;
    }

    #[cfg(feature = "test-hooks")]
    pub fn resume(&self) {
        hand_over(self);
    }
}

/// What a group needs of the service.
pub(crate) trait Runner {
    /// One request in its own transaction, and the effects of its commit.
    fn run_alone(&self, request: Input<'_>) -> (Vec<u8>, TxEffects);
    /// Many in one transaction, with the rules of `Service::handle`'s runs, in any order
    /// the runner prefers (they arrived concurrently); the answers come
    /// back in the requests' order.
    fn run_group(&self, requests: &[Input<'_>]) -> (Vec<Vec<u8>>, TxEffects);
    /// Makes durable what the answers depend on, before they leave
    /// (turning a success into an error if that fails).
    fn settle(&self, fx: &mut TxEffects, outs: &mut [Vec<u8>]);
    /// Wake-ups, after the answers are out.
    fn apply_effects(&self, fx: TxEffects);
}

/// Runs `request`, alone (through `alone`, which the caller may have
/// prepared already) or in a group, and returns its answer.
pub(crate) fn submit(
    group: &Group,
    svc: &impl Runner,
    request: Input<'_>,
    alone: impl FnOnce() -> (Vec<u8>, TxEffects),
) -> Vec<u8> {
    let mut st = group.lock();
    st.stats.requests += 1;
    if !st.leading {
        // Nothing under way (so nobody queued): run now, borrowing the
        // caller's bytes.
        st.leading = true;
        st.stats.groups += 1;
        drop(st);
        return run_now(group, svc, alone);
    }
    let ticket = st.next_ticket;
    st.next_ticket += 1;
    st.queue.push((ticket, request.to_owned()));
    st.waiters.insert(ticket, std::thread::current());
    loop {
        if let Some(answer) = st.answers.remove(&ticket) {
            return answer;
        }
        if st.promoted == Some(ticket) {
            // Our turn: take everyone waiting, ourselves included.
            st.promoted = None;
            st.stats.groups += 1;
            let jobs = std::mem::take(&mut st.queue);
            drop(st);
            return lead(group, svc, jobs, ticket);
        }
        drop(st);
        // Woken for our turn or our answer; a spurious return loops.
        std::thread::park();
        st = group.lock();
    }
}

/// The leader with nobody queued: runs its own request alone, hands the
/// turn over, settles and applies the effects.
fn run_now(group: &Group, svc: &impl Runner, alone: impl FnOnce() -> (Vec<u8>, TxEffects)) -> Vec<u8> {
    let (out, mut fx) = guarded(alone, || (crash(), TxEffects::default()));
    hand_over(group);
    let mut outs = [out];
    settle(svc, &mut fx, &mut outs);
    svc.apply_effects(fx);
    let [out] = outs;
    out
}

/// The waiter whose turn came (`ticket`) runs everyone queued (`jobs`,
/// its own request among them) in one transaction, hands the turn over,
/// settles, hands each waiter its answer and returns its own.
fn lead(group: &Group, svc: &impl Runner, jobs: Vec<(u64, Owned)>, ticket: u64) -> Vec<u8> {
    let requests: Vec<Input<'_>> = jobs.iter().map(|(_, r)| r.input()).collect();
    let (mut outs, mut fx) = guarded(
        || match requests[..] {
            [one] => {
                let (out, fx) = svc.run_alone(one);
                (vec![out], fx)
            }
            _ => svc.run_group(&requests),
        },
        || (vec![crash(); requests.len()], TxEffects::default()),
    );
    hand_over(group);
    settle(svc, &mut fx, &mut outs);
    let mut st = group.lock();
    let mut mine = None;
    let mut wake = Vec::with_capacity(jobs.len());
    for ((t, _), out) in jobs.into_iter().zip(outs) {
        let waiter = st.waiters.remove(&t);
        if t == ticket {
            mine = Some(out);
        } else {
            st.answers.insert(t, out);
            wake.extend(waiter);
        }
    }
    drop(st);
    for w in wake {
        w.unpark();
    }
    svc.apply_effects(fx);
    mine.unwrap_or_else(crash)
}

/// [`Runner::settle`]; a panic there must not strand the waiters.
fn settle(svc: &impl Runner, fx: &mut TxEffects, outs: &mut [Vec<u8>]) {
    guarded(|| svc.settle(fx, outs), || ());
}

/// The transaction is over: the first waiter (if any) takes the next turn,
/// else the leadership is free.
fn hand_over(group: &Group) {
    let mut st = group.lock();
    if let Some(&(next, _)) = st.queue.first() {
        st.promoted = Some(next);
        let waiter = st.waiters.get(&next).cloned();
        drop(st);
        if let Some(w) = waiter {
            w.unpark();
        }
        return;
    }
    st.leading = false;
    let pausers = st.pausers;
    drop(st);
    if pausers > 0 {
        group.free.notify_all();
    }
}

/// Runs `f`; a panic that escaped the service's own guards becomes `or()`,
/// so no waiter is left without an answer.
fn guarded<T>(f: impl FnOnce() -> T, or: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| or())
}

fn crash() -> Vec<u8> {
    ApiError::internal("a bug was caught; the request was rolled back").into_response()
}
