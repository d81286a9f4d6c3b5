//! Where a request ends in a connection's bytes: the stateless
//! `botspace_service_frame_request`'s result and the resuming framer
//! handle (`botspace_request_framer`) with the head it read.

use crate::boundary::Handle;
use crate::bytes::botspace_bytes;
use crate::service::botspace_service;
use crate::status::botspace_status;
use botspace::Framing;

/// What `botspace_service_frame_request` found at the start of a buffer.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum botspace_framing_kind {
    /// A whole request occupies the first `length` bytes: pass exactly those
    /// to `botspace_service_handle_request` (or `botspace_gateway_accept`)
    /// and keep the rest for the next request (pipelining).
    Complete = 0,
    /// Read more bytes and ask again.
    Incomplete = 1,
    /// The stream cannot carry a valid request: write `error_response`,
    /// then close the connection.
    Invalid = 2,
}

/// The result of `botspace_service_frame_request`. `error_response` is
/// `{NULL, 0}` unless `kind` is `BOTSPACE_FRAMING_KIND_INVALID`; releasing it
/// with `botspace_bytes_free` is always correct.
#[repr(C)]
#[derive(Debug)]
pub struct botspace_framing {
    pub kind: botspace_framing_kind,
    /// Length of the complete request (`COMPLETE` only, else 0).
    pub length: usize,
    /// The HTTP response to send before closing (`INVALID` only).
    pub error_response: botspace_bytes,
}

/// A request framer for one connection: like
/// `botspace_service_frame_request`, but it resumes where its previous call
/// stopped, so a request that arrives a byte at a time costs time linear in
/// its bytes (the stateless function rescans the buffer on every call).
pub struct botspace_request_framer {
    pub(crate) framer: botspace::RequestFramer,
    /// What `botspace_request_framer_head` reports: the head of the last
    /// COMPLETE request, or of the one being framed.
    pub(crate) head: Option<botspace::RequestHead>,
}

impl Handle for botspace_request_framer {}

/// What the framer read from a request's head, so the host need not parse
/// it again (`botspace_request_framer_head`). Offsets count from the first
/// byte of the request (the start of the buffer given to
/// `botspace_request_framer_frame`). Plain data: copy it freely.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct botspace_request_head {
    /// Bytes of the request line, the header lines and the empty line.
    pub head_len: usize,
    /// Where the line after the request line starts (past its LF): a host
    /// that adds a header inserts it here.
    pub request_line_end: usize,
    /// The method: `request[method_start .. method_start + method_len]`.
    pub method_start: usize,
    pub method_len: usize,
    /// The path without its query: `request[path_start .. path_start + path_len]`.
    pub path_start: usize,
    pub path_len: usize,
    /// Where the first `Expect` header's name starts (`has_expect` only).
    pub expect_offset: usize,
    /// 1 for HTTP/1.1, 0 for HTTP/1.0.
    pub http_minor: u8,
    /// The connection stays open after the answer: HTTP/1.1 without a
    /// `Connection: close` token, or HTTP/1.0 with `Connection: keep-alive`.
    pub keep_alive: bool,
    /// A `Connection: close` token is present.
    pub close_token: bool,
    /// `Upgrade: websocket` with a `Connection: upgrade` token.
    pub upgrade: bool,
    /// `Expect: 100-continue`: the client may wait for `100 Continue`.
    pub expect_continue: bool,
    /// An `Expect` header is present (`expect_offset` is valid).
    pub has_expect: bool,
}

impl From<&botspace::RequestHead> for botspace_request_head {
    fn from(h: &botspace::RequestHead) -> Self {
        botspace_request_head {
            head_len: h.len,
            request_line_end: h.request_line_end,
            method_start: h.method_start,
            method_len: h.method_len,
            path_start: h.path_start,
            path_len: h.path_len,
            expect_offset: h.expect_offset.unwrap_or(0),
            http_minor: h.http_minor,
            keep_alive: h.keep_alive,
            close_token: h.close_token,
            upgrade: h.upgrade,
            expect_continue: h.expect_continue,
            has_expect: h.expect_offset.is_some(),
        }
    }
}

pub(crate) fn framing(f: Framing) -> botspace_framing {
    match f {
        Framing::Complete { len, .. } => botspace_framing {
            kind: botspace_framing_kind::Complete,
            length: len,
            error_response: botspace_bytes::EMPTY,
        },
        Framing::Incomplete => botspace_framing {
            kind: botspace_framing_kind::Incomplete,
            length: 0,
            error_response: botspace_bytes::EMPTY,
        },
        Framing::Invalid(r) => botspace_framing {
            kind: botspace_framing_kind::Invalid,
            length: 0,
            error_response: botspace_bytes::from_vec(r),
        },
    }
}

/// Creates a request framer for one connection, with the service's
/// `max_body_bytes`. Give it the connection's unread bytes after every read
/// (`botspace_request_framer_frame`); release it with
/// `botspace_request_framer_free`. It does not keep the service alive.
///
/// # Safety
/// `service` must be a live handle; `out_framer` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_request_framer_new(
    service: *const botspace_service,
    out_framer: *mut *mut botspace_request_framer,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let out_framer = arg!(out out_framer);
        let framer = service.svc.request_framer();
        out_framer.write(botspace_request_framer { framer, head: None }.into_raw());
        botspace_status::Ok
    })
}

/// Where the first request in `buf[0..buf_len]` ends, as
/// `botspace_service_frame_request` says, resuming where the previous call
/// stopped. Until it answers COMPLETE or INVALID, each call's buffer must
/// begin with the previous call's bytes (the host only appends); after such
/// an answer it starts over for the request at the start of the next
/// buffer (the host drops the framed bytes first). Always free
/// `out_framing->error_response`. Not thread-safe: one connection, one
/// thread at a time.
///
/// # Safety
/// `framer` must be a live handle not used by another thread; `buf` must
/// point at `buf_len` readable bytes (or be NULL with length 0);
/// `out_framing` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_request_framer_frame(
    framer: *mut botspace_request_framer,
    buf: *const u8,
    buf_len: usize,
    out_framing: *mut botspace_framing,
) -> botspace_status {
    ffi_boundary!({
        let fr = arg!(mut framer);
        let out_framing = arg!(out out_framing);
        let b = arg!(bytes buf, buf_len);
        let f = fr.framer.frame(b);
        fr.head = match &f {
            Framing::Complete { head, .. } => Some(*head),
            Framing::Incomplete => fr.framer.pending_head().copied(),
            Framing::Invalid(_) => None,
        };
        out_framing.write(framing(f));
        botspace_status::Ok
    })
}

/// The head of the request the last `botspace_request_framer_frame` call
/// framed: after COMPLETE, that request's; after INCOMPLETE, the head of
/// the request being framed once the head is whole and only body bytes
/// are missing (answer `Expect: 100-continue` from it). `*out_present` is
/// false, and `*out_head` zeroed, when there is none (before the head is
/// whole, after INVALID). Not thread-safe: the framer's thread only.
///
/// # Safety
/// `framer` must be a live handle not used by another thread; `out_head`
/// and `out_present` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_request_framer_head(
    framer: *const botspace_request_framer,
    out_head: *mut botspace_request_head,
    out_present: *mut bool,
) -> botspace_status {
    ffi_boundary!({
        let framer = arg!(ref framer);
        let out_head = arg!(out out_head);
        let out_present = arg!(out out_present);
        let head = framer.head.as_ref();
        out_head.write(head.map(botspace_request_head::from).unwrap_or_default());
        out_present.write(head.is_some());
        botspace_status::Ok
    })
}

/// The most bytes one request can take on the wire under the framer's
/// limits (the service's `max_body_bytes`): a buffer at least this long
/// always frames as COMPLETE or INVALID. A host that reads a connection's
/// socket only while fewer unframed bytes than this are buffered bounds its
/// input buffer by it and never stalls a request (229 636 bytes with the
/// default 64 KiB body limit).
///
/// # Safety
/// `framer` must be a live handle; `out_bytes` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_request_framer_max_request_bytes(
    framer: *const botspace_request_framer,
    out_bytes: *mut usize,
) -> botspace_status {
    ffi_boundary!({
        let framer = arg!(ref framer);
        let out_bytes = arg!(out out_bytes);
        out_bytes.write(framer.framer.max_request_bytes());
        botspace_status::Ok
    })
}

/// Releases a framer and sets `*framer` to NULL; accepts NULL and a pointer
/// to NULL.
///
/// # Safety
/// `*framer` must be NULL or a handle from `botspace_request_framer_new`
/// not released through another copy of the pointer.
#[no_mangle]
pub unsafe extern "C" fn botspace_request_framer_free(framer: *mut *mut botspace_request_framer) {
    // SAFETY: the contract above.
    unsafe { Handle::free(framer) }
}
