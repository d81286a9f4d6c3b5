//! The service handle: open, a request, free; the notifications of other
//! nodes on SQLite; a refused configuration.

use super::last_error;
use crate::bytes::{botspace_bytes, botspace_bytes_free};
use crate::service::{
    botspace_service, botspace_service_free, botspace_service_handle_request, botspace_service_has_store_notifications,
    botspace_service_open, botspace_service_wait_store_notifications,
};
use crate::status::botspace_status;

const CFG: &[u8] = br#"{"admin_secret":"test-admin-secret-0001","clock":"manual"}"#;

fn open() -> *mut botspace_service {
    let mut s = std::ptr::null_mut();
    assert_eq!(unsafe { botspace_service_open(CFG.as_ptr(), CFG.len(), &mut s) }, botspace_status::Ok);
    s
}

#[test]
fn open_request_free() {
    let mut s = open();
    let req = b"POST /bot/getMe HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut out = botspace_bytes::EMPTY;
    assert_eq!(unsafe { botspace_service_handle_request(s, req.as_ptr(), req.len(), &mut out) }, botspace_status::Ok);
    let resp = unsafe { std::slice::from_raw_parts(out.ptr, out.len) };
    assert!(resp.starts_with(b"HTTP/1.1 401 "));
    unsafe { botspace_bytes_free(&mut out) };
    assert!(out.ptr.is_null());
    unsafe { botspace_bytes_free(&mut out) };
    unsafe { botspace_service_free(&mut s) };
    assert!(s.is_null());
    unsafe { botspace_service_free(&mut s) };
}

#[test]
fn store_notifications_on_sqlite_return_at_once() {
    let mut s = open();
    let mut available = true;
    assert_eq!(unsafe { botspace_service_has_store_notifications(s, &mut available) }, botspace_status::Ok);
    assert!(!available, "SQLite has no other nodes");
    let mut n = usize::MAX;
    let t = std::time::Instant::now();
    assert_eq!(unsafe { botspace_service_wait_store_notifications(s, 10_000, &mut n) }, botspace_status::Ok);
    assert_eq!(n, 0);
    assert!(t.elapsed() < std::time::Duration::from_secs(1));
    let none = std::ptr::null_mut();
    assert_eq!(unsafe { botspace_service_wait_store_notifications(s, 0, none) }, botspace_status::NullArgument);
    assert_eq!(
        unsafe { botspace_service_wait_store_notifications(std::ptr::null(), 0, &mut n) },
        botspace_status::NullArgument
    );
    assert_eq!(
        unsafe { botspace_service_has_store_notifications(s, std::ptr::null_mut()) },
        botspace_status::NullArgument
    );
    unsafe { botspace_service_free(&mut s) };
}

#[test]
fn invalid_config_sets_message() {
    let mut s: *mut botspace_service = std::ptr::dangling_mut();
    let bad = br#"{"admin_secret":"short"}"#;
    assert_eq!(unsafe { botspace_service_open(bad.as_ptr(), bad.len(), &mut s) }, botspace_status::InvalidConfig);
    assert_eq!(s, std::ptr::dangling_mut(), "output untouched on failure");
    assert!(last_error().contains("admin_secret"));
}

/// The default library has no PostgreSQL store (feature `postgres`): a
/// `postgres://` database is refused with a storage error that names the
/// switch, not opened as a file called "postgres:".
#[cfg(not(feature = "postgres"))]
#[test]
fn postgres_url_without_the_feature_is_refused_by_name() {
    let mut s: *mut botspace_service = std::ptr::dangling_mut();
    let cfg = br#"{"database":"postgres://postgres@127.0.0.1:1/x","admin_secret":"test-admin-secret-0001"}"#;
    assert_eq!(unsafe { botspace_service_open(cfg.as_ptr(), cfg.len(), &mut s) }, botspace_status::StorageError);
    assert_eq!(s, std::ptr::dangling_mut(), "output untouched on failure");
    assert_eq!(
        last_error(),
        "database is a PostgreSQL URL, but this build has no PostgreSQL store (cargo feature `postgres`)"
    );
}
