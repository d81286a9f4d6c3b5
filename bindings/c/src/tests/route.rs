//! Routes, the answers the library words, the host policy.

use crate::bytes::{botspace_bytes, botspace_bytes_free};
use crate::host_policy::{botspace_default_max_connections, botspace_host_policy, botspace_host_policy_default};
use crate::route::{
    botspace_continue_response, botspace_listener, botspace_not_here_response, botspace_response_error, botspace_route,
    botspace_route_request, botspace_server_busy_response,
};
use crate::status::botspace_status;

#[test]
fn routes_and_answers_come_from_the_core() {
    let p = b"/admin/createUser";
    assert_eq!(
        unsafe { botspace_route_request(botspace_listener::Public, p.as_ptr(), p.len()) },
        botspace_route::NotHere
    );
    assert_eq!(unsafe { botspace_route_request(botspace_listener::All, p.as_ptr(), p.len()) }, botspace_route::Admin);
    assert_eq!(unsafe { botspace_route_request(botspace_listener::All, std::ptr::null(), 0) }, botspace_route::Alone);
    let mut out = botspace_bytes::EMPTY;
    assert_eq!(unsafe { botspace_server_busy_response(&mut out) }, botspace_status::Ok);
    let (mut status, mut error) = (0u16, std::ptr::null());
    assert_eq!(unsafe { botspace_response_error(out.ptr, out.len, &mut status, &mut error) }, botspace_status::Ok);
    assert_eq!(status, 503);
    assert_eq!(unsafe { std::ffi::CStr::from_ptr(error) }.to_str(), Ok("server_busy"));
    unsafe { botspace_bytes_free(&mut out) };
    assert_eq!(
        unsafe { botspace_response_error(b"nope".as_ptr(), 4, &mut status, &mut error) },
        botspace_status::InvalidArgument
    );
    assert_eq!(
        unsafe { botspace_not_here_response(p.as_ptr(), p.len(), std::ptr::null_mut()) },
        botspace_status::NullArgument
    );
    let mut hp = botspace_host_policy::default();
    assert_eq!(unsafe { botspace_host_policy_default(&mut hp) }, botspace_status::Ok);
    assert_eq!((hp.request_timeout_ms, hp.max_batch), (30_000, 64));
    assert_eq!(botspace_default_max_connections(1024), 960);
    assert_eq!(unsafe { botspace_continue_response(&mut out) }, botspace_status::Ok);
    assert_eq!(unsafe { std::slice::from_raw_parts(out.ptr, out.len) }, b"HTTP/1.1 100 Continue\r\n\r\n");
    unsafe { botspace_bytes_free(&mut out) };
}
