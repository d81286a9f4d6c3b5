//! Group commit across threads: requests that arrive while a commit is
//! under way share the next transaction and its one fsync.
//!
//! Leader/follower, with no timer. A request that finds no commit under
//! way and nobody waiting becomes the leader at once and runs alone, so a
//! lone request pays one uncontended mutex more than it would without
//! grouping, and never waits for company. A request that finds a leader
//! busy queues its bytes and waits. When the leader is done it hands over:
//! one waiter takes the whole queue and runs it as one batch
//! (the rules of `handle_batch`), publishes every
//! answer, and wakes the others. Wake hooks run after the answers are out,
//! without the database lock and without leadership, once per bot per
//! group.

use crate::error::ApiError;
use crate::txn::TxEffects;
use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};

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
}

#[derive(Default)]
pub(crate) struct Group {
    state: Mutex<State>,
    turn: Condvar,
}

#[derive(Default)]
struct State {
    /// Someone is running a commit now.
    leading: bool,
    /// Requests waiting for the next commit, with their ticket.
    queue: Vec<(u64, Vec<u8>)>,
    /// Answers not yet collected by their waiter.
    answers: HashMap<u64, Vec<u8>>,
    next_ticket: u64,
    /// Threads blocked on `turn`: a lone request wakes nobody (no syscall).
    sleepers: usize,
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
    pub fn pause(&self) {
        let mut st = self.lock();
        while st.leading {
            st = sleep(self, st);
        }
        st.leading = true;
    }

    pub fn resume(&self) {
        hand_over(self);
    }
}

/// What a group needs of the service.
pub(crate) trait Runner {
    /// One request in its own transaction, and the effects of its commit.
    fn run_alone(&self, request: &[u8]) -> (Vec<u8>, TxEffects);
    /// Many in one transaction, with `handle_batch`'s rules.
    fn run_batch(&self, requests: &[&[u8]]) -> (Vec<Vec<u8>>, TxEffects);
    /// Wake-ups, after the answers are out.
    fn apply_effects(&self, fx: TxEffects);
    /// Puts a group's requests in the order they should run (any order is
    /// valid: they arrived concurrently).
    fn lock_order(&self, _jobs: &mut [(u64, Vec<u8>)]) {}
}

/// Runs `request`, alone (through `alone`, which the caller may have
/// prepared already) or in a group, and returns its answer.
pub(crate) fn submit(
    group: &Group,
    svc: &impl Runner,
    request: &[u8],
    alone: impl FnOnce() -> (Vec<u8>, TxEffects),
) -> Vec<u8> {
    let mut st = group.lock();
    st.stats.requests += 1;
    if !st.leading && st.queue.is_empty() {
        // Nothing under way: run now, borrowing the caller's bytes.
        st.leading = true;
        st.stats.groups += 1;
        drop(st);
        let (out, fx) = guarded(alone, || (crash(), TxEffects::default()));
        hand_over(group);
        svc.apply_effects(fx);
        return out;
    }
    let ticket = st.next_ticket;
    st.next_ticket += 1;
    st.queue.push((ticket, request.to_vec()));
    loop {
        if let Some(answer) = st.answers.remove(&ticket) {
            return answer;
        }
        if !st.leading {
            // Our turn: take everyone waiting, ourselves included.
            st.leading = true;
            st.stats.groups += 1;
            let mut jobs = std::mem::take(&mut st.queue);
            drop(st);
            svc.lock_order(&mut jobs);
            let requests: Vec<&[u8]> = jobs.iter().map(|(_, r)| r.as_slice()).collect();
            let (outs, fx) = guarded(
                || match requests[..] {
                    [one] => {
                        let (out, fx) = svc.run_alone(one);
                        (vec![out], fx)
                    }
                    _ => svc.run_batch(&requests),
                },
                || (vec![crash(); requests.len()], TxEffects::default()),
            );
            let mut st = group.lock();
            let mut mine = None;
            for ((t, _), out) in jobs.into_iter().zip(outs) {
                if t == ticket {
                    mine = Some(out);
                } else {
                    st.answers.insert(t, out);
                }
            }
            st.leading = false;
            let sleepers = st.sleepers;
            drop(st);
            if sleepers > 0 {
                group.turn.notify_all();
            }
            svc.apply_effects(fx);
            return mine.unwrap_or_else(crash);
        }
        st = sleep(group, st);
    }
}

fn sleep<'a>(group: &'a Group, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
    st.sleepers += 1;
    let mut st = group.turn.wait(st).unwrap_or_else(|e| e.into_inner());
    st.sleepers -= 1;
    st
}

/// Leadership ends: whoever waits may take the next turn.
fn hand_over(group: &Group) {
    let mut st = group.lock();
    st.leading = false;
    let sleepers = st.sleepers;
    drop(st);
    // Waiters, and a `pause` waiting for its turn.
    if sleepers > 0 {
        group.turn.notify_all();
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
