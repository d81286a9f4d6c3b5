//! The admin-login throttle over real TCP, against the Rust server
//! (`rust::`) and the C server (`c::`): a guesser stays throttled however
//! many other clients fail, from real source addresses (each connection
//! bound to its own 127.a.b.c, which Linux routes to loopback) and through
//! a trusted proxy (`--trusted-proxy`, `X-Forwarded-For`); behind that
//! proxy one client is throttled while another gets in.

#[macro_use]
mod wire;

use serde_json::{json, Value};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use wire::*;

/// `Server::start_rust_with` or `Server::start_c_with`.
type Start = fn(&[&str]) -> Server;

servers! {
    both: [
        a_spray_of_twenty_thousand_clients_is_checked_200_times_and_the_guesser_stays_throttled,
        behind_a_trusted_proxy_one_client_is_throttled_while_another_gets_in,
    ],
    binary: [a_trusted_proxy_that_is_not_a_cidr_block_is_refused_by_name],
}

const WRONG: &str = "not-the-admin-secret-0001";

/// A TCP connection to `to` from the source address `from` (any
/// 127.0.0.0/8 address works on Linux loopback).
fn connect_from(from: Ipv4Addr, to: SocketAddr) -> TcpStream {
    use std::os::fd::FromRawFd;
    let sockaddr = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(ip).to_be() },
        sin_zero: [0; 8],
    };
    let SocketAddr::V4(to) = to else { panic!("the servers listen on 127.0.0.1") };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: plain socket calls on a descriptor this function owns; the
    // addresses outlive the calls; the descriptor goes to the TcpStream.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let stream = TcpStream::from_raw_fd(fd);
        let src = sockaddr(from, 0);
        let rc = libc::bind(fd, (&raw const src).cast(), len);
        assert_eq!(rc, 0, "bind {from}: {}", std::io::Error::last_os_error());
        let dst = sockaddr(*to.ip(), to.port());
        let rc = libc::connect(fd, (&raw const dst).cast(), len);
        assert_eq!(rc, 0, "connect from {from}: {}", std::io::Error::last_os_error());
        stream.set_read_timeout(Some(WAIT)).unwrap();
        stream
    }
}

/// `POST /admin/getStats` with `secret` and `headers` (`Name: v\r\n` each).
fn login(secret: &str, headers: &str) -> Vec<u8> {
    format!(
        "POST /admin/getStats HTTP/1.1\r\nHost: botspace\r\nAuthorization: Admin {secret}\r\n{headers}Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}"
    )
    .into_bytes()
}

/// One request on a fresh connection from `from`.
fn once_from(srv: &Server, from: Ipv4Addr, request: &[u8]) -> RawResponse {
    let mut s = connect_from(from, srv.addr);
    s.write_all(request).unwrap();
    read_response(&mut s, &mut Vec::new())
}

/// The 429 of a throttled login: the whole body, and `Retry-After`.
fn assert_throttled(r: &RawResponse, secs: u64) {
    let want = json!({"ok": false, "error_code": 429, "error": "rate_limited",
        "description": format!("too many requests; retry after {secs} s"),
        "parameters": {"retry_after": secs, "retry_after_ms": secs * 1000, "scope": "admin_auth"}});
    assert_eq!((r.status, r.json()), (429, want));
    assert_eq!(r.header("retry-after"), Some(secs.to_string().as_str()));
}

fn assert_invalid_token(r: &RawResponse) {
    r.assert_error(401, "invalid_token");
}

/// The 429 of the global bound during a spray: the next token in 75 ms.
fn assert_spray_wait(r: &RawResponse) {
    let want = json!({"ok": false, "error_code": 429, "error": "rate_limited",
        "description": "too many requests; retry after 1 s",
        "parameters": {"retry_after": 1, "retry_after_ms": 75, "scope": "admin_auth"}});
    assert_eq!((r.status, r.json()), (429, want));
    assert_eq!(r.header("retry-after"), Some("1"));
}

fn a_spray_of_twenty_thousand_clients_is_checked_200_times_and_the_guesser_stays_throttled(start: Start) {
    let srv = start(&["--admin-secret", SECRET, "--manual-clock", "--trusted-proxy", "127.0.0.1"]);
    // The operator (the harness, from 127.0.0.1) logs in before the spray.
    assert_eq!(srv.admin("getStats", &json!({}))["bots"], json!(1));
    let guesser = Ipv4Addr::new(127, 0, 0, 2);
    for _ in 0..10 {
        assert_invalid_token(&once_from(&srv, guesser, &login(WRONG, "")));
    }
    assert_throttled(&once_from(&srv, guesser, &login(SECRET, "")), 6);

    // 10 000 clients from real source addresses, 40 to a /24 (under the
    // /24's allowance), at one instant of the manual clock: the global
    // bound checks 190 more wrong secrets (200 with the guesser's) and
    // refuses the rest unread.
    let (mut failed, mut refused) = (0, 0);
    for i in 0..10_000u32 {
        let from = Ipv4Addr::new(127, 1 + (i / 40 / 256) as u8, (i / 40 % 256) as u8, 1 + (i % 40) as u8);
        let r = once_from(&srv, from, &login(WRONG, ""));
        if r.status == 401 {
            assert_invalid_token(&r);
            failed += 1;
        } else {
            assert_spray_wait(&r);
            refused += 1;
        }
    }
    assert_eq!((failed, refused), (190, 9_810));
    // 10 000 more through the trusted proxy, each its own IPv6 /64: all
    // refused unread.
    let mut proxy = connect_from(Ipv4Addr::LOCALHOST, srv.addr);
    for chunk in (0..10_000u32).collect::<Vec<_>>().chunks(200) {
        let requests: Vec<Vec<u8>> =
            chunk.iter().map(|i| login(WRONG, &format!("X-Forwarded-For: 2001:db8:{i:x}::1\r\n"))).collect();
        for r in srv.pipeline(&mut proxy, &requests) {
            assert_spray_wait(&r);
        }
    }

    // The guesser is still refused, the right secret unread: from its own
    // address, and when the proxy names it.
    assert_throttled(&once_from(&srv, guesser, &login(SECRET, "")), 6);
    proxy.write_all(&login(SECRET, "X-Forwarded-For: 127.0.0.2\r\n")).unwrap();
    assert_throttled(&read_response(&mut proxy, &mut Vec::new()), 6);
    // The trade-off: a client that never got in before meets the spray's
    // wait; the operator who did is still checked and gets in (and moves
    // the manual clock on by one token's time, 75 ms)...
    let newcomer = Ipv4Addr::new(127, 0, 0, 77);
    assert_spray_wait(&once_from(&srv, newcomer, &login(SECRET, "")));
    srv.advance(0.075);
    // ...after which the newcomer has its token.
    let ok = once_from(&srv, newcomer, &login(SECRET, ""));
    assert_eq!(ok.status, 200, "{:?}", String::from_utf8_lossy(&ok.body));
    // Time heals: a minute on, the guesser has attempts again.
    srv.advance(60.0);
    let ok = once_from(&srv, guesser, &login(SECRET, ""));
    assert_eq!(ok.status, 200, "{:?}", String::from_utf8_lossy(&ok.body));
}

fn behind_a_trusted_proxy_one_client_is_throttled_while_another_gets_in(start: Start) {
    let srv = start(&["--admin-secret", SECRET, "--manual-clock", "--trusted-proxy", "127.0.0.0/30"]);
    // The proxy: one keep-alive connection from 127.0.0.1, carrying both clients.
    let mut proxy = connect_from(Ipv4Addr::LOCALHOST, srv.addr);
    let mut via = |secret: &str, client: &str| -> RawResponse {
        proxy.write_all(&login(secret, &format!("X-Forwarded-For: {client}\r\n"))).unwrap();
        read_response(&mut proxy, &mut Vec::new())
    };
    for _ in 0..10 {
        assert_invalid_token(&via(WRONG, "203.0.113.7"));
    }
    assert_throttled(&via(SECRET, "203.0.113.7"), 6);
    let ok = via(SECRET, "198.51.100.9");
    assert_eq!(ok.status, 200, "{:?}", String::from_utf8_lossy(&ok.body));
    assert_eq!(ok.json()["result"]["bots"], Value::from(1), "the demo bot");
    // A client that names someone else before itself is still itself.
    assert_throttled(&via(SECRET, "198.51.100.9, 203.0.113.7"), 6);
    // A second proxy of the block (a fresh connection from 127.0.0.2), and
    // the Forwarded header: the same two clients.
    let second = Ipv4Addr::new(127, 0, 0, 2);
    assert_throttled(&once_from(&srv, second, &login(SECRET, "Forwarded: for=203.0.113.7\r\n")), 6);
    assert_eq!(once_from(&srv, second, &login(SECRET, "Forwarded: for=198.51.100.9\r\n")).status, 200);
    // A peer outside the trusted block is keyed by its own address: its
    // header is not believed, and its failures do not touch 198.51.100.9.
    let outsider = Ipv4Addr::new(127, 0, 0, 9);
    for _ in 0..10 {
        assert_invalid_token(&once_from(&srv, outsider, &login(WRONG, "X-Forwarded-For: 198.51.100.9\r\n")));
    }
    assert_throttled(&once_from(&srv, outsider, &login(SECRET, "X-Forwarded-For: 198.51.100.9\r\n")), 6);
    assert_eq!(via(SECRET, "198.51.100.9").status, 200);
}

fn a_trusted_proxy_that_is_not_a_cidr_block_is_refused_by_name(bin: std::path::PathBuf) {
    use std::process::{Command, Stdio};
    let mut child = Command::new(&bin)
        .args(["--addr", "127.0.0.1:0", "--db", ":memory:", "--admin-secret", SECRET, "--demo"])
        .args(["--trusted-proxy", "10.0.0.0/8", "--trusted-proxy=10.0.0.1/8"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the server");
    let until = std::time::Instant::now() + WAIT;
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > until {
            let _ = child.kill();
            panic!("the server did not exit");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).lines().next(),
        Some(
            r#"cannot open the service on :memory:: trusted_proxies: "10.0.0.1/8" has bits set past /8; the block is 10.0.0.0/8"#
        )
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "nothing listening");
}
