//! The `botspace-pages` SQLite VFS: the database file lives in the host's
//! storage as fixed-size blocks, read on demand, and each commit hands the
//! host only the blocks it changed, in one call.
//!
//! Why a VFS of our own: sqlite-wasm-rs's memory VFS keeps the whole file in
//! WebAssembly memory, so persisting it meant `exportDatabase` (the whole
//! image) after every write. Its OPFS VFSs need a dedicated browser worker,
//! and no edge runtime has a file system. What every host does have is a
//! synchronous read (Durable Object `ctx.storage.sql`, `fs.readSync`, a
//! `Map` loaded from IndexedDB) and some way to write a batch atomically
//! (one `transactionSync`, one IndexedDB transaction, a redo log). This VFS
//! needs only those:
//!
//! - `read(index)` → the block's bytes, or nothing past the end;
//! - `commit(pages, size)` → write these `[index, bytes]` blocks and the new
//!   file size as ONE atomic step (all or nothing), before returning (or
//!   return a promise the JS layer waits on before anything leaves);
//! - `size()` → the file size in bytes, once at open.
//!
//! Atomicity comes from the host, as with wa-sqlite's IDBBatchAtomicVFS:
//! every write SQLite makes to the main file is kept here, in a map of
//! dirty blocks that later reads see, and nothing reaches the host until
//! SQLite syncs the file at commit (or releases its write lock, the
//! backstop). So the host's copy only ever moves from one committed state to
//! the next. The rollback journal SQLite still writes lives in memory: a
//! crash can never leave a half-written database behind, so no hot journal
//! is ever needed on restart, and an in-transaction rollback still works
//! (it rewrites the dirty blocks from the journal). Temporary files are in
//! memory too. WAL is refused (no shared-memory methods), so SQLite keeps
//! its rollback journal.
//!
//! Memory: the VFS holds only the current transaction's dirty blocks and a
//! copy of block 0 (the header SQLite re-reads at every transaction);
//! SQLite's page cache is bounded by `cache_size`. An import writes every
//! page in one transaction, so it holds the whole image once more here.

use js_sys::{Array, Uint8Array};
use sqlite_wasm_rs::vfs::{
    AccessMode, DeviceCharacteristics, FileKind, LockLevel, MemChunksFile, OpenOptions, OpenRequest, OpenedFile,
    SQLiteIoMethods, SQLiteVfs, SyncOptions, VfsError, VfsErrorCode, VfsFile, VfsResult, VfsStore,
};
use sqlite_wasm_rs::WasmOsCallback;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use wasm_bindgen::prelude::*;

/// Bytes per stored block: the page size botspace gives a new database
/// (`PRAGMA page_size = 2048` in the core), so a page write is one block.
/// Other page sizes still work (a block is then part of a page, or pages
/// share a block), only less directly.
pub const BLOCK: usize = 2048;

/// The name SQLite knows this VFS by (`file:NAME?vfs=botspace-pages`).
pub const VFS_NAME: &str = "botspace-pages";

#[wasm_bindgen]
extern "C" {
    /// The host's block storage (see the module documentation); the JS
    /// layer passes its own wrapper of the user's object.
    #[wasm_bindgen(typescript_type = "RawPageStorage")]
    pub type PageStorage;

    #[wasm_bindgen(method, catch)]
    fn size(this: &PageStorage) -> Result<f64, JsValue>;

    #[wasm_bindgen(method, catch)]
    fn read(this: &PageStorage, index: f64) -> Result<JsValue, JsValue>;

    #[wasm_bindgen(method, catch)]
    fn commit(this: &PageStorage, pages: &Array, size: f64) -> Result<(), JsValue>;
}

#[wasm_bindgen(typescript_custom_section)]
const TS_STORAGE: &'static str = r#"
/** The page storage the raw module calls (the JS layer's wrapper). */
export interface RawPageStorage {
  size(): number;
  read(index: number): Uint8Array | null | undefined;
  commit(pages: Array<[number, Uint8Array]>, size: number): void;
}
"#;

thread_local! {
    /// Storages by database name, for `xOpen`. The module is single-threaded
    /// (see the compile_error! in imp.rs).
    static STORAGES: RefCell<HashMap<String, PageStorage>> = RefCell::new(HashMap::new());
    static NEXT: Cell<u64> = const { Cell::new(1) };
    static REGISTERED: Cell<bool> = const { Cell::new(false) };
}

fn js_message(e: &JsValue) -> String {
    if let Some(err) = e.dyn_ref::<js_sys::Error>() {
        return String::from(err.message());
    }
    e.as_string().unwrap_or_else(|| "the page storage threw".to_string())
}

fn io_err(code: VfsErrorCode, what: &str, e: &JsValue) -> VfsError {
    VfsError::new(code, format!("page storage {what} failed: {}", js_message(e)).into())
}

/// Registers the VFS (once) and `storage` under a new database name;
/// returns the SQLite filename that opens it.
pub fn attach(storage: PageStorage) -> Result<(String, String), String> {
    if !REGISTERED.get() {
        let data = AppData::default();
        // SAFETY: single-threaded module; the registration is leaked so the
        // VFS outlives every connection that uses it.
        let reg = unsafe { sqlite_wasm_rs::vfs::register_vfs::<PagesIo, PagesVfs>(VFS_NAME, data, false) }
            .map_err(|e| format!("cannot register the {VFS_NAME} VFS: {e}"))?;
        let _ = reg.into_raw();
        REGISTERED.set(true);
    }
    let n = NEXT.get();
    NEXT.set(n + 1);
    let name = format!("botspace-pages-{n}");
    STORAGES.with(|s| s.borrow_mut().insert(name.clone(), storage));
    let uri = format!("file:{name}?vfs={VFS_NAME}");
    Ok((name, uri))
}

/// Forgets the storage of a database name (its open file keeps its own handle).
pub fn detach(name: &str) {
    STORAGES.with(|s| s.borrow_mut().remove(name));
}

#[derive(Default)]
struct AppData {
    /// Journals and other non-main files, in memory, by name.
    mem: RefCell<HashMap<String, Rc<RefCell<MemChunksFile>>>>,
    error: RefCell<Option<VfsError>>,
}

/// The main database file, stored by the host.
struct HostFile {
    storage: PageStorage,
    /// Size as SQLite sees it (committed size plus this transaction's writes).
    size: u64,
    /// Size the host holds.
    committed_size: u64,
    /// Blocks written since the last commit to the host.
    dirty: BTreeMap<u64, Box<[u8]>>,
    /// Block 0 as the host holds it (re-read at every transaction start).
    block0: Option<Box<[u8]>>,
    lock: LockLevel,
}

impl HostFile {
    fn open(storage: PageStorage) -> VfsResult<HostFile> {
        let size = storage.size().map_err(|e| io_err(VfsErrorCode::CantOpen, "size()", &e))?;
        if !(size.is_finite() && size >= 0.0) {
            return Err(VfsError::new(VfsErrorCode::CantOpen, "page storage size() is not a byte count".into()));
        }
        let size = size as u64;
        Ok(HostFile {
            storage,
            size,
            committed_size: size,
            dirty: BTreeMap::new(),
            block0: None,
            lock: LockLevel::None,
        })
    }

    /// A committed block from the host, zero-filled to BLOCK bytes.
    fn load(&mut self, index: u64) -> VfsResult<Box<[u8]>> {
        if index == 0 {
            if let Some(b) = &self.block0 {
                return Ok(b.clone());
            }
        }
        let mut block = vec![0u8; BLOCK].into_boxed_slice();
        if index * (BLOCK as u64) < self.committed_size {
            let got = self.storage.read(index as f64).map_err(|e| io_err(VfsErrorCode::IoRead, "read()", &e))?;
            if let Some(bytes) = got.dyn_ref::<Uint8Array>() {
                let n = (bytes.length() as usize).min(BLOCK);
                bytes.subarray(0, n as u32).copy_to(&mut block[..n]);
            } else if !got.is_null() && !got.is_undefined() {
                return Err(VfsError::new(VfsErrorCode::IoRead, "page storage read() returned no Uint8Array".into()));
            }
        }
        if index == 0 {
            self.block0 = Some(block.clone());
        }
        Ok(block)
    }

    /// Hands the dirty blocks and the size to the host in one call.
    fn flush(&mut self) -> VfsResult<()> {
        if self.dirty.is_empty() && self.size == self.committed_size {
            return Ok(());
        }
        let last = self.size.div_ceil(BLOCK as u64);
        let pages = Array::new();
        for (&i, b) in self.dirty.range(..last) {
            let pair = Array::new();
            pair.push(&JsValue::from(i as f64));
            pair.push(&Uint8Array::from(&b[..]));
            pages.push(&pair);
        }
        self.storage.commit(&pages, self.size as f64).map_err(|e| io_err(VfsErrorCode::IoSync, "commit()", &e))?;
        if let Some(b0) = self.dirty.remove(&0) {
            self.block0 = Some(b0);
        }
        if self.size == 0 {
            self.block0 = None;
        }
        self.dirty.clear();
        self.committed_size = self.size;
        Ok(())
    }
}

enum PageFile {
    Host(Box<HostFile>),
    Mem(Rc<RefCell<MemChunksFile>>),
}

impl VfsFile for PageFile {
    fn device_characteristics(&self) -> DeviceCharacteristics {
        // Blocks are written whole and never torn.
        DeviceCharacteristics::POWERSAFE_OVERWRITE
    }

    fn read(&mut self, buf: &mut [u8], offset: u64) -> VfsResult<usize> {
        let f = match self {
            PageFile::Mem(m) => return m.borrow_mut().read(buf, offset),
            PageFile::Host(f) => f,
        };
        if offset >= f.size {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(f.size - offset) as usize;
        let mut done = 0;
        while done < n {
            let at = offset + done as u64;
            let index = at / BLOCK as u64;
            let within = (at % BLOCK as u64) as usize;
            let take = (BLOCK - within).min(n - done);
            if let Some(b) = f.dirty.get(&index) {
                buf[done..done + take].copy_from_slice(&b[within..within + take]);
            } else {
                let b = f.load(index)?;
                buf[done..done + take].copy_from_slice(&b[within..within + take]);
            }
            done += take;
        }
        Ok(n)
    }

    fn write(&mut self, buf: &[u8], offset: u64) -> VfsResult<()> {
        let f = match self {
            PageFile::Mem(m) => return m.borrow_mut().write(buf, offset),
            PageFile::Host(f) => f,
        };
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            let index = at / BLOCK as u64;
            let within = (at % BLOCK as u64) as usize;
            let take = (BLOCK - within).min(buf.len() - done);
            if !f.dirty.contains_key(&index) {
                // A whole-block write needs nothing from the host.
                let b = if within == 0 && take == BLOCK { vec![0u8; BLOCK].into_boxed_slice() } else { f.load(index)? };
                f.dirty.insert(index, b);
            }
            let b = f.dirty.get_mut(&index).expect("inserted above");
            b[within..within + take].copy_from_slice(&buf[done..done + take]);
            done += take;
        }
        f.size = f.size.max(offset + buf.len() as u64);
        Ok(())
    }

    fn truncate(&mut self, size: u64) -> VfsResult<()> {
        let f = match self {
            PageFile::Mem(m) => return m.borrow_mut().truncate(size),
            PageFile::Host(f) => f,
        };
        if size < f.size {
            let first_gone = size.div_ceil(BLOCK as u64);
            f.dirty.retain(|&i, _| i < first_gone);
            // The tail of a block cut in the middle reads as zeros later.
            let within = (size % BLOCK as u64) as usize;
            if within != 0 {
                let index = size / BLOCK as u64;
                if !f.dirty.contains_key(&index) {
                    let b = f.load(index)?;
                    f.dirty.insert(index, b);
                }
                f.dirty.get_mut(&index).expect("inserted above")[within..].fill(0);
            }
        }
        f.size = size;
        Ok(())
    }

    fn sync(&mut self, options: SyncOptions) -> VfsResult<()> {
        match self {
            PageFile::Mem(m) => m.borrow_mut().sync(options),
            // SQLite syncs the database file at commit: the host's atomic write.
            PageFile::Host(f) => f.flush(),
        }
    }

    fn size(&self) -> VfsResult<u64> {
        match self {
            PageFile::Mem(m) => m.borrow().size(),
            PageFile::Host(f) => Ok(f.size),
        }
    }

    fn lock(&mut self, level: LockLevel) -> VfsResult<()> {
        if let PageFile::Host(f) = self {
            if level > f.lock {
                f.lock = level;
            }
        }
        Ok(())
    }

    fn unlock(&mut self, level: LockLevel) -> VfsResult<()> {
        if let PageFile::Host(f) = self {
            // A write transaction ends: anything not yet handed over (a
            // connection with syncs off) goes now, before SQLite returns.
            if level <= LockLevel::Shared && f.lock > LockLevel::Shared {
                f.flush()?;
            }
            if level < f.lock {
                f.lock = level;
            }
        }
        Ok(())
    }

    fn check_reserved_lock(&self) -> VfsResult<bool> {
        Ok(matches!(self, PageFile::Host(f) if f.lock >= LockLevel::Reserved))
    }
}

struct PagesStore;

impl VfsStore for PagesStore {
    type File = PageFile;
    type AppData = AppData;

    fn record_error(data: &AppData, error: VfsError) {
        data.error.replace(Some(error));
    }

    fn last_error(data: &AppData) -> Option<VfsError> {
        data.error.borrow().clone()
    }

    fn open_file(data: &AppData, request: OpenRequest<'_>) -> VfsResult<OpenedFile<PageFile>> {
        let options = request.options;
        let access = options.access();
        let Some(filename) = request.filename else {
            return Ok(OpenedFile { file: PageFile::Mem(Rc::new(RefCell::new(MemChunksFile::default()))), access });
        };
        let name = filename.path();
        if options.kind() == Some(FileKind::MainDb) {
            let storage =
                STORAGES.with(|s| s.borrow().get(name).map(|s| JsValue::clone(s).unchecked_into::<PageStorage>()));
            let Some(storage) = storage else {
                return Err(VfsError::new(VfsErrorCode::CantOpen, format!("no page storage named {name:?}").into()));
            };
            return Ok(OpenedFile { file: PageFile::Host(Box::new(HostFile::open(storage)?)), access });
        }
        let mut mem = data.mem.borrow_mut();
        let file = match mem.get(name) {
            Some(f) => f.clone(),
            None if options.create() => {
                let f = Rc::new(RefCell::new(MemChunksFile::default()));
                mem.insert(name.to_string(), f.clone());
                f
            }
            None => return Err(VfsError::new(VfsErrorCode::CantOpen, format!("no file {name:?}").into())),
        };
        Ok(OpenedFile { file: PageFile::Mem(file), access })
    }

    fn close_file(data: &AppData, name: Option<&str>, file: PageFile, options: OpenOptions) -> VfsResult<()> {
        match file {
            PageFile::Host(mut f) => f.flush(),
            PageFile::Mem(m) => {
                if let (Some(name), true) = (name, options.delete_on_close()) {
                    let mut mem = data.mem.borrow_mut();
                    if mem.get(name).is_some_and(|cur| Rc::ptr_eq(cur, &m)) {
                        mem.remove(name);
                    }
                }
                Ok(())
            }
        }
    }

    fn access(data: &AppData, name: &str, _mode: AccessMode) -> VfsResult<bool> {
        Ok(data.mem.borrow().contains_key(name) || STORAGES.with(|s| s.borrow().contains_key(name)))
    }

    fn full_pathname(_data: &AppData, name: &str) -> VfsResult<String> {
        Ok(name.to_string())
    }

    fn delete_file(data: &AppData, name: &str, _sync_dir: bool) -> VfsResult<()> {
        match data.mem.borrow_mut().remove(name) {
            Some(_) => Ok(()),
            None => Err(VfsError::new(VfsErrorCode::IoDeleteNoEntry, format!("no file {name:?}").into())),
        }
    }
}

struct PagesIo;

impl SQLiteIoMethods for PagesIo {
    type Store = PagesStore;
}

struct PagesVfs;

impl SQLiteVfs<PagesIo> for PagesVfs {
    type Os = WasmOsCallback;

    fn os(_data: &AppData) -> &WasmOsCallback {
        &WasmOsCallback
    }

    const MAX_PATH_SIZE: ::core::ffi::c_int = 1024;
}
