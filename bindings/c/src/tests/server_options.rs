//! The example servers' options: parse, settle, open a service.

use crate::bytes::{botspace_bytes, botspace_bytes_free};
use crate::server_options::{
    botspace_server_options, botspace_server_options_free, botspace_server_options_open_service,
    botspace_server_options_parse, botspace_server_options_settings, botspace_server_settings,
};
use crate::service::botspace_service_free;
use crate::status::{botspace_last_error_message, botspace_status};
use std::ffi::{c_char, CString};

fn parse(args: &[&str]) -> (*mut botspace_server_options, String, i32) {
    let owned: Vec<CString> = args.iter().map(|a| CString::new(*a).unwrap()).collect();
    let ptrs: Vec<*const c_char> = owned.iter().map(|a| a.as_ptr()).collect();
    let (mut o, mut text, mut exit) = (std::ptr::null_mut(), botspace_bytes::EMPTY, -1);
    let st = unsafe {
        botspace_server_options_parse(c"srv".as_ptr(), ptrs.as_ptr(), ptrs.len(), &mut o, &mut text, &mut exit)
    };
    assert_eq!(st, botspace_status::Ok);
    let t = if text.len == 0 {
        String::new()
    } else {
        String::from_utf8(unsafe { std::slice::from_raw_parts(text.ptr, text.len) }.to_vec()).unwrap()
    };
    unsafe { botspace_bytes_free(&mut text) };
    (o, t, exit)
}

#[test]
fn options_parse_settle_and_open_a_service() {
    let (o, text, _) = parse(&["--help"]);
    assert!(o.is_null() && text.contains("\nUsage: srv [OPTIONS]\n"), "{text}");
    let (o, text, exit) = parse(&["--max-connections", "0"]);
    assert!(o.is_null());
    assert_eq!(exit, 2);
    assert_eq!(
        text,
        "botspace: invalid value '0' for '--max-connections <N>' (BOTSPACE_MAX_CONNECTIONS): expected a positive integer; see --help\n"
    );
    let (mut o, text, _) =
        parse(&["--db", ":memory:", "--addr=127.0.0.1:0", "--request-timeout", "0.0001", "--manual-clock"]);
    assert!(!o.is_null() && text.is_empty());
    let mut s = botspace_server_settings {
        addr: std::ptr::null(),
        admin_addr: std::ptr::dangling(),
        db: std::ptr::null(),
        max_connections: 0,
        request_timeout_ms: 0,
        idle_timeout_ms: 0,
        manual_clock: false,
        demo: true,
        demo_token: true,
        log_json: true,
    };
    assert_eq!(unsafe { botspace_server_options_settings(o, 1024, &mut s) }, botspace_status::Ok);
    assert_eq!(unsafe { std::ffi::CStr::from_ptr(s.addr) }.to_str(), Ok("127.0.0.1:0"));
    assert!(s.admin_addr.is_null());
    assert_eq!((s.max_connections, s.request_timeout_ms, s.idle_timeout_ms), (960, 1, 120_000));
    assert!(s.manual_clock && !s.demo && !s.demo_token && !s.log_json, "no demo unless asked");
    let (mut svc, mut secret) = (std::ptr::null_mut(), botspace_bytes::EMPTY);
    assert_eq!(unsafe { botspace_server_options_open_service(o, &mut svc, &mut secret) }, botspace_status::Ok);
    assert_eq!(secret.len, 64, "none given: one generated, for the host to print");
    unsafe {
        botspace_bytes_free(&mut secret);
        botspace_service_free(&mut svc);
        botspace_server_options_free(&mut o);
        botspace_server_options_free(&mut o);
    }
    assert!(o.is_null());
    let (mut o, _, _) =
        parse(&["--db", ":memory:", "--gateway-poll-interval-ms", "9", "--admin-secret", "a-secret-given-0001"]);
    assert_eq!(
        unsafe { botspace_server_options_open_service(o, &mut svc, &mut secret) },
        botspace_status::InvalidConfig
    );
    let mut buf = [0 as c_char; 256];
    let mut n = 0;
    assert_eq!(unsafe { botspace_last_error_message(buf.as_mut_ptr(), buf.len(), &mut n) }, botspace_status::Ok);
    assert_eq!(
        unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_str(),
        Ok("cannot open the service on :memory:: gateway_poll_interval_ms must be between 10 and 60000")
    );
    unsafe { botspace_server_options_free(&mut o) };
}
