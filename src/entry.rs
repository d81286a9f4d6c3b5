//! What a request is when it enters the core: HTTP/1.1 bytes a host read
//! from a socket (C, WebAssembly, the Rust server's front end), or an
//! `http::Request` a host's own HTTP stack already parsed (hyper, axum).
//! Either is parsed once, into the same borrowed view, and from there takes
//! the same way through the core: no host writes a parsed request back out
//! as bytes for the core to parse again.

use crate::error::ApiError;
use crate::http::Request;

/// A request as a core entry point received it.
#[derive(Clone, Copy)]
pub(crate) enum Input<'a> {
    /// One whole HTTP/1.1 request (as the framer delimits it).
    Wire(&'a [u8]),
    /// A request parsed by the host's HTTP stack, with its whole body.
    #[cfg(feature = "typed")]
    Typed { method: &'a http::Method, uri: &'a http::Uri, headers: &'a http::HeaderMap, body: &'a [u8] },
}

impl<'a> Input<'a> {
    #[cfg(feature = "typed")]
    pub(crate) fn of<B: AsRef<[u8]>>(req: &'a http::Request<B>) -> Input<'a> {
        Input::Typed { method: req.method(), uri: req.uri(), headers: req.headers(), body: req.body().as_ref() }
    }

    /// The request's view, by the transport rules of `crate::http`.
    pub(crate) fn parse(self, max_body_bytes: usize) -> Result<Request<'a>, ApiError> {
        match self {
            Input::Wire(bytes) => crate::http::parse_request(bytes, max_body_bytes),
            #[cfg(feature = "typed")]
            Input::Typed { method, uri, headers, body } => {
                crate::http::parse_parts(method.as_str(), uri, headers, body, max_body_bytes)
            }
        }
    }

    /// The path without the query, as the request line names it (for the
    /// metrics of a request that did not parse, and the operations paths).
    pub(crate) fn path(self) -> Option<&'a str> {
        match self {
            Input::Wire(bytes) => {
                // Read loosely: the request may not parse.
                let line_end = bytes.iter().position(|&b| b == b'\r' || b == b'\n').unwrap_or(bytes.len());
                let target = bytes[..line_end].split(|&b| b == b' ').nth(1).unwrap_or(b"");
                std::str::from_utf8(target.split(|&b| b == b'?').next().unwrap_or(b"")).ok()
            }
            #[cfg(feature = "typed")]
            Input::Typed { uri, .. } => Some(uri.path()),
        }
    }

    /// A copy that outlives the caller's request (a group commit's queue).
    pub(crate) fn to_owned(self) -> Owned {
        match self {
            Input::Wire(bytes) => Owned::Wire(bytes.to_vec()),
            #[cfg(feature = "typed")]
            Input::Typed { method, uri, headers, body } => {
                let mut r = http::Request::new(body.to_vec());
                *r.method_mut() = method.clone();
                *r.uri_mut() = uri.clone();
                *r.headers_mut() = headers.clone();
                Owned::Typed(Box::new(r))
            }
        }
    }
}

/// One request a host hands the core ([`crate::Service::handle`]): HTTP/1.1
/// bytes as its socket delivered them, or a request its HTTP stack parsed,
/// and, when the host knows it, who sent it.
///
/// ```
/// use botspace::Incoming;
/// let req = b"POST /bot/getMe HTTP/1.1\r\nHost: x\r\n\r\n";
/// let one = Incoming::bytes(req).from_peer("203.0.113.7");
/// # let _ = one;
/// ```
#[derive(Clone, Copy)]
pub struct Incoming<'a> {
    pub(crate) input: Input<'a>,
    /// The immediate peer's address (or any stable client key): admin
    /// logins are throttled per client, and the audit log names it.
    pub(crate) peer: Option<&'a str>,
    /// A `getUpdates` may park ([`crate::Handled::Parked`]).
    pub(crate) may_park: bool,
    /// It arrived concurrently with the others of its slice
    /// ([`Incoming::unordered`]).
    pub(crate) unordered: bool,
}

impl<'a> Incoming<'a> {
    /// One whole HTTP/1.1 request, as the framer
    /// ([`crate::RequestFramer`]) delimits it.
    pub fn bytes(request: &'a [u8]) -> Incoming<'a> {
        Incoming { input: Input::Wire(request), peer: None, may_park: true, unordered: false }
    }

    /// A request the host's HTTP stack parsed, its body read whole (a
    /// chunked body decoded): read where it is, with no second parse.
    #[cfg(feature = "typed")]
    pub fn http<B: AsRef<[u8]>>(request: &'a http::Request<B>) -> Incoming<'a> {
        Incoming { input: Input::of(request), peer: None, may_park: true, unordered: false }
    }

    /// Who sent it: the IP address of the immediate peer, or any stable
    /// client key. With it, admin logins are throttled per client (10
    /// attempts at once, then one every 6 s, and 50 then one every 1.2 s
    /// per /24 or /64; beyond that 429 `rate_limited` with scope
    /// `admin_auth`), behind `trusted_proxies` the forwarded client counts,
    /// and a host-API change is audited with that client.
    pub fn from_peer(self, peer: &'a str) -> Incoming<'a> {
        Incoming { peer: Some(peer), ..self }
    }

    /// Answered now, never parked: a `getUpdates` with a `timeout` that
    /// finds nothing answers `[]` at once, as with `timeout` 0. For a host
    /// that cannot hold a request open (a batch API, a one-shot call).
    pub fn at_once(self) -> Incoming<'a> {
        Incoming { may_park: false, ..self }
    }

    /// It arrived concurrently with the others of the slice (each from a
    /// connection of its own, as a batch queue's take): no order among them
    /// is the client's, so on a database shared by several nodes a run of
    /// such requests commits in the one lock order every node's groups
    /// use, and two nodes' groups never deadlock. Without it a slice's
    /// order is kept.
    pub fn unordered(self) -> Incoming<'a> {
        Incoming { unordered: true, ..self }
    }
}

/// An [`Input`] that owns its request.
pub(crate) enum Owned {
    Wire(Vec<u8>),
    /// Boxed: a queue of wire requests stays small.
    #[cfg(feature = "typed")]
    Typed(Box<http::Request<Vec<u8>>>),
}

impl Owned {
    pub(crate) fn input(&self) -> Input<'_> {
        match self {
            Owned::Wire(b) => Input::Wire(b),
            #[cfg(feature = "typed")]
            Owned::Typed(r) => Input::of(r),
        }
    }
}

/// An answer of the core (which writes each one once, as HTTP/1.1 bytes:
/// status line, header lines, body) as an `http::Response`, for a host whose
/// HTTP stack writes the status line and headers itself. The head is read
/// where the core put it; the body keeps the core's buffer. Anything but an
/// answer of the core (a bug) becomes a bare 500, never a panic.
#[cfg(feature = "typed")]
pub fn into_http_response(mut raw: Vec<u8>) -> http::Response<Vec<u8>> {
    let Some((status, headers, head_len)) = read_head(&raw) else {
        let mut r = http::Response::new(Vec::new());
        *r.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
        return r;
    };
    raw.drain(..head_len);
    let mut r = http::Response::new(raw);
    *r.status_mut() = status;
    *r.headers_mut() = headers;
    r
}

#[cfg(feature = "typed")]
fn read_head(raw: &[u8]) -> Option<(http::StatusCode, http::HeaderMap, usize)> {
    let status = http::StatusCode::from_bytes(raw.get(9..12)?).ok()?;
    let mut at = raw.windows(2).position(|w| w == b"\r\n")? + 2;
    let mut headers = http::HeaderMap::with_capacity(4);
    loop {
        let end = at + raw.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
        if end == at {
            return Some((status, headers, end + 2));
        }
        let line = &raw[at..end];
        let colon = line.iter().position(|&b| b == b':')?;
        let value = line[colon + 1..].trim_ascii_start();
        headers.append(http::HeaderName::from_bytes(&line[..colon]).ok()?, http::HeaderValue::from_bytes(value).ok()?);
        at = end + 2;
    }
}

/// An answer as HTTP/1.1 bytes again, for a host that reads and writes its
/// own sockets but answers through the typed entry points: always
/// HTTP/1.1, whatever the request's version (RFC 9110, section 6.2), with
/// the `Connection` header the host says the request's head calls for
/// (`close`, `keep-alive`, or none). The status line is the core's, with
/// the standard reason phrase; header names are written in title case, as
/// the core writes its own.
#[cfg(feature = "typed")]
pub fn http_response_bytes(resp: &http::Response<Vec<u8>>, connection: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(160 + resp.body().len());
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(resp.status().as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(resp.status().canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    let mut line = |name: &str, value: &[u8]| {
        // Title case, as the core writes its names.
        let mut up = true;
        for b in name.bytes() {
            out.push(if up { b.to_ascii_uppercase() } else { b });
            up = b == b'-';
        }
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    };
    for (name, value) in resp.headers() {
        line(name.as_str(), value.as_bytes());
    }
    if let Some(c) = connection {
        line("connection", c.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(resp.body());
    out
}

#[cfg(all(test, feature = "typed"))]
mod tests {
    use super::*;

    #[test]
    fn an_answer_keeps_its_status_headers_and_body() {
        let r = into_http_response(
            b"HTTP/1.1 405 Method Not Allowed\r\nAllow: POST\r\nContent-Length: 2\r\n\r\n{}".to_vec(),
        );
        assert_eq!(r.status(), 405);
        assert_eq!(r.headers()["allow"], "POST");
        assert_eq!(r.headers()["content-length"], "2");
        assert_eq!(r.body(), b"{}");
        let r = into_http_response(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n".to_vec());
        assert_eq!((r.status(), r.headers().len(), r.body().len()), (http::StatusCode::SWITCHING_PROTOCOLS, 1, 0));
        for bad in [&b"garbage"[..], b"HTTP/1.1 200 OK\r\nNo-End: x\r\n", b"HTTP/1.1 2x0 OK\r\n\r\n"] {
            let r = into_http_response(bad.to_vec());
            assert_eq!((r.status(), r.body().len()), (http::StatusCode::INTERNAL_SERVER_ERROR, 0));
        }
    }

    #[test]
    fn a_parsed_request_meets_the_rules_of_the_bytes_it_came_from() {
        fn view(r: &http::Request<Vec<u8>>) -> Option<(String, String, Vec<u8>)> {
            let q = Input::of(r).parse(1024).ok()?;
            Some((q.path.to_string(), q.query.to_string(), q.body.to_vec()))
        }
        let owned = |p: &str, q: &str, b: &[u8]| Some((p.to_string(), q.to_string(), b.to_vec()));
        let get_me = http::Request::post("/bot/getMe?x=1").header("content-length", "2").body(b"{}".to_vec()).unwrap();
        assert_eq!(view(&get_me), owned("/bot/getMe", "x=1", b"{}"));
        let absolute = http::Request::post("http://h:80/bot/getMe").body(Vec::new()).unwrap();
        assert_eq!(view(&absolute), owned("/bot/getMe", "", b""));
        let code = |r: http::Request<Vec<u8>>| match Input::of(&r).parse(1024) {
            Ok(q) => q.body_error.map(|e| e.code),
            Err(e) => Some(e.code),
        };
        let code = |r| code(r).map(|c: crate::ErrorCode| c.as_str());
        let post = || http::Request::post("/bot/getMe");
        assert_eq!(
            code(post().header("host", "a").header("host", "b").body(vec![]).unwrap()),
            Some("duplicate_header")
        );
        assert_eq!(code(post().header("transfer-encoding", "gzip").body(vec![]).unwrap()), Some("length_required"));
        assert_eq!(code(post().body(vec![0; 1025]).unwrap()), Some("payload_too_large"));
        assert_eq!(code(post().header("content-length", "9999").body(vec![]).unwrap()), Some("payload_too_large"));
        assert_eq!(code(post().header("transfer-encoding", "chunked").body(vec![1; 1024]).unwrap()), None);
        assert_eq!(code(http::Request::post("/bot/get%zzMe").body(vec![]).unwrap()), Some("invalid_request"));
        assert_eq!(code(http::Request::post("ftp://h/bot/getMe").body(vec![]).unwrap()), Some("invalid_request"));
        let mut many = post();
        for i in 0..65 {
            many = many.header(format!("x-h{i}"), "v");
        }
        assert_eq!(code(many.body(vec![]).unwrap()), Some("headers_too_large"));
        let long = post().header("x-long", "a".repeat(17 * 1024)).body(vec![]).unwrap();
        assert_eq!(code(long), Some("headers_too_large"));
    }
}
