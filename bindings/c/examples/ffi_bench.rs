//! getMe and sendMessage through the Rust API next to the same calls through
//! the C ABI, in one run:
//!
//! ```sh
//! make -C tests/c bench            # builds tests/c/build/bench (C, -O2) and libbotspace.so
//! cargo run --release -p botspace-c --example ffi_bench -- \
//!     --c-bench tests/c/build/bench --so target/release/libbotspace.so
//! ```
//!
//! Each round opens a fresh in-memory service (all tiers unlimited), creates
//! a user, a bot and their started private chat, warms up, then times `n`
//! getMe and `n` sendMessage requests. Rust and C rounds alternate (many
//! short rounds, so both sides meet the same quiet and busy moments of a
//! shared machine); the table shows each side's best round and the median.
//! The C program (tests/c/bench.c) builds byte-identical requests.

use botspace::{Config, Service};
use std::process::Command;
use std::time::Instant;

/// The C ABI loaded with dlopen into this process (`--so PATH`), so Rust
/// and C-ABI calls alternate in one process on the same allocator and see
/// the same machine noise: the most precise measure of the ABI's cost.
#[cfg(unix)]
mod abi {
    use std::ffi::{c_char, c_int, c_void, CString};

    extern "C" {
        fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
        fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    }
    const RTLD_NOW: c_int = 2;
    const RTLD_LOCAL: c_int = 0;

    #[repr(C)]
    pub struct Bytes {
        pub ptr: *mut u8,
        pub len: usize,
    }
    type Open = unsafe extern "C" fn(*const u8, usize, *mut *mut c_void) -> u32;
    type Handle = unsafe extern "C" fn(*const c_void, *const u8, usize, *mut Bytes) -> u32;
    type Free = unsafe extern "C" fn(*mut Bytes);
    type SvcFree = unsafe extern "C" fn(*mut *mut c_void);

    pub struct Lib {
        open: Open,
        handle: Handle,
        free: Free,
        svc_free: SvcFree,
    }

    impl Lib {
        pub fn load(path: &str) -> Lib {
            let p = CString::new(path).unwrap();
            // SAFETY: plain dlopen/dlsym of the botspace C library; the
            // signatures are those of include/botspace.h.
            unsafe {
                let h = dlopen(p.as_ptr(), RTLD_NOW | RTLD_LOCAL);
                assert!(!h.is_null(), "dlopen {path} failed");
                let sym = |name: &str| {
                    let n = CString::new(name).unwrap();
                    let f = dlsym(h, n.as_ptr());
                    assert!(!f.is_null(), "{name} not found in {path}");
                    f
                };
                Lib {
                    open: std::mem::transmute::<*mut c_void, Open>(sym("botspace_service_open")),
                    handle: std::mem::transmute::<*mut c_void, Handle>(sym("botspace_service_handle_request")),
                    free: std::mem::transmute::<*mut c_void, Free>(sym("botspace_bytes_free")),
                    svc_free: std::mem::transmute::<*mut c_void, SvcFree>(sym("botspace_service_free")),
                }
            }
        }
    }

    /// A service opened through the C ABI.
    pub struct Svc<'a> {
        lib: &'a Lib,
        ptr: *mut c_void,
    }

    impl<'a> Svc<'a> {
        pub fn open(lib: &'a Lib, cfg: &str) -> Svc<'a> {
            let mut ptr = std::ptr::null_mut();
            // SAFETY: valid input and output pointers.
            assert_eq!(unsafe { (lib.open)(cfg.as_ptr(), cfg.len(), &mut ptr) }, 0);
            Svc { lib, ptr }
        }
        /// One call, response released; returns the status code's first digit.
        #[inline]
        pub fn call(&self, req: &[u8]) -> u8 {
            let mut b = Bytes { ptr: std::ptr::null_mut(), len: 0 };
            // SAFETY: a live handle and valid pointers; b is freed once.
            unsafe {
                (self.lib.handle)(self.ptr, req.as_ptr(), req.len(), &mut b);
                let first = if b.len > 9 { *b.ptr.add(9) } else { 0 };
                (self.lib.free)(&mut b);
                first
            }
        }
        /// The whole response as text.
        pub fn text(&self, req: &[u8]) -> String {
            let mut b = Bytes { ptr: std::ptr::null_mut(), len: 0 };
            // SAFETY: as above.
            unsafe {
                (self.lib.handle)(self.ptr, req.as_ptr(), req.len(), &mut b);
                let s = String::from_utf8_lossy(std::slice::from_raw_parts(b.ptr, b.len)).into_owned();
                (self.lib.free)(&mut b);
                s
            }
        }
    }

    impl Drop for Svc<'_> {
        fn drop(&mut self) {
            // SAFETY: the handle from open, freed once.
            unsafe { (self.lib.svc_free)(&mut self.ptr) };
        }
    }
}

const CONFIG: &str = r#"{"database":":memory:","admin_secret":"bench-admin-secret-0001","clock":"manual","limits":{"free":{},"standard":{},"official":{}}}"#;

/// Creates a user, a bot and their started private chat through `call`
/// (one whole request in, the whole response out); returns the getMe and
/// sendMessage requests of that bot.
fn setup(call: &dyn Fn(&[u8]) -> String) -> (Vec<u8>, Vec<u8>) {
    let admin = |method: &str, body: &str| -> String {
        let req = format!(
            "POST /admin/{method} HTTP/1.1\r\nHost: bench\r\nAuthorization: Admin bench-admin-secret-0001\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let text = call(req.as_bytes());
        assert!(text.starts_with("HTTP/1.1 200 "), "{method} failed: {text}");
        text.split_once("\r\n\r\n").map(|x| x.1.to_string()).unwrap_or_default()
    };
    let user = pick(&admin("createUser", r#"{"display_name":"Bench User"}"#), "id");
    let bot = admin("createBot", r#"{"display_name":"Bench Bot","handle":"bench_bot"}"#);
    let bot_id = pick(&bot[bot.find("\"bot\":").unwrap()..], "id");
    let token = pick(&bot, "token");
    let chat = pick(&admin("startBot", &format!(r#"{{"user_id":"{user}","bot_id":"{bot_id}"}}"#)), "id");
    let get_me = request("/bot/getMe", &token, "");
    let send =
        request("/bot/sendMessage", &token, &format!(r#"{{"chat_id":"{chat}","text":"hello from the benchmark"}}"#));
    (get_me, send)
}

/// The string value of the first `"key":"` in a JSON text.
fn pick(json: &str, key: &str) -> String {
    let pat = format!("\"{key}\":\"");
    let i = json.find(&pat).unwrap_or_else(|| panic!("no {key} in {json}")) + pat.len();
    let j = json[i..].find('"').unwrap() + i;
    json[i..j].to_string()
}

fn request(path: &str, token: &str, body: &str) -> Vec<u8> {
    let mut r = format!(
        "POST {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bot {token}\r\nContent-Type: application/json\r\n"
    );
    if body.is_empty() {
        r.push_str("\r\n");
    } else {
        r.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    }
    r.into_bytes()
}

fn rust_service() -> Service {
    Service::open(Config::from_json(CONFIG.as_bytes()).unwrap()).unwrap()
}

fn text(v: Vec<u8>) -> String {
    String::from_utf8_lossy(&v).into_owned()
}

/// ns per call of `n` calls of `f` after `n / 10` warm-up calls.
fn time(n: u64, f: &dyn Fn()) -> f64 {
    for _ in 0..n / 10 {
        f();
    }
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

/// One Rust round: ns per getMe and per sendMessage.
///
/// Like any real host (and like the C library, which exports them all),
/// this binary also uses `handle` and `accept_gateway`: a program that
/// calls only `handle_request` lets LLVM inline the core's request router
/// into its single caller, which no host serving HTTP and the gateway gets
/// (see docs/benchmarks.md, "C ABI").
fn rust_round(n: u64) -> (f64, f64) {
    let svc = std::sync::Arc::new(rust_service());
    let (get_me, send) = setup(&|r| text(svc.handle_request(r)));
    assert_eq!(handle_all(&svc, &[&get_me[..]]).len(), 1);
    assert!(svc.accept_gateway(&get_me, svc.now_ms()).connection.is_none());
    let g = time(n, &|| drop(std::hint::black_box(svc.handle_request(std::hint::black_box(&get_me)))));
    let s = time(n, &|| drop(std::hint::black_box(svc.handle_request(std::hint::black_box(&send)))));
    (g, s)
}

/// One C-ABI round in this process (dlopen).
#[cfg(unix)]
fn abi_round(lib: &abi::Lib, n: u64) -> (f64, f64) {
    let svc = abi::Svc::open(lib, CONFIG);
    let (get_me, send) = setup(&|r| svc.text(r));
    let g = time(n, &|| {
        std::hint::black_box(svc.call(std::hint::black_box(&get_me)));
    });
    let s = time(n, &|| {
        std::hint::black_box(svc.call(std::hint::black_box(&send)));
    });
    (g, s)
}

fn c_round(bench: &str, n: u64) -> (f64, f64) {
    let out = Command::new(bench).arg(n.to_string()).output().unwrap_or_else(|e| panic!("cannot run {bench}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{bench} failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    let pick = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().parse::<f64>().unwrap()))
            .unwrap_or_else(|| panic!("no {name} line in: {text}"))
    };
    (pick("getMe "), pick("sendMessage "))
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn best(v: &[f64]) -> f64 {
    v.iter().cloned().fold(f64::INFINITY, f64::min)
}

#[derive(Default)]
struct Series {
    get_me: Vec<f64>,
    send: Vec<f64>,
}

impl Series {
    fn push(&mut self, (g, s): (f64, f64)) {
        self.get_me.push(g);
        self.send.push(s);
    }
}

fn main() {
    let mut c_bench: Option<String> = None;
    let mut so: Option<String> = None;
    let mut rounds = 25usize;
    let mut n = 20_000u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--c-bench" => c_bench = args.next(),
            "--so" => so = args.next(),
            "--rounds" => rounds = args.next().and_then(|v| v.parse().ok()).expect("--rounds N"),
            "-n" => n = args.next().and_then(|v| v.parse().ok()).expect("-n N"),
            "--quick" => {
                rounds = 3;
                n = 5_000;
            }
            other => panic!("unknown argument {other} (--c-bench PATH, --so PATH, --rounds N, -n N, --quick)"),
        }
    }
    #[cfg(unix)]
    let lib = so.as_deref().map(abi::Lib::load);
    #[cfg(not(unix))]
    let _ = &so;
    let (mut rust, mut c, mut inproc) = (Series::default(), Series::default(), Series::default());
    for i in 0..rounds {
        // Alternate which side goes first.
        let mut order: Vec<u8> = vec![0, 1, 2];
        if i % 2 == 1 {
            order.reverse();
        }
        for side in order {
            match side {
                0 => rust.push(rust_round(n)),
                1 => {
                    if let Some(b) = &c_bench {
                        c.push(c_round(b, n));
                    }
                }
                _ =>
                {
                    #[cfg(unix)]
                    if let Some(l) = &lib {
                        inproc.push(abi_round(l, n));
                    }
                }
            }
        }
        eprintln!(
            "round {}: rust {:.0}/{:.0} ns; C program {:.0}/{:.0} ns; C ABI in-process {:.0}/{:.0} ns (getMe/sendMessage)",
            i + 1,
            rust.get_me.last().unwrap(),
            rust.send.last().unwrap(),
            c.get_me.last().copied().unwrap_or(f64::NAN),
            c.send.last().copied().unwrap_or(f64::NAN),
            inproc.get_me.last().copied().unwrap_or(f64::NAN),
            inproc.send.last().copied().unwrap_or(f64::NAN),
        );
    }
    println!("FFI benchmark: {rounds} alternating rounds of {n} calls each, in-memory database, ns per call (best round / median round)");
    println!();
    println!("| call | Rust | C program (C ABI) | C/Rust | C ABI in-process (dlopen) | in-process/Rust |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, r, cc, ip) in
        [("getMe", &rust.get_me, &c.get_me, &inproc.get_me), ("sendMessage", &rust.send, &c.send, &inproc.send)]
    {
        let cell =
            |v: &[f64]| if v.is_empty() { "–".to_string() } else { format!("{:.0} / {:.0}", best(v), median(v)) };
        let ratio = |v: &[f64]| {
            if v.is_empty() {
                "–".to_string()
            } else {
                format!("{:.3} / {:.3}", best(v) / best(r), median(v) / median(r))
            }
        };
        println!("| {name} | {} | {} | {} | {} | {} |", cell(r), cell(cc), ratio(cc), cell(ip), ratio(ip));
    }
}

/// Many requests through the one way in, each answered at once.
fn handle_all<R: AsRef<[u8]>>(svc: &botspace::Service, requests: &[R]) -> Vec<Vec<u8>> {
    let reqs: Vec<botspace::Incoming<'_>> =
        requests.iter().map(|r| botspace::Incoming::bytes(r.as_ref()).at_once()).collect();
    svc.handle(&reqs, svc.now_ms()).into_iter().map(|a| a.now_or_failed(svc)).collect()
}
