//! The operator output and the start-up lines.

use crate::bytes::{botspace_bytes, botspace_bytes_free};
use crate::output::{
    botspace_output, botspace_output_block, botspace_output_from_setting, botspace_output_log,
    botspace_output_server_line, botspace_output_set_records_callback, botspace_startup_base_urls,
    botspace_startup_free, botspace_startup_new, botspace_startup_next_line, botspace_stream,
    BOTSPACE_SERVER_LINE_READY, BOTSPACE_SERVER_LINE_STOPPED, BOTSPACE_SERVER_LINE_STOPPING,
};
use crate::status::botspace_status;
use std::ffi::c_void;

fn take(b: &mut botspace_bytes) -> String {
    let s = if b.len == 0 {
        String::new()
    } else {
        // SAFETY: bytes the library wrote.
        String::from_utf8(unsafe { std::slice::from_raw_parts(b.ptr, b.len) }.to_vec()).unwrap()
    };
    // SAFETY: the library's bytes.
    unsafe { botspace_bytes_free(b) };
    s
}

fn v4(ip: [u8; 4], port: u16) -> libc::sockaddr_in {
    // SAFETY: all-zero is a valid sockaddr_in.
    let mut a: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    a.sin_family = libc::AF_INET as libc::sa_family_t;
    a.sin_port = port.to_be();
    a.sin_addr.s_addr = u32::from_be_bytes(ip).to_be();
    a
}

fn v6(ip: std::net::Ipv6Addr, port: u16) -> libc::sockaddr_in6 {
    // SAFETY: all-zero is a valid sockaddr_in6.
    let mut a: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    a.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    a.sin6_port = port.to_be();
    a.sin6_addr.s6_addr = ip.octets();
    a
}

#[test]
fn a_line_its_stream_and_bytes_or_nothing() {
    let out = botspace_output { threshold: 1, json: false };
    let (mut stream, mut line) = (botspace_stream::Stdout, botspace_bytes::EMPTY);
    // SAFETY: valid pointers and lengths.
    let st = unsafe { botspace_output_log(&out, 0, c"bad".as_ptr(), 3, 0, &mut stream, &mut line) };
    assert_eq!((st, stream, take(&mut line)), (botspace_status::Ok, botspace_stream::Stderr, "bad\n".into()));
    // SAFETY: valid pointers and lengths.
    let st = unsafe { botspace_output_log(&out, 2, c"ready".as_ptr(), 5, 0, &mut stream, &mut line) };
    assert_eq!((st, line.len, line.ptr.is_null()), (botspace_status::Ok, 0, true), "below the threshold");
    let json = botspace_output { threshold: 3, json: true };
    // SAFETY: valid pointers and lengths.
    let st =
        unsafe { botspace_output_block(&json, c"demo".as_ptr(), 4, c"a\nb\n".as_ptr(), 4, 1, &mut stream, &mut line) };
    assert_eq!(st, botspace_status::Ok);
    assert_eq!(
        (stream, take(&mut line)),
        (
            botspace_stream::Stdout,
            "{\"ts\":\"1970-01-01T00:00:00.001Z\",\"level\":\"info\",\"msg\":\"demo\",\"lines\":[\"a\",\"b\"]}\n"
                .into()
        )
    );
    let bad = botspace_output { threshold: 4, json: false };
    // SAFETY: valid pointers.
    let st = unsafe { botspace_output_log(&bad, 0, std::ptr::null(), 0, 0, &mut stream, &mut line) };
    assert_eq!((st, line.len), (botspace_status::InvalidArgument, 0));
    // SAFETY: valid pointers.
    let st = unsafe { botspace_output_log(&out, -1, std::ptr::null(), 0, 0, &mut stream, &mut line) };
    assert_eq!(st, botspace_status::InvalidArgument);
    // SAFETY: NULL output.
    let st = unsafe { botspace_output_log(std::ptr::null(), 0, std::ptr::null(), 0, 0, &mut stream, &mut line) };
    assert_eq!(st, botspace_status::NullArgument);
    let mut made = botspace_output { threshold: -7, json: false };
    // SAFETY: valid pointers and lengths.
    let st = unsafe { botspace_output_from_setting(true, c"WARN".as_ptr(), 4, &mut made) };
    assert_eq!((st, made), (botspace_status::Ok, botspace_output { threshold: 1, json: true }));
    // SAFETY: NULL is unset.
    let st = unsafe { botspace_output_from_setting(false, std::ptr::null(), 0, &mut made) };
    assert_eq!((st, made), (botspace_status::Ok, botspace_output { threshold: 2, json: false }));
}

#[test]
fn the_server_lines_by_number() {
    let info = botspace_output { threshold: 2, json: false };
    let (mut stream, mut line) = (botspace_stream::Stderr, botspace_bytes::EMPTY);
    let mut say = |out: &botspace_output, which: u32, cut: u64| {
        // SAFETY: valid pointers.
        let st = unsafe { botspace_output_server_line(out, which, cut, 0, &mut stream, &mut line) };
        (st, stream, take(&mut line))
    };
    let ok = |s: &str| (botspace_status::Ok, botspace_stream::Stdout, s.to_string());
    assert_eq!(say(&info, BOTSPACE_SERVER_LINE_READY, 9), ok("botspace ready\n"));
    assert_eq!(say(&info, BOTSPACE_SERVER_LINE_STOPPING, 0), ok("botspace stopping\n"));
    assert_eq!(say(&info, BOTSPACE_SERVER_LINE_STOPPED, 0), ok("botspace stopped\n"));
    assert_eq!(
        say(&info, BOTSPACE_SERVER_LINE_STOPPED, 2),
        ok("botspace stopped (2 connections cut; every answered request was already committed)\n")
    );
    let warn = botspace_output { threshold: 1, json: false };
    assert_eq!(say(&warn, BOTSPACE_SERVER_LINE_READY, 0), ok(""), "an info line under a warn threshold");
    assert_eq!(say(&info, 3, 0).0, botspace_status::InvalidArgument);
}

/// What the records callback was given: (stream, line).
static RECORDED: std::sync::Mutex<Vec<(botspace_stream, String)>> = std::sync::Mutex::new(Vec::new());

unsafe extern "C" fn record(ud: *mut c_void, stream: botspace_stream, line: *const u8, len: usize) {
    assert_eq!(ud as usize, 7, "the user data, unchanged");
    // SAFETY: the library's bytes, valid for the call.
    let line = String::from_utf8(unsafe { std::slice::from_raw_parts(line, len) }.to_vec()).unwrap();
    RECORDED.lock().unwrap().push((stream, line));
}

#[test]
fn the_librarys_log_records_go_through_the_hosts_output() {
    let json = botspace_output { threshold: 1, json: true };
    // SAFETY: a valid output, a thread-safe callback.
    let st = unsafe { botspace_output_set_records_callback(&json, Some(record), 7 as *mut c_void) };
    assert_eq!(st, botspace_status::Ok);
    log::warn!(target: "botspace::drift_test", "drift-test store went away");
    log::info!(target: "botspace::drift_test", "drift-test below the threshold");
    log::error!(target: "rustls", "drift-test another crate's");
    let mine = |r: &Vec<(botspace_stream, String)>| {
        r.iter().filter(|(_, l)| l.contains("drift-test")).cloned().collect::<Vec<_>>()
    };
    let got = mine(&RECORDED.lock().unwrap());
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, botspace_stream::Stderr);
    // The JSON line, its `ts` (24 characters) from the wall clock.
    let line = &got[0].1;
    assert!(line.starts_with("{\"ts\":\"") && line.len() > 31 && line.as_bytes()[30] == b'Z', "{line}");
    assert_eq!(&line[31..], "\",\"level\":\"warn\",\"msg\":\"drift-test store went away\"}\n");
    let bad = botspace_output { threshold: 9, json: false };
    // SAFETY: a valid output.
    let st = unsafe { botspace_output_set_records_callback(&bad, Some(record), 7 as *mut c_void) };
    assert_eq!(st, botspace_status::InvalidArgument);
    // SAFETY: NULL removes it; the output is then not read.
    let st = unsafe { botspace_output_set_records_callback(std::ptr::null(), None, std::ptr::null_mut()) };
    assert_eq!(st, botspace_status::Ok);
    log::warn!(target: "botspace::drift_test", "drift-test after removal");
    assert_eq!(mine(&RECORDED.lock().unwrap()).len(), 1, "removed: back to stderr");
}

#[test]
fn startup_lines_from_socket_addresses() {
    let public = v4([0, 0, 0, 0], 8080);
    let admin = v6(std::net::Ipv6Addr::UNSPECIFIED, 8081);
    let secret = "ab12";
    let mut st = std::ptr::null_mut();
    // SAFETY: valid pointers and lengths.
    let status = unsafe {
        botspace_startup_new(
            (&public as *const libc::sockaddr_in).cast(),
            std::mem::size_of_val(&public),
            (&admin as *const libc::sockaddr_in6).cast(),
            std::mem::size_of_val(&admin),
            secret.as_ptr().cast(),
            secret.len(),
            true,
            &mut st,
        )
    };
    assert_eq!(status, botspace_status::Ok);
    // Warnings only: the info lines are passed over, the block is not.
    let out = botspace_output { threshold: 1, json: false };
    let (mut stream, mut line) = (botspace_stream::Stderr, botspace_bytes::EMPTY);
    let mut next = || {
        // SAFETY: a live handle, valid outputs.
        let s = unsafe { botspace_startup_next_line(st, &out, 0, &mut stream, &mut line) };
        assert_eq!(s, botspace_status::Ok);
        (stream, take(&mut line))
    };
    assert_eq!(next(), (botspace_stream::Stdout, "admin secret: ab12\n".into()));
    assert_eq!(next().1, "", "no line is left");
    let (mut base, mut admin_base) = (botspace_bytes::EMPTY, botspace_bytes::EMPTY);
    // SAFETY: a live handle, valid outputs.
    assert_eq!(unsafe { botspace_startup_base_urls(st, &mut base, &mut admin_base) }, botspace_status::Ok);
    assert_eq!((take(&mut base), take(&mut admin_base)), ("http://127.0.0.1:8080".into(), "http://[::1]:8081".into()));
    // SAFETY: the handle made above; a second free does nothing.
    unsafe {
        botspace_startup_free(&mut st);
        botspace_startup_free(&mut st);
    }
    assert!(st.is_null());
    // A short address, another family.
    let mut st = std::ptr::null_mut();
    // SAFETY: valid pointers and lengths.
    let status = unsafe {
        botspace_startup_new(
            (&public as *const libc::sockaddr_in).cast(),
            3,
            std::ptr::null(),
            0,
            std::ptr::null(),
            0,
            false,
            &mut st,
        )
    };
    assert_eq!((status, st.is_null()), (botspace_status::InvalidArgument, true));
    let mut unix = public;
    unix.sin_family = libc::AF_UNIX as libc::sa_family_t;
    // SAFETY: valid pointers and lengths.
    let status = unsafe {
        botspace_startup_new(
            (&unix as *const libc::sockaddr_in).cast(),
            std::mem::size_of_val(&unix),
            std::ptr::null(),
            0,
            std::ptr::null(),
            0,
            false,
            &mut st,
        )
    };
    assert_eq!((status, st.is_null()), (botspace_status::InvalidArgument, true));
}
