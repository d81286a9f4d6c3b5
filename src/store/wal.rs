//! The fsync of a group commit, taken out of SQLite's COMMIT so that it
//! runs without the database lock: while one group waits for the disk, the
//! next group already runs its statements.
//!
//! A group's transaction commits with `synchronous = NORMAL` (SQLite writes
//! the WAL frames and returns without syncing); the group then calls
//! [`WalSync::sync_to`] before any of its answers leave, which syncs the
//! WAL file with `fdatasync`. WAL frames are appended in commit order, so
//! one sync makes every commit that returned before it durable: a sync is
//! shared by every group waiting for it. Every other write (gateway acks,
//! imports, migrations) keeps `synchronous = FULL`, and SQLite's
//! checkpoints sync the WAL before they copy it, so nothing else changes.
//!
//! The rule that keeps "a 200 means committed" true: an answer or a
//! gateway frame leaves only once everything committed before it was read
//! is durable ([`WalSync::seen`] under the database lock, then
//! [`WalSync::sync_to`] without it). On the file system the WAL file keeps
//! its inode while the connection is open (SQLite truncates and rewrites
//! it, but deletes it only when the last connection closes), so syncing it
//! through a descriptor of our own syncs what SQLite wrote.

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

pub struct WalSync {
    /// The `-wal` file next to the database.
    path: PathBuf,
    /// Commits that returned from SQLite, counted under the database lock.
    committed: AtomicU64,
    /// Commits known to be on disk.
    durable: AtomicU64,
    /// `fdatasync` calls made.
    syncs: AtomicU64,
    /// The WAL file, opened at the first sync; the lock also makes syncs
    /// take turns, so a waiter finds its commit covered by the sync it
    /// waited for.
    file: Mutex<Option<File>>,
}

impl WalSync {
    /// For a file database in WAL mode whose commits must be durable;
    /// `None` otherwise (`:memory:`, `synchronous = NORMAL`, other VFSes).
    pub fn for_connection(conn: &rusqlite::Connection, full: bool) -> Option<WalSync> {
        if !full {
            return None;
        }
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).ok()?;
        let db = conn.path().filter(|p| !p.is_empty())?;
        if !mode.eq_ignore_ascii_case("wal") || !std::path::Path::new(db).is_absolute() {
            return None;
        }
        Some(WalSync {
            path: PathBuf::from(format!("{db}-wal")),
            committed: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            file: Mutex::new(None),
        })
    }

    /// Counts a commit that just returned. Call with the database lock held.
    pub fn note_commit(&self) {
        self.committed.fetch_add(1, Ordering::AcqRel);
    }

    /// Everything a reader holding the database lock can see: pass it to
    /// [`WalSync::sync_to`] before what it read leaves the process.
    pub fn seen(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
    }

    /// (commits on disk, `fdatasync` calls made), for [`crate::CommitStats`].
    pub fn counts(&self) -> (u64, u64) {
        (self.durable.load(Ordering::Acquire), self.syncs.load(Ordering::Relaxed))
    }

    /// Returns once commit number `upto` (and all before it) is on disk.
    /// Usually a load and a compare; otherwise one `fdatasync`, or a wait
    /// for the one under way.
    pub fn sync_to(&self, upto: u64) -> std::io::Result<()> {
        if self.durable.load(Ordering::Acquire) >= upto {
            return Ok(());
        }
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if self.durable.load(Ordering::Acquire) >= upto {
            return Ok(());
        }
        // Every commit counted so far has returned, so its frames are in
        // the file: this sync covers all of them.
        let target = self.committed.load(Ordering::Acquire);
        if file.is_none() {
            *file = Some(std::fs::OpenOptions::new().read(true).write(true).open(&self.path)?);
        }
        if let Some(f) = file.as_ref() {
            self.syncs.fetch_add(1, Ordering::Relaxed);
            f.sync_data()?;
        }
        self.durable.fetch_max(target, Ordering::AcqRel);
        Ok(())
    }
}
