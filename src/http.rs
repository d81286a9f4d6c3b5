//! HTTP/1.1 request framing and parsing, and response encoding. Sans-IO: it
//! only ever looks at bytes the host already read.

use crate::error::ApiError;
use std::borrow::Cow;

/// Most header lines a request may carry.
pub(crate) const MAX_HEADERS: usize = 64;
/// Most bytes the request line plus headers may take.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// The memory budget of one connection's answers: a server never takes the
/// next request of a connection (frames it, or reads its socket for it)
/// while it holds more than this many bytes of answers to that connection
/// that the client has not read yet. What it already holds is sent as the
/// client reads; then it takes requests again. So a client
/// that pipelines requests and never reads its answers costs the server at
/// most this figure plus the answers of the requests it took at once (see
/// docs/reliability.md, "Memory per connection"), whatever it sends.
pub const MAX_UNSENT_BYTES_PER_CONNECTION: usize = 64 * 1024;

/// Whether a server may take a connection's next request (frame it from
/// its buffer, or read its socket for one) while `unsent_bytes` of answers
/// to that connection are still waiting for the client to read them: below
/// [`MAX_UNSENT_BYTES_PER_CONNECTION`].
pub fn should_read(unsent_bytes: usize) -> bool {
    unsent_bytes < MAX_UNSENT_BYTES_PER_CONNECTION
}

/// What the bytes buffered from a connection hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framing {
    /// A whole request occupies the first `len` bytes; pass exactly those
    /// to `handle_request` and keep the rest for the next request
    /// (pipelining). `head` is what the framer read from its head, so the
    /// host need not parse it again.
    Complete { len: usize, head: RequestHead },
    /// Read more bytes and ask again.
    Incomplete,
    /// The stream cannot carry a valid request: write this response and close.
    Invalid(Vec<u8>),
}

impl Framing {
    /// The length of a complete request, `None` otherwise.
    pub fn complete_len(&self) -> Option<usize> {
        match self {
            Framing::Complete { len, .. } => Some(*len),
            _ => None,
        }
    }
}

/// What a host needs from a request's head, read by the framer from the
/// one parse it makes: the connection's fate after the answer, a WebSocket
/// upgrade, `Expect: 100-continue`, and where the method and path are.
/// Offsets count from the start of the request's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RequestHead {
    /// Bytes of the request line, the header lines and the empty line.
    pub len: usize,
    /// Where the line after the request line starts (past its LF).
    pub request_line_end: usize,
    /// The method is `request[method_start..method_start + method_len]`.
    pub method_start: usize,
    pub method_len: usize,
    /// The path, without the query: `request[path_start..path_start + path_len]`.
    /// For an absolute-form target (`http://host/path?query`) it is the
    /// path inside it; empty when that URL has no path (`http://host`).
    pub path_start: usize,
    pub path_len: usize,
    /// 1 for HTTP/1.1, 0 for HTTP/1.0.
    pub http_minor: u8,
    /// The connection stays open after the answer: HTTP/1.1 without a
    /// `Connection: close` token, or HTTP/1.0 with a `keep-alive` one.
    pub keep_alive: bool,
    /// A `Connection: close` token is present.
    pub close_token: bool,
    /// `Upgrade: websocket` with a `Connection: upgrade` token.
    pub upgrade: bool,
    /// `Expect: 100-continue`: the client may wait for `100 Continue`
    /// before it sends the body.
    pub expect_continue: bool,
    /// Where the first `Expect` header's name starts, if there is one (a
    /// host whose HTTP stack would answer it again can rename it).
    pub expect_offset: Option<usize>,
}

impl RequestHead {
    /// The method, read from the request's bytes.
    pub fn method<'a>(&self, request: &'a [u8]) -> &'a str {
        slice_str(request, self.method_start, self.method_len)
    }

    /// The path without the query, read from the request's bytes.
    pub fn path<'a>(&self, request: &'a [u8]) -> &'a str {
        slice_str(request, self.path_start, self.path_len)
    }

    /// Reads the head httparse parsed from `buf`.
    fn read(buf: &[u8], req: &httparse::Request<'_, '_>, len: usize) -> RequestHead {
        let offset = |s: &[u8]| (s.as_ptr() as usize).wrapping_sub(buf.as_ptr() as usize).min(buf.len());
        let method = req.method.unwrap_or("");
        let target = req.path.unwrap_or("");
        // The framer reads a head only once its target passed `split_target`.
        let path = split_target(target).map_or(target, |(p, _)| p);
        let method_start = offset(method.as_bytes());
        let request_line_end =
            buf[method_start..len].iter().position(|&b| b == b'\n').map_or(len, |p| method_start + p + 1);
        let has_token = |name: &str, token: &str| {
            req.headers.iter().any(|h| {
                h.name.eq_ignore_ascii_case(name)
                    && std::str::from_utf8(h.value)
                        .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
            })
        };
        let http_minor = req.version.unwrap_or(1);
        let close_token = has_token("connection", "close");
        let keep_alive = !close_token && (http_minor >= 1 || has_token("connection", "keep-alive"));
        let expect = req.headers.iter().find(|h| h.name.eq_ignore_ascii_case("expect"));
        RequestHead {
            len,
            request_line_end,
            method_start,
            method_len: method.len(),
            path_start: offset(path.as_bytes()),
            path_len: path.len(),
            http_minor,
            keep_alive,
            close_token,
            upgrade: has_token("upgrade", "websocket") && has_token("connection", "upgrade"),
            expect_continue: req.headers.iter().any(|h| {
                h.name.eq_ignore_ascii_case("expect") && h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue")
            }),
            expect_offset: expect.map(|h| offset(h.name.as_bytes())),
        }
    }
}

/// Byte classes of a request target (RFC 3986, section 2).
const PCHAR: u8 = 1; // unreserved, sub-delims, ':' and '@', plus '/' in a path
const QCHAR: u8 = 2; // what a query adds: '?'
const HOSTCHAR: u8 = 4; // reg-name: unreserved and sub-delims

const fn target_classes() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        let unreserved = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
        let sub_delim = matches!(b, b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=');
        if unreserved || sub_delim || matches!(b, b':' | b'@' | b'/') {
            t[c] |= PCHAR | QCHAR;
        }
        if b == b'?' {
            t[c] |= QCHAR;
        }
        if unreserved || sub_delim {
            t[c] |= HOSTCHAR;
        }
        c += 1;
    }
    t
}

const TARGET_CLASSES: [u8; 256] = target_classes();

/// True when every byte of `s` is of `class` or a `%` with two hex digits.
fn all_of(s: &[u8], class: u8) -> bool {
    let mut i = 0;
    while i < s.len() {
        if TARGET_CLASSES[s[i] as usize] & class != 0 {
            i += 1;
        } else if s[i] == b'%' && s.len() > i + 2 && s[i + 1].is_ascii_hexdigit() && s[i + 2].is_ascii_hexdigit() {
            i += 3;
        } else {
            return false;
        }
    }
    true
}

/// The path and query of a request target (RFC 9112, section 3.2), or why
/// it is not one: the origin form (`/path?query`), the absolute form
/// (`http://host/path?query`, which a server must accept; its path is
/// taken) and `*` (no method has that path). Only the characters RFC 3986
/// allows: no fragment, no space or control, no `"<>\^`{|}`, no byte
/// beyond ASCII (a client percent-encodes those), so every host's HTTP
/// stack reads the same target the library does.
pub(crate) fn split_target(target: &str) -> Result<(&str, &str), ApiError> {
    let bad = |why: &str| ApiError::invalid_request(format!("the request target is not valid: {why}"));
    let origin = if target.starts_with('/') {
        target
    } else if target == "*" {
        return Ok((target, ""));
    } else {
        let after_scheme = ["http://", "https://"].iter().find_map(|scheme| {
            target.get(..scheme.len()).filter(|s| s.eq_ignore_ascii_case(scheme)).map(|_| &target[scheme.len()..])
        });
        let Some(rest) = after_scheme else {
            return Err(bad("it must be a path starting with / or an http or https URL"));
        };
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        if !valid_authority(&rest[..end]) {
            return Err(bad("the URL's host is not a host name or address with an optional port"));
        }
        &rest[end..]
    };
    let (path, query) = match origin.find('?') {
        Some(i) => (&origin[..i], &origin[i + 1..]),
        None => (origin, ""),
    };
    if !all_of(path.as_bytes(), PCHAR) || !all_of(query.as_bytes(), QCHAR) {
        return Err(bad("it holds a character a URI does not allow (percent-encode it)"));
    }
    Ok((path, query))
}

/// `host [":" port]`: a name (letters, digits, `-._~`, sub-delims; no
/// percent-escape, which hyper's URI parser refuses in a host), a dotted IPv4 address, or a bracketed IPv6 one. No
/// user info: a URL with `user@` is refused (RFC 9110, section 4.2.4).
fn valid_authority(a: &str) -> bool {
    let (host, port) = if let Some(v6) = a.strip_prefix('[') {
        let Some(close) = v6.find(']') else { return false };
        let inside = &v6[..close];
        if inside.is_empty() || !inside.bytes().all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.') {
            return false;
        }
        match &v6[close + 1..] {
            "" => (a, None),
            p => match p.strip_prefix(':') {
                Some(port) => (a, Some(port)),
                None => return false,
            },
        }
    } else {
        match a.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (a, None),
        }
    };
    let host_ok =
        host.starts_with('[') || (!host.is_empty() && !host.contains('%') && all_of(host.as_bytes(), HOSTCHAR));
    let port_ok = port.is_none_or(|p| {
        p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u32>().is_ok_and(|n| n <= 65535)
    });
    host_ok && port_ok
}

fn slice_str(b: &[u8], start: usize, len: usize) -> &str {
    b.get(start..start.saturating_add(len)).and_then(|s| std::str::from_utf8(s).ok()).unwrap_or("")
}

/// A parsed request; the body is borrowed unless it was chunked.
pub(crate) struct Request<'a> {
    pub(crate) method: &'a str,
    pub(crate) path: &'a str,
    pub(crate) query: &'a str,
    /// Only the headers present: a whole `MAX_HEADERS` array would be copied
    /// with every move of the request.
    headers: Vec<(&'a str, &'a [u8])>,
    pub(crate) body: Cow<'a, [u8]>,
    /// Set when the transport rules refuse the request (411/413); reported
    /// after the 405 check so the order of checks holds.
    pub(crate) body_error: Option<ApiError>,
}

impl<'a> Request<'a> {
    /// First value of a header, matched case-insensitively.
    pub(crate) fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| *v)
    }

    /// Every value of a header, in order (a list header may span lines).
    pub(crate) fn header_values<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'a [u8]> + 's {
        self.headers.iter().filter(move |(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| *v)
    }

    pub(crate) fn header_str(&self, name: &str) -> Option<&'a str> {
        self.header(name).and_then(|v| std::str::from_utf8(v).ok()).map(str::trim)
    }

    /// True when a header's comma-separated list contains `token` (case-insensitive).
    pub(crate) fn header_has_token(&self, name: &str, token: &str) -> bool {
        self.headers.iter().any(|(n, v)| {
            n.eq_ignore_ascii_case(name)
                && std::str::from_utf8(v)
                    .map(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
                    .unwrap_or(false)
        })
    }
}

/// Headers a request may carry once: with two, the library and whatever
/// else reads the request (a proxy, the host's own HTTP stack) could each
/// take a different one. (`Content-Length` may repeat with one value, as
/// RFC 9110 section 8.6 allows; a different value is refused as conflicting.)
const SINGLE_HEADERS: [&str; 5] = ["Host", "Transfer-Encoding", "Content-Type", "Authorization", "Idempotency-Key"];

/// The first header of `SINGLE_HEADERS` that is there twice.
fn repeated_header<'h>(names: impl Iterator<Item = &'h str>) -> Option<ApiError> {
    let mut seen = 0u8;
    for name in names {
        if let Some(i) = SINGLE_HEADERS.iter().position(|n| n.eq_ignore_ascii_case(name)) {
            if seen & (1 << i) != 0 {
                return Some(ApiError::duplicate_header(SINGLE_HEADERS[i]));
            }
            seen |= 1 << i;
        }
    }
    None
}

enum BodyLen {
    None,
    Length(usize),
    Chunked,
}

fn body_len(headers: &[httparse::Header<'_>]) -> Result<BodyLen, ApiError> {
    body_len_of(headers.iter().map(|h| (h.name, h.value)))
}

/// [`body_len`] of any request's header lines, in order.
fn body_len_of<'h>(headers: impl Iterator<Item = (&'h str, &'h [u8])> + Clone) -> Result<BodyLen, ApiError> {
    if let Some(e) = repeated_header(headers.clone().map(|(n, _)| n)) {
        return Err(e);
    }
    let mut len = None;
    let mut chunked = false;
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("transfer-encoding") {
            let v = std::str::from_utf8(value).unwrap_or("");
            if v.trim().eq_ignore_ascii_case("chunked") {
                chunked = true;
            } else {
                return Err(ApiError::length_required());
            }
        } else if name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(value).unwrap_or("").trim();
            let n: usize = if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
                // Too many digits for usize is simply a body over any limit.
                v.parse().unwrap_or(usize::MAX)
            } else {
                return Err(ApiError::invalid_request("Content-Length is not a decimal number"));
            };
            if len.is_some_and(|l| l != n) {
                return Err(ApiError::invalid_request("conflicting Content-Length headers"));
            }
            len = Some(n);
        }
    }
    match (chunked, len) {
        // Both present is a request-smuggling shape (RFC 9112 6.3): refuse.
        (true, Some(_)) => Err(ApiError::invalid_request("both Content-Length and Transfer-Encoding are present")),
        (true, None) => Ok(BodyLen::Chunked),
        (false, Some(n)) => Ok(BodyLen::Length(n)),
        (false, None) => Ok(BodyLen::None),
    }
}

/// Scans a chunked body starting at `buf[0]`. Returns `Ok(None)` when more
/// bytes are needed, else `(bytes consumed, decoded length)`. With `out`, the
/// decoded body is appended to it.
/// Chunk-size lines (size plus extensions) longer than this are refused.
const MAX_CHUNK_LINE: usize = 256;

/// Most wire bytes a chunked body of `max` decoded bytes may take: framing
/// overhead is bounded too, so a host never buffers far more than
/// `max_body_bytes` for one request.
fn max_chunked_wire(max: usize) -> usize {
    max.saturating_mul(2).saturating_add(MAX_HEAD_BYTES)
}

/// Where a chunked-body scan stopped, so the next call on a longer buffer
/// goes on from there instead of starting over.
#[derive(Debug, Clone, Copy, Default)]
struct ChunkScan {
    /// Offset of the next chunk-size line (or trailer line).
    pos: usize,
    /// Decoded bytes so far.
    total: usize,
    /// Offset where the trailer fields began, once the last chunk was seen.
    trailer_start: Option<usize>,
}

fn scan_chunked(buf: &[u8], max: usize, out: Option<&mut Vec<u8>>) -> Result<Option<(usize, usize)>, ApiError> {
    scan_chunked_from(buf, max, &mut ChunkScan::default(), out)
}

/// Scans on from `st`; `st` only ever moves past whole lines and chunks.
fn scan_chunked_from(
    buf: &[u8],
    max: usize,
    st: &mut ChunkScan,
    mut out: Option<&mut Vec<u8>>,
) -> Result<Option<(usize, usize)>, ApiError> {
    let bad = || ApiError::invalid_request("malformed chunked body");
    let too_large = || ApiError::payload_too_large(max);
    let wire_limit = max_chunked_wire(max);
    loop {
        if let Some(trailer_start) = st.trailer_start {
            // Trailer fields until an empty line, within the head's limit.
            if st.pos - trailer_start > MAX_HEAD_BYTES {
                return Err(head_too_large());
            }
            let Some(eol) = find_crlf(&buf[st.pos..]) else {
                return if buf.len() - trailer_start > MAX_HEAD_BYTES { Err(head_too_large()) } else { Ok(None) };
            };
            st.pos += eol + 2;
            if eol == 0 {
                return Ok(Some((st.pos, st.total)));
            }
            continue;
        }
        if st.pos > wire_limit {
            return Err(too_large());
        }
        let pos = st.pos;
        let Some(eol) = find_crlf(&buf[pos..(pos + MAX_CHUNK_LINE + 2).min(buf.len())]) else {
            return if buf.len() - pos > MAX_CHUNK_LINE { Err(bad()) } else { Ok(None) };
        };
        let data = pos + eol + 2;
        // httparse reads the size and skips extensions. Spaces or tabs before
        // the size stay accepted, as they were before it did this; a line
        // without a hex digit first would read as size 0, the last chunk.
        let mut start = pos;
        while start < pos + eol && matches!(buf[start], b' ' | b'\t') {
            start += 1;
        }
        if !buf[start].is_ascii_hexdigit() {
            return Err(bad());
        }
        let size = match httparse::parse_chunk_size(&buf[start..data]) {
            Ok(httparse::Status::Complete((used, size))) if start + used == data => size,
            _ => return Err(bad()),
        };
        // At most 8 hex digits' worth, the bound before httparse.
        let size = usize::try_from(size).ok().filter(|&s| s as u64 <= u64::from(u32::MAX)).ok_or_else(bad)?;
        if size == 0 {
            st.pos = data;
            st.trailer_start = Some(data);
            continue;
        }
        let total = st.total.checked_add(size).ok_or_else(bad)?;
        if total > max {
            return Err(ApiError::payload_too_large(max));
        }
        if buf.len() < data + size + 2 {
            // The chunk is not all here: resume at its size line.
            return Ok(None);
        }
        if &buf[data + size..data + size + 2] != b"\r\n" {
            return Err(bad());
        }
        if let Some(o) = out.as_deref_mut() {
            o.extend_from_slice(&buf[data..data + size]);
        }
        st.total = total;
        st.pos = data + size + 2;
    }
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

/// Tells a host reading a stream whether `buf` starts with a whole request.
/// Bodies over `max_body_bytes` are refused from the headers alone, so the
/// host never buffers them. A host that calls this after every read of a
/// slow request should use a [`RequestFramer`] instead.
pub fn frame_request(buf: &[u8], max_body_bytes: usize) -> Framing {
    match frame_request_head(buf, max_body_bytes) {
        HeadFraming::Done(f) => f,
        HeadFraming::Length { head, len } => {
            if buf.len() >= head.len + len {
                Framing::Complete { len: head.len + len, head }
            } else {
                Framing::Incomplete
            }
        }
        HeadFraming::Chunked { head } => match scan_chunked(&buf[head.len..], max_body_bytes, None) {
            Ok(Some((used, _))) => Framing::Complete { len: head.len + used, head },
            Ok(None) => Framing::Incomplete,
            Err(e) => Framing::Invalid(refusal(buf, e).into_response()),
        },
    }
}

/// What the head alone tells.
enum HeadFraming {
    Done(Framing),
    Length { head: RequestHead, len: usize },
    Chunked { head: RequestHead },
}

fn frame_request_head(buf: &[u8], max_body_bytes: usize) -> HeadFraming {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let invalid = |e: ApiError| HeadFraming::Done(Framing::Invalid(refusal(buf, e).into_response()));
    // As RequestFramer refuses them before their head is whole.
    if cannot_start_request(buf) {
        return invalid(malformed(httparse::Error::Token));
    }
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return if buf.len() > MAX_HEAD_BYTES {
                invalid(head_too_large())
            } else {
                HeadFraming::Done(Framing::Incomplete)
            };
        }
        Err(httparse::Error::TooManyHeaders) => return invalid(head_too_large()),
        Err(e) => return invalid(malformed(e)),
    };
    if head_len > MAX_HEAD_BYTES {
        return invalid(head_too_large());
    }
    if let Err(e) = split_target(req.path.unwrap_or("")) {
        return invalid(e);
    }
    let head = RequestHead::read(buf, &req, head_len);
    match body_len(req.headers) {
        Err(e) => invalid(e),
        Ok(BodyLen::None) => HeadFraming::Done(Framing::Complete { len: head_len, head }),
        Ok(BodyLen::Length(n)) if n > max_body_bytes => invalid(ApiError::payload_too_large(max_body_bytes)),
        Ok(BodyLen::Length(len)) => HeadFraming::Length { head, len },
        Ok(BodyLen::Chunked) => HeadFraming::Chunked { head },
    }
}

/// A wrong method (405) outranks what framing finds from the head alone
/// (411/413/431...), as in the check order of docs/errors.md.
fn refusal(buf: &[u8], e: ApiError) -> ApiError {
    match request_target(buf).map(|(m, p)| crate::route::Target::check(m, p)) {
        Some(Err(wrong)) if wrong.status == 405 => wrong,
        _ => e,
    }
}

/// Frames the requests of one connection, resuming where the previous call
/// stopped: a request that arrives a byte at a time costs time linear in
/// its bytes, where calling [`frame_request`] on the growing buffer after
/// every read would scan it from the start each time.
///
/// Give it the connection's unread bytes after every read. Until it answers
/// `Complete` or `Invalid`, each call's buffer must start with the previous
/// call's bytes (the host only appends); after such an answer it starts
/// over, for the next request at the start of the buffer (the host drops
/// the framed bytes first).
#[derive(Debug, Clone)]
pub struct RequestFramer {
    max_body_bytes: usize,
    state: FramerState,
}

#[derive(Debug, Clone, Copy)]
enum FramerState {
    /// Looking for the end of the head; bytes before `searched` hold none.
    Head {
        searched: usize,
    },
    /// The head is read; the body is `len` bytes.
    Length {
        head: RequestHead,
        len: usize,
    },
    Chunked {
        head: RequestHead,
        scan: ChunkScan,
    },
}

impl RequestFramer {
    pub fn new(max_body_bytes: usize) -> RequestFramer {
        RequestFramer { max_body_bytes, state: FramerState::Head { searched: 0 } }
    }

    /// Where the next request in `buf` ends (see [`Framing`]).
    pub fn frame(&mut self, buf: &[u8]) -> Framing {
        let f = self.step(buf);
        if !matches!(f, Framing::Incomplete) {
            self.state = FramerState::Head { searched: 0 };
        }
        f
    }

    /// The most bytes one request can take on the wire under this framer's
    /// limits (head, body or chunked framing, trailer): a buffer at least
    /// this long always frames as `Complete` or `Invalid`, never
    /// `Incomplete`. So a host that reads a connection's socket only while
    /// it buffers fewer unframed bytes than this never needs more input
    /// memory for it. 229 636 bytes with the default 64 KiB body limit.
    pub fn max_request_bytes(&self) -> usize {
        // Head, then the chunked body's worst case: wire bytes up to the
        // last size line (max_chunked_wire), that line, and the longer of a
        // last chunk's data or the trailer, with their CRLFs. A
        // Content-Length body (head plus the body) is shorter.
        MAX_HEAD_BYTES
            .saturating_add(max_chunked_wire(self.max_body_bytes))
            .saturating_add(MAX_CHUNK_LINE)
            .saturating_add(MAX_HEAD_BYTES.max(self.max_body_bytes))
            .saturating_add(4)
    }

    /// The head of the request being framed once it is whole and its
    /// body is not (a host answers `Expect: 100-continue` from it); `None`
    /// before that and after an answer other than `Incomplete`.
    pub fn pending_head(&self) -> Option<&RequestHead> {
        match &self.state {
            FramerState::Head { .. } => None,
            FramerState::Length { head, .. } | FramerState::Chunked { head, .. } => Some(head),
        }
    }

    fn step(&mut self, buf: &[u8]) -> Framing {
        loop {
            match &mut self.state {
                FramerState::Head { searched } => {
                    // The head ends at an empty line (CRLF or bare LF, as
                    // httparse reads them): look only at the new bytes.
                    let from = searched.saturating_sub(3);
                    if head_end(&buf[from..]).is_none() {
                        // Bytes no request line starts with (a TLS
                        // ClientHello, binary) are refused now, not after
                        // the request timeout; only the first bytes are
                        // looked at, so a slow head stays linear.
                        if *searched < START_BYTES && cannot_start_request(buf) {
                            return Framing::Invalid(malformed(httparse::Error::Token).into_response());
                        }
                        *searched = buf.len();
                        if buf.len() > MAX_HEAD_BYTES {
                            return Framing::Invalid(head_too_large().into_response());
                        }
                        return Framing::Incomplete;
                    }
                    // A whole head: parse it once.
                    match frame_request_head(buf, self.max_body_bytes) {
                        HeadFraming::Done(f) => return f,
                        HeadFraming::Length { head, len } => self.state = FramerState::Length { head, len },
                        HeadFraming::Chunked { head } => {
                            self.state = FramerState::Chunked { head, scan: ChunkScan::default() }
                        }
                    }
                }
                FramerState::Length { head, len } => {
                    return if buf.len() >= head.len + *len {
                        Framing::Complete { len: head.len + *len, head: *head }
                    } else {
                        Framing::Incomplete
                    };
                }
                FramerState::Chunked { head, scan } => {
                    let head = *head;
                    return match scan_chunked_from(&buf[head.len..], self.max_body_bytes, scan, None) {
                        Ok(Some((used, _))) => Framing::Complete { len: head.len + used, head },
                        Ok(None) => Framing::Incomplete,
                        Err(e) => Framing::Invalid(refusal(buf, e).into_response()),
                    };
                }
            }
        }
    }
}

/// A whole request, as the framer delimits it, as an `http::Request` (a
/// chunked body decoded, trailer fields dropped), for a host that reads
/// raw sockets and hands requests on to code that takes parsed ones (the
/// typed entry points). The head is parsed once here. `Err` is the
/// answer to send when the bytes are not such a request.
#[cfg(feature = "typed")]
pub fn parse_http_request(request: &[u8]) -> Result<::http::Request<Vec<u8>>, Vec<u8>> {
    let bad = || ApiError::invalid_request("incomplete HTTP request").into_response();
    let mut raw = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut raw);
    let head_len = match req.parse(request) {
        Ok(httparse::Status::Complete(n)) => n,
        _ => return Err(bad()),
    };
    let rest = &request[head_len..];
    let body = match body_len(req.headers) {
        Ok(BodyLen::None) => Vec::new(),
        Ok(BodyLen::Length(n)) => rest.get(..n).ok_or_else(bad)?.to_vec(),
        Ok(BodyLen::Chunked) => {
            let mut out = Vec::new();
            match scan_chunked(rest, usize::MAX, Some(&mut out)) {
                Ok(Some(_)) => out,
                _ => return Err(bad()),
            }
        }
        Err(e) => return Err(e.into_response()),
    };
    let mut out = ::http::Request::new(body);
    let invalid = |what: &str| malformed(what).into_response();
    *out.method_mut() =
        ::http::Method::from_bytes(req.method.unwrap_or("").as_bytes()).map_err(|_| invalid("method"))?;
    *out.uri_mut() = req.path.unwrap_or("").parse().map_err(|_| invalid("target"))?;
    *out.version_mut() = if req.version == Some(0) { ::http::Version::HTTP_10 } else { ::http::Version::HTTP_11 };
    let headers = out.headers_mut();
    headers.reserve(req.headers.len());
    for h in req.headers.iter() {
        // A chunked body is decoded: its length is the body's.
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            continue;
        }
        let name = ::http::HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| invalid("header name"))?;
        let value = ::http::HeaderValue::from_bytes(h.value).map_err(|_| invalid("header value"))?;
        headers.append(name, value);
    }
    Ok(out)
}

/// 400 `invalid_request` for a request whose head cannot be read: `what`
/// names the part (`httparse`'s error, or the part the `http` crate
/// refused). One wording for every way a request comes in, bytes or parts.
fn malformed(what: impl std::fmt::Display) -> ApiError {
    ApiError::invalid_request(format!("malformed HTTP request: {what}"))
}

/// A request a host's runtime already split into strings (a JavaScript
/// fetch `Request`: method, path and query, header pairs) with its whole
/// body, as an `http::Request`, for the typed entry points. A method,
/// target, header name or value the `http` crate refuses (a control
/// character in a value, say) gets the answer the same request gets as
/// bytes from [`Service::handle_request`](crate::Service::handle_request)
/// (`Err`, the answer to send). A `Transfer-Encoding` is dropped, as
/// [`parse_http_request`] drops it: the body is whole.
#[cfg(feature = "typed")]
pub fn http_request_from_parts<'h, B>(
    method: &str,
    target: &str,
    headers: impl IntoIterator<Item = (&'h str, &'h str)>,
    body: B,
) -> Result<::http::Request<B>, Vec<u8>> {
    // Each refusal in httparse's words, as the bytes path says it.
    let refused = |e: httparse::Error| malformed(e).into_response();
    let mut out = ::http::Request::new(body);
    *out.method_mut() = ::http::Method::from_bytes(method.as_bytes()).map_err(|_| refused(httparse::Error::Token))?;
    *out.uri_mut() = target.parse().map_err(|_| refused(httparse::Error::Token))?;
    let map = out.headers_mut();
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("transfer-encoding") {
            continue;
        }
        let name = ::http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| refused(httparse::Error::HeaderName))?;
        let value =
            ::http::HeaderValue::from_bytes(value.as_bytes()).map_err(|_| refused(httparse::Error::HeaderValue))?;
        map.append(name, value);
    }
    Ok(out)
}

/// Where the head's terminating empty line ends in `b`, if it is there.
/// How many of a request's first bytes [`cannot_start_request`] reads.
const START_BYTES: usize = 64;

/// Whether `buf`, the start of a connection's next request, already shows
/// it is none: after the empty lines a request may begin with (which
/// httparse skips), its method is a token (RFC 9110's `tchar`s) ended by a
/// space. A TLS ClientHello (0x16 0x03 …) or any byte that is neither is
/// known to be wrong at once. Reads at most [`START_BYTES`] bytes.
pub(crate) fn cannot_start_request(buf: &[u8]) -> bool {
    let buf = &buf[..buf.len().min(START_BYTES)];
    let start = buf.iter().position(|&b| b != b'\r' && b != b'\n').unwrap_or(buf.len());
    for (i, &b) in buf[start..].iter().enumerate() {
        if b == b' ' {
            // The end of the method, unless there is none.
            return i == 0;
        }
        if !(b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)) {
            return true;
        }
    }
    false
}

/// The answer to a `HEAD` request: `response` without its body. A HEAD
/// answer never has one (RFC 9110 9.3.2); its status and headers, the
/// `Content-Length` too, are those the same request with GET (or, refused,
/// with its refusal) gets.
pub(crate) fn head_answer(response: &[u8]) -> &[u8] {
    match response.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(i) => &response[..i + 4],
        None => response,
    }
}

/// Whether `buf` starts a `HEAD` request (after the empty lines httparse
/// skips), for the answer to a request refused before its head was read.
pub(crate) fn is_head_request(buf: &[u8]) -> bool {
    let start = buf.iter().take(START_BYTES).position(|&b| b != b'\r' && b != b'\n').unwrap_or(0);
    buf[start..].starts_with(b"HEAD ")
}

fn head_end(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(n) = b[i..].iter().position(|&c| c == b'\n') {
        let at = i + n + 1;
        match b.get(at..) {
            Some([b'\n', ..]) => return Some(at + 1),
            Some([b'\r', b'\n', ..]) => return Some(at + 2),
            _ => i = at,
        }
    }
    None
}

/// Method and path (without query) of a request whose head is complete.
pub(crate) fn request_target(buf: &[u8]) -> Option<(&str, &str)> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(_)) => Some((req.method?, split_target(req.path?).ok()?.0)),
        _ => None,
    }
}

fn head_too_large() -> ApiError {
    ApiError::headers_too_large(MAX_HEAD_BYTES, MAX_HEADERS)
}

/// Parses one complete request. Transport errors that come after the 405
/// check in the order of docs/errors.md are left in `body_error`.
pub(crate) fn parse_request(buf: &[u8], max_body_bytes: usize) -> Result<Request<'_>, ApiError> {
    let mut raw = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut raw);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err(ApiError::invalid_request("incomplete HTTP request")),
        Err(httparse::Error::TooManyHeaders) => return Err(head_too_large()),
        Err(e) => return Err(malformed(e)),
    };
    if head_len > MAX_HEAD_BYTES {
        return Err(head_too_large());
    }
    let method = req.method.unwrap_or("");
    let (path, query) = split_target(req.path.unwrap_or(""))?;
    let headers: Vec<(&str, &[u8])> = req.headers.iter().map(|h| (h.name, h.value)).collect();
    let rest = &buf[head_len..];
    let mut body_error = None;
    let body: Cow<'_, [u8]> = match body_len(req.headers) {
        Err(e) => {
            body_error = Some(e);
            Cow::Borrowed(&[])
        }
        Ok(BodyLen::None) => {
            if !rest.is_empty() {
                body_error = Some(ApiError::length_required());
            }
            Cow::Borrowed(&[])
        }
        Ok(BodyLen::Length(n)) => {
            if n > max_body_bytes {
                body_error = Some(ApiError::payload_too_large(max_body_bytes));
                Cow::Borrowed(&[])
            } else if rest.len() < n {
                return Err(ApiError::invalid_request("request body is shorter than Content-Length"));
            } else {
                Cow::Borrowed(&rest[..n])
            }
        }
        Ok(BodyLen::Chunked) => {
            let mut out = Vec::new();
            match scan_chunked(rest, max_body_bytes, Some(&mut out)) {
                Ok(Some(_)) => Cow::Owned(out),
                Ok(None) => return Err(ApiError::invalid_request("incomplete chunked body")),
                Err(e) => {
                    body_error = Some(e);
                    Cow::Borrowed(&[])
                }
            }
        }
    };
    Ok(Request { method, path, query, headers, body, body_error })
}

/// Parses a request a host's HTTP stack has already read (its method,
/// target, header lines and whole body; a chunked body decoded): the same
/// rules as [`parse_request`] — the head's limits, the target, the headers
/// that may appear once, `Transfer-Encoding` and `Content-Length`, the body
/// limit — on what that stack handed over, without writing it out as
/// bytes. A body with no length header is the host's to delimit.
#[cfg(feature = "typed")]
pub(crate) fn parse_parts<'a>(
    method: &'a str,
    uri: &'a ::http::Uri,
    headers: &'a ::http::HeaderMap,
    body: &'a [u8],
    max_body_bytes: usize,
) -> Result<Request<'a>, ApiError> {
    let (path, query) = typed_head(method, uri, headers)?;
    let headers: Vec<(&str, &[u8])> = headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())).collect();
    let too_large = || Some(ApiError::payload_too_large(max_body_bytes));
    let (body, body_error) = match body_len_of(headers.iter().copied()) {
        Err(e) => (&[][..], Some(e)),
        Ok(BodyLen::Length(n)) if n > max_body_bytes => (&[][..], too_large()),
        Ok(BodyLen::Length(n)) if body.len() < n => {
            return Err(ApiError::invalid_request("request body is shorter than Content-Length"));
        }
        Ok(BodyLen::Length(n)) => (&body[..n], None),
        Ok(BodyLen::None | BodyLen::Chunked) if body.len() > max_body_bytes => (&[][..], too_large()),
        Ok(BodyLen::None | BodyLen::Chunked) => (body, None),
    };
    Ok(Request { method, path, query, headers, body: Cow::Borrowed(body), body_error })
}

/// What framing refuses from a head alone ([`frame_request`]'s `Invalid`),
/// for a parsed head whose body is still to be read: the host then reads
/// no body the core would refuse.
#[cfg(feature = "typed")]
pub(crate) fn check_parts(
    method: &str,
    uri: &::http::Uri,
    headers: &::http::HeaderMap,
    max_body_bytes: usize,
) -> Result<(), ApiError> {
    let refused = match typed_head(method, uri, headers) {
        Err(e) => e,
        Ok(_) => {
            match body_len_of(headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())).collect::<Vec<_>>().into_iter()) {
                Err(e) => e,
                Ok(BodyLen::Length(n)) if n > max_body_bytes => ApiError::payload_too_large(max_body_bytes),
                Ok(_) => return Ok(()),
            }
        }
    };
    // A wrong method (405) outranks them, as in `refusal`.
    match typed_target(uri).map(|(path, _)| crate::route::Target::check(method, path)) {
        Ok(Err(wrong)) if wrong.status == 405 => Err(wrong),
        _ => Err(refused),
    }
}

/// A parsed head's path and query, within the limits of a head on the wire.
#[cfg(feature = "typed")]
fn typed_head<'a>(
    method: &str,
    uri: &'a ::http::Uri,
    headers: &::http::HeaderMap,
) -> Result<(&'a str, &'a str), ApiError> {
    let target = typed_target(uri)?;
    // The head's size as its lines would take on the wire.
    let target_len = uri.path_and_query().map_or(1, |p| p.as_str().len());
    let lines: usize = headers.iter().map(|(n, v)| n.as_str().len() + v.len() + 4).sum();
    if headers.len() > MAX_HEADERS || method.len() + target_len + 13 + lines > MAX_HEAD_BYTES {
        return Err(head_too_large());
    }
    Ok(target)
}

/// The path and query of a parsed request's target, by [`split_target`]'s
/// rules.
#[cfg(feature = "typed")]
fn typed_target(uri: &::http::Uri) -> Result<(&str, &str), ApiError> {
    if uri.scheme().is_some() {
        // The absolute form (rare): checked whole, then its path is taken.
        split_target(&uri.to_string())?;
        return Ok((uri.path(), uri.query().unwrap_or("")));
    }
    match (uri.authority(), uri.path_and_query()) {
        // The authority form (CONNECT) is no target of this server's.
        (Some(a), _) => split_target(a.as_str()),
        (None, Some(pq)) => split_target(pq.as_str()),
        (None, None) => Ok(("/", "")),
    }
}

/// The standard reason phrase of a status (IANA's HTTP status code
/// registry, RFC 9110), from the `http` crate. Public for a host that
/// builds its response from a status (the WASM fetch adapter's
/// `statusText`): the phrase the core writes on the wire.
pub fn reason(status: u16) -> &'static str {
    match status {
        // RFC 9110 renamed 413; the http crate still has RFC 7231's
        // "Payload Too Large".
        413 => "Content Too Large",
        _ => ::http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("Unknown"),
    }
}

/// Encodes a JSON response with exact `Content-Length`.
pub(crate) fn response(status: u16, extra: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    response_parts(status, extra, &[body])
}

fn push_decimal(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// A response whose body is the concatenation of `parts`, written once.
fn response_parts(status: u16, extra: &[(&str, &str)], parts: &[&[u8]]) -> Vec<u8> {
    typed_response_parts(status, "application/json", extra, parts)
}

/// A 200 whose body is not JSON: `content_type` says what it is (a
/// database image, `exportDatabase`).
pub(crate) fn typed_response(content_type: &str, extra: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    typed_response_parts(200, content_type, extra, &[body])
}

fn typed_response_parts(status: u16, content_type: &str, extra: &[(&str, &str)], parts: &[&[u8]]) -> Vec<u8> {
    let body_len: usize = parts.iter().map(|p| p.len()).sum();
    // Exact size: a host that takes ownership (the C ABI's boxed slice)
    // then needs no reallocation.
    let digits = body_len.checked_ilog10().unwrap_or(0) as usize + 1;
    let head = 9 + 3 + 1 + reason(status).len() + 2 + 16 + content_type.len() + 16 + digits + 2;
    let extra_len: usize = extra.iter().map(|(k, v)| k.len() + 2 + v.len() + 2).sum();
    let mut out = Vec::with_capacity(head + extra_len + 2 + body_len);
    // Plain byte pushes: this runs for every response, and core::fmt is a
    // measurable share of a getMe (more so in WebAssembly).
    out.extend_from_slice(b"HTTP/1.1 ");
    push_decimal(&mut out, status as usize);
    out.push(b' ');
    out.extend_from_slice(reason(status).as_bytes());
    out.extend_from_slice(b"\r\nContent-Type: ");
    out.extend_from_slice(content_type.as_bytes());
    out.extend_from_slice(b"\r\nContent-Length: ");
    push_decimal(&mut out, body_len);
    out.extend_from_slice(b"\r\n");
    for (k, v) in extra {
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    for p in parts {
        out.extend_from_slice(p);
    }
    out
}

/// `{"ok":true,"result":<result>}` as a 200 response.
pub(crate) fn ok_response(result_json: &[u8]) -> Vec<u8> {
    ok_response_with(result_json, &[])
}

/// [`ok_response`] with extra headers (a counted request's `X-RateLimit-*`).
pub(crate) fn ok_response_with(result_json: &[u8], extra: &[(&str, &str)]) -> Vec<u8> {
    const OPEN: &[u8] = b"{\"ok\":true,\"result\":";
    response_parts(200, extra, &[OPEN, result_json, b"}"])
}

impl ApiError {
    /// The whole HTTP response for this error.
    pub fn into_response(self) -> Vec<u8> {
        let body = self.body();
        let extra: Vec<(&str, &str)> = self.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        response(self.status, &extra, &body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_is_allocated_to_its_exact_size() {
        for (status, extra, body) in [
            (200, vec![], &b"{}"[..]),
            (429, vec![("Retry-After", "1")], &b"{\"ok\":false}"[..]),
            (405, vec![("Allow", "POST")], &[b'x'; 1000][..]),
            (101, vec![], &b""[..]),
        ] {
            let r = response(status, &extra, body);
            assert_eq!(r.len(), r.capacity(), "status {status}");
        }
        let r = ok_response(b"true");
        assert_eq!(r.len(), r.capacity());
        assert_eq!(r, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 25\r\n\r\n{\"ok\":true,\"result\":true}");
        assert_eq!(r.len(), r.capacity());
    }
}

#[cfg(test)]
mod chunked_limits {
    use super::*;

    fn head() -> Vec<u8> {
        b"POST /bot/getMe HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n".to_vec()
    }

    fn status(f: Framing) -> Option<u16> {
        match f {
            Framing::Invalid(r) => Some(std::str::from_utf8(&r[9..12]).unwrap().parse().unwrap()),
            _ => None,
        }
    }

    #[test]
    fn chunk_extensions_cannot_inflate_the_wire_size() {
        let mut req = head();
        for _ in 0..1000 {
            req.extend_from_slice(b"1;");
            req.extend_from_slice(&[b'a'; 200]);
            req.extend_from_slice(b"\r\n \r\n");
        }
        req.extend_from_slice(b"0\r\n\r\n");
        // 1000 body bytes under a 1024 limit, but ~200 KB of framing.
        assert_eq!(status(frame_request(&req, 1024)), Some(413));
    }

    #[test]
    fn an_overlong_chunk_line_is_refused() {
        let mut req = head();
        req.extend_from_slice(b"1;");
        req.extend_from_slice(&[b'a'; 300]);
        assert_eq!(status(frame_request(&req, 65536)), Some(400));
    }

    #[test]
    fn endless_trailers_are_refused() {
        let mut req = head();
        req.extend_from_slice(b"0\r\n");
        for _ in 0..3000 {
            req.extend_from_slice(b"X-T: v\r\n");
        }
        let f = frame_request(&req, 65536);
        assert_eq!(status(f.clone()), Some(431), "{f:?}");
    }

    #[test]
    fn a_content_length_beyond_usize_is_413() {
        let req = b"POST /bot/getMe HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n";
        assert_eq!(status(frame_request(req, 65536)), Some(413));
    }

    #[test]
    fn small_chunks_within_the_limits_still_decode() {
        let mut req = head();
        for _ in 0..100 {
            req.extend_from_slice(b"1\r\n \r\n");
        }
        req.extend_from_slice(b"0\r\n\r\n");
        assert_eq!(frame_request(&req, 1024).complete_len(), Some(req.len()));
    }

    /// Whatever a stream holds, a buffer of `max_request_bytes` of it frames
    /// as Complete or Invalid: a host that stops reading there never waits
    /// for bytes it will not read. The streams below push each way of
    /// staying Incomplete (head, Content-Length body, chunk lines, chunk
    /// data, trailer) to its limit.
    #[test]
    fn a_buffer_of_max_request_bytes_is_never_incomplete() {
        for max in [0usize, 1, 1024, 65536, 1 << 20] {
            let bound = RequestFramer::new(max).max_request_bytes();
            let pad = |n: usize| vec![b'a'; n];
            let mut streams: Vec<Vec<u8>> = Vec::new();
            // A head that never ends.
            streams.push([&b"POST /bot/getMe HTTP/1.1\r\nX: "[..], &pad(bound)].concat());
            // A head just under the limit, then the largest body.
            let big_head = |te: &str| {
                let line = format!("POST /bot/getMe HTTP/1.1\r\n{te}\r\n");
                let mut h = line.into_bytes();
                let fill = MAX_HEAD_BYTES - h.len() - 2 - 5;
                h.extend_from_slice(b"X: ");
                h.extend_from_slice(&pad(fill));
                h.extend_from_slice(b"\r\n\r\n");
                assert_eq!(h.len(), MAX_HEAD_BYTES);
                h
            };
            streams.push([big_head(&format!("Content-Length: {max}")), pad(max)].concat());
            // Chunked: one-byte chunks with long extensions up to the wire
            // limit, then the largest chunk left, or the longest trailer.
            let mut chunked = big_head("Transfer-Encoding: chunked");
            let start = chunked.len();
            let ext = [&b"1;"[..], &pad(MAX_CHUNK_LINE - 4), b"\r\nx\r\n"].concat();
            let mut total = 0;
            while chunked.len() - start + ext.len() <= max_chunked_wire(max) && total + 2 <= max {
                chunked.extend_from_slice(&ext);
                total += 1;
            }
            let mut last = chunked.clone();
            let rest = max - total;
            if rest > 0 {
                last.extend_from_slice(format!("{rest:x};").as_bytes());
                let line = MAX_CHUNK_LINE - format!("{rest:x};").len();
                last.extend_from_slice(&pad(line));
                last.extend_from_slice(b"\r\n");
                last.extend_from_slice(&pad(rest));
                last.extend_from_slice(b"\r\n");
            }
            last.extend_from_slice(b"0\r\n\r\n");
            streams.push(last);
            let mut trailer = chunked;
            trailer.extend_from_slice(b"0\r\n");
            while trailer.len() < bound + 10 {
                trailer.extend_from_slice(b"X-T: v\r\n");
            }
            streams.push(trailer);
            for (i, s) in streams.iter().enumerate() {
                // The whole stream at once, and grown a piece at a time.
                let cut = &s[..s.len().min(bound)];
                let mut fr = RequestFramer::new(max);
                let mut f = Framing::Incomplete;
                for n in (1..=cut.len()).step_by(4093).chain([cut.len()]) {
                    f = fr.frame(&cut[..n]);
                    if !matches!(f, Framing::Incomplete) {
                        break;
                    }
                }
                // Cut at the bound, or whole (a finished request).
                assert!(!matches!(f, Framing::Incomplete), "max {max}, stream {i}: {} bytes incomplete", cut.len());
                assert!(!matches!(RequestFramer::new(max).frame(cut), Framing::Incomplete), "max {max}, stream {i}");
            }
        }
        assert_eq!(RequestFramer::new(65536).max_request_bytes(), 229_636);
    }

    #[test]
    fn bytes_no_request_starts_with_are_refused_by_both_framers_at_once() {
        for start in [&b"\x16\x03\x01\x02\x00"[..], b"\x00", b"\xff\xfe", b"GE\x01", b" ", b"\r\n GET", b"(GET"] {
            assert!(cannot_start_request(start), "{start:?}");
            for f in [frame_request(start, 64), RequestFramer::new(64).frame(start)] {
                let Framing::Invalid(r) = f else { panic!("{start:?}: {f:?}") };
                let r = String::from_utf8(r).unwrap();
                assert!(r.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{r}");
                assert!(r.ends_with("\"description\":\"malformed HTTP request: invalid token\"}"), "{r}");
            }
        }
        // Any prefix of a request, and of a method no route has, waits.
        let get = b"\r\nGET /bot/getMe HTTP/1.1\r\nHost: x\r\n";
        for n in 0..get.len() {
            assert!(!cannot_start_request(&get[..n]), "{n}");
            assert_eq!(RequestFramer::new(64).frame(&get[..n]), Framing::Incomplete, "{n}");
        }
        for ok in [&b"M-SEARCH * HTTP/1.1"[..], b"X~!#$%&'*+.^_`|", &[b'A'; 200]] {
            assert!(!cannot_start_request(ok), "{ok:?}");
        }
        // Past its first 64 bytes, a request is no longer looked at here.
        let mut long = vec![b'A'; START_BYTES];
        long.push(0);
        assert!(!cannot_start_request(&long));
    }

    #[test]
    fn a_head_answer_is_the_head_alone() {
        let r = b"HTTP/1.1 405 Method Not Allowed\r\nAllow: POST\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(head_answer(r), &r[..r.len() - 2]);
        assert_eq!(head_answer(b"HTTP/1.1 200 OK\r\n\r\n"), b"HTTP/1.1 200 OK\r\n\r\n");
        assert!(is_head_request(b"HEAD / HTTP/1.1"));
        assert!(is_head_request(b"\r\nHEAD /x"));
        assert!(!is_head_request(b"HEADER / HTTP/1.1"));
        assert!(!is_head_request(b"GET / HTTP/1.1"));
    }

    #[test]
    fn should_read_below_the_budget_only() {
        assert!(should_read(0));
        assert!(should_read(MAX_UNSENT_BYTES_PER_CONNECTION - 1));
        assert!(!should_read(MAX_UNSENT_BYTES_PER_CONNECTION));
        assert!(!should_read(usize::MAX));
    }

    /// httparse's `parse_chunk_size` reads the size lines; what it accepts
    /// and refuses is what the hand-written reader did.
    #[test]
    fn chunk_size_lines_read_as_before_httparse() {
        let framed = |body: &[u8]| {
            let mut req = head();
            req.extend_from_slice(body);
            frame_request(&req, 1 << 20)
        };
        let whole = |body: &[u8]| Some(head().len() + body.len());
        for ok in [
            &b"2\r\n{}\r\n0\r\n\r\n"[..],
            b"2;name=value\r\n{}\r\n0\r\n\r\n",
            b"  2\r\n{}\r\n0\r\n\r\n",
            b"2 \r\n{}\r\n0\r\n\r\n",
            b"A\r\n{\"a\":\"bc\"}\r\n0\r\n\r\n",
            b"0000000\r\n\r\n",
        ] {
            assert_eq!(framed(ok).complete_len(), whole(ok), "{}", String::from_utf8_lossy(ok));
        }
        for bad in [&b"\r\n{}\r\n0\r\n\r\n"[..], b";x\r\n", b"g\r\n", b"2 2\r\n", b"100000000\r\n"] {
            assert_eq!(status(framed(bad)), Some(400), "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(framed(b"2\r\n{"), Framing::Incomplete);
    }
}
