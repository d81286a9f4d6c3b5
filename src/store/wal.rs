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
//!
//! Checkpoints leave the lock too. SQLite's own checkpoint runs inside the
//! COMMIT that crosses its threshold, with the database lock held: every
//! request waits while pages are copied and both files are synced.
//! Instead, a WAL hook records the WAL's size after each commit, and once
//! it passes [`CHECKPOINT_PAGES`] the thread that just delivered its
//! answers runs a `PASSIVE` checkpoint on a second connection of its own
//! ([`WalSync::checkpoint_if_due`]) while groups keep committing. Commits
//! made meanwhile are not copied, and SQLite writes the WAL from its
//! beginning again only after a checkpoint that copied everything; so
//! when the hook sees the WAL nearly copied, it copies the rest inline (a
//! few pages, nothing else writing) and the next commit reuses the file
//! from the start. If nobody runs the off-lock checkpoint (writes that
//! are not requests), the hook does the whole checkpoint inline at
//! [`BACKSTOP_PAGES`].

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::wal::CheckpointMode;

use super::sqlite::CHECKPOINT_PAGES;

/// At most this many pages left to copy: the hook finishes the checkpoint
/// inline, so that the WAL starts again from its beginning.
const CATCH_UP_PAGES: i64 = 1_000;
/// A checkpoint runs inline whatever else happens once the WAL is this big.
const BACKSTOP_PAGES: i64 = 4 * CHECKPOINT_PAGES;

pub struct WalSync {
    /// The `-wal` file next to the database.
    path: PathBuf,
    /// Commits that returned from SQLite, counted under the database lock.
    committed: AtomicU64,
    /// Commits known to be on disk.
    durable: AtomicU64,
    /// `fdatasync` calls made.
    syncs: AtomicU64,
    /// How long each took (`botspace_wal_fsync_duration_seconds`).
    pub(crate) sync_latency: crate::histogram::Histogram,
    /// The WAL file, opened at the first sync; the lock also makes syncs
    /// take turns, so a waiter finds its commit covered by the sync it
    /// waited for.
    file: Mutex<Option<File>>,
    /// The database file, for the checkpoint connection.
    db: PathBuf,
    wal_pages: Arc<WalPages>,
    /// The connection that checkpoints without the database lock, opened
    /// at the first checkpoint; busy means a checkpoint is under way.
    checkpointer: Mutex<Checkpointer>,
}

enum Checkpointer {
    NotYet,
    Open(rusqlite::Connection),
    /// It could not be opened: the hook's inline checkpoint at
    /// [`BACKSTOP_PAGES`] does the work, rather than a new attempt after
    /// every answer.
    Failed,
}

/// What the WAL hook saw, shared with [`WalSync`].
#[derive(Default)]
struct WalPages {
    /// Pages in the WAL after the last commit.
    written: AtomicI64,
    /// Of these, pages a checkpoint has copied into the database.
    copied: AtomicI64,
}

impl WalSync {
    /// [`WalSync::for_connection`] for a store's connection: `None` for a
    /// store that is not a SQLite file (a server syncs its own commits).
    pub fn for_conn(conn: &mut super::Conn, full: bool) -> Option<WalSync> {
        conn.sqlite().and_then(|c| WalSync::for_connection(c, full))
    }

    /// For a file database in WAL mode whose commits must be durable;
    /// `None` otherwise (`:memory:`, `synchronous = NORMAL`, other VFSes).
    /// Installs the WAL hook that schedules checkpoints (it replaces
    /// SQLite's `wal_autocheckpoint`).
    pub fn for_connection(conn: &mut rusqlite::Connection, full: bool) -> Option<WalSync> {
        if !full {
            return None;
        }
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).ok()?;
        let db = conn.path().filter(|p| !p.is_empty())?;
        if !mode.eq_ignore_ascii_case("wal") || !std::path::Path::new(db).is_absolute() {
            return None;
        }
        let (path, db) = (PathBuf::from(format!("{db}-wal")), PathBuf::from(db));
        let wal_pages = Arc::new(WalPages::default());
        let hook_pages = Arc::clone(&wal_pages);
        conn.wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, pages: std::ffi::c_int| {
            let pages = i64::from(pages);
            if hook_pages.written.swap(pages, Ordering::AcqRel) > pages {
                // The WAL started again from its beginning.
                hook_pages.copied.store(0, Ordering::Release);
            }
            let behind = pages - hook_pages.copied.load(Ordering::Acquire);
            if (pages >= CHECKPOINT_PAGES && behind <= CATCH_UP_PAGES) || pages >= BACKSTOP_PAGES {
                // Under the database lock, so nothing is appended meanwhile
                // and the checkpoint copies everything. A failure (another
                // checkpoint under way) leaves it for a later commit; this
                // commit has happened, so it must not report one.
                if let Ok((_, copied)) = wal.checkpoint_v2(CheckpointMode::PASSIVE) {
                    hook_pages.copied.store(i64::from(copied), Ordering::Release);
                }
            }
            Ok(())
        }))
        .ok()?;
        Some(WalSync {
            path,
            committed: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            sync_latency: crate::histogram::Histogram::new(crate::histogram::SYNC_US),
            file: Mutex::new(None),
            db,
            wal_pages,
            checkpointer: Mutex::new(Checkpointer::NotYet),
        })
    }

    /// Runs a checkpoint without the database lock when one is due and
    /// none is under way. Call it once answers have left: the caller's
    /// thread does the copying and the database file's sync.
    pub fn checkpoint_if_due(&self) {
        let pages = &self.wal_pages;
        let written = pages.written.load(Ordering::Acquire);
        if written < CHECKPOINT_PAGES || written - pages.copied.load(Ordering::Acquire) <= CATCH_UP_PAGES {
            return;
        }
        let Ok(mut conn) = self.checkpointer.try_lock() else { return };
        if let Checkpointer::NotYet = *conn {
            *conn = open_checkpointer(&self.db).map_or(Checkpointer::Failed, Checkpointer::Open);
        }
        if let Checkpointer::Open(c) = &*conn {
            // Should the WAL start again before this lands, the count is
            // stale: the next checkpoint then runs inline, once.
            if let Ok((_, copied)) = c.wal_checkpoint_v2(None::<&str>, CheckpointMode::PASSIVE) {
                pages.copied.fetch_max(i64::from(copied), Ordering::AcqRel);
            }
        }
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
            let started = crate::histogram::Timer::start();
            f.sync_data()?;
            if let Some(us) = started.micros() {
                self.sync_latency.observe(us);
            }
        }
        self.durable.fetch_max(target, Ordering::AcqRel);
        Ok(())
    }
}

/// A second connection to the database, used only to checkpoint: with
/// `synchronous = FULL` its checkpoints sync the WAL before copying it and
/// the database after.
fn open_checkpointer(db: &std::path::Path) -> rusqlite::Result<rusqlite::Connection> {
    use rusqlite::OpenFlags;
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let c = rusqlite::Connection::open_with_flags(db, flags)?;
    c.execute_batch("PRAGMA synchronous = FULL;")?;
    Ok(c)
}
