//! TESTS misc

use crate::bytes::{botspace_bytes, botspace_bytes_free};
use crate::gateway::static_reason;
use crate::log_line::{botspace_log_level, botspace_log_line};
use crate::service::{
    botspace_service, botspace_service_free, botspace_service_handle_request, botspace_service_has_store_notifications,
    botspace_service_open, botspace_service_wait_store_notifications,
};
use crate::status::{botspace_last_error_message, botspace_status};
use crate::webhook::botspace_webhook_failure;
use botspace::CloseCode;
use std::ffi::c_char;

const CFG: &[u8] = br#"{"admin_secret":"test-admin-secret-0001","clock":"manual"}"#;

/// Each `botspace_webhook_failure` value is the index of the same kind
/// in the core's `Failure::ALL`, which the C call reads.
#[test]
fn webhook_failure_values_are_the_core_order() {
    use botspace::webhook::Failure;
    use botspace_webhook_failure as C;
    let pairs = [
        (C::Resolve, Failure::Resolve),
        (C::NoAddress, Failure::NoAddress),
        (C::Connect, Failure::Connect),
        (C::Tls, Failure::Tls),
        (C::TlsName, Failure::TlsName),
        (C::Connection, Failure::Connection),
        (C::BeforeSending, Failure::BeforeSending),
        (C::Build, Failure::Build),
        (C::Request, Failure::Request),
        (C::HiddenRedirect, Failure::HiddenRedirect),
        (C::AddressCheck, Failure::AddressCheck),
    ];
    assert_eq!(pairs.len(), Failure::ALL.len());
    for (c, core) in pairs {
        assert_eq!(Failure::ALL[c as usize], core);
    }
}

/// The C calls give the library's line and level; a level outside 0..=3
/// is InvalidArgument with nothing written.
#[test]
fn log_line_and_level() {
    let mut out = botspace_bytes::EMPTY;
    let (msg, block) = ("a \"b\"", "x: 1\ny\n");
    // SAFETY: valid pointers and lengths.
    let st = unsafe { botspace_log_line(1, msg.as_ptr().cast(), msg.len(), std::ptr::null(), 0, 1_000, &mut out) };
    assert_eq!(st, botspace_status::Ok);
    // SAFETY: written by botspace_log_line.
    let line = unsafe { std::slice::from_raw_parts(out.ptr, out.len) }.to_vec();
    assert_eq!(line, br#"{"ts":"1970-01-01T00:00:01.000Z","level":"warn","msg":"a \"b\""}"#);
    // SAFETY: from botspace_log_line.
    unsafe { botspace_bytes_free(&mut out) };
    // SAFETY: valid pointers and lengths.
    let st = unsafe { botspace_log_line(2, c"demo".as_ptr(), 4, block.as_ptr().cast(), block.len(), 0, &mut out) };
    assert_eq!(st, botspace_status::Ok);
    // SAFETY: written by botspace_log_line.
    let line = unsafe { std::slice::from_raw_parts(out.ptr, out.len) }.to_vec();
    assert_eq!(line, br#"{"ts":"1970-01-01T00:00:00.000Z","level":"info","msg":"demo","lines":["x: 1","y"]}"#);
    // SAFETY: from botspace_log_line.
    unsafe { botspace_bytes_free(&mut out) };
    // SAFETY: valid pointers.
    let st = unsafe { botspace_log_line(4, std::ptr::null(), 0, std::ptr::null(), 0, 0, &mut out) };
    assert_eq!((st, out.len), (botspace_status::InvalidArgument, 0));
    // SAFETY: NULL is unset; the others point at their bytes.
    unsafe {
        assert_eq!(botspace_log_level(std::ptr::null(), 0), 2);
        assert_eq!(botspace_log_level(c"Error".as_ptr(), 5), 0);
        assert_eq!(botspace_log_level(c"debug".as_ptr(), 5), 3);
    }
}

/// Every reason the core ends a session with reaches C as its own
/// wire name (there is no catch-all).
#[test]
fn every_close_reason_of_the_core_keeps_its_name_in_c() {
    assert!(CloseCode::ALL.contains(&CloseCode::StorageUnavailable));
    for reason in CloseCode::ALL {
        let got = unsafe { std::ffi::CStr::from_ptr(static_reason(*reason)) }.to_str().unwrap();
        assert_eq!(got, reason.as_str());
    }
}

fn open() -> *mut botspace_service {
    let mut s = std::ptr::null_mut();
    assert_eq!(unsafe { botspace_service_open(CFG.as_ptr(), CFG.len(), &mut s) }, botspace_status::Ok);
    s
}

fn last_error() -> String {
    let mut buf = [0 as c_char; 256];
    let mut n = 0;
    assert_eq!(unsafe { botspace_last_error_message(buf.as_mut_ptr(), buf.len(), &mut n) }, botspace_status::Ok);
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
}

#[test]
fn panic_is_caught() {
    let r: botspace_status = ffi_boundary!({
        if std::hint::black_box(true) {
            panic!("boom");
        }
        botspace_status::Ok
    });
    assert_eq!(r, botspace_status::Panic);
    assert!(last_error().contains("boom"));
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
