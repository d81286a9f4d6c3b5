//! Webhook deliveries: the requests a host sends
//! (`botspace_webhook_request`), the outcomes it reports, and the address
//! policy it checks before connecting.

use crate::boundary::Handle;
use crate::service::botspace_service;
use crate::status::{botspace_status, fail};
use crate::BOTSPACE_NO_DEADLINE;
use std::ffi::{c_char, CStr, CString};
use std::mem::MaybeUninit;
use std::sync::OnceLock;

/// The most of a webhook answer's body a host reads (the core's
/// `MAX_ANSWER_BYTES`): the body is not used, so a host stops the transfer
/// past this and reports the status it got.
pub const BOTSPACE_WEBHOOK_MAX_ANSWER_BYTES: usize = 64 * 1024;
const _: () = assert!(BOTSPACE_WEBHOOK_MAX_ANSWER_BYTES == botspace::webhook::schedule::MAX_ANSWER_BYTES);

/// One webhook request the host is to send (`botspace_service_poll_webhook`),
/// then report with `botspace_service_webhook_outcome`. Release it with
/// `botspace_webhook_request_free` (before or after reporting). Not
/// thread-safe: use it from one thread at a time (it may move between
/// threads).
pub struct botspace_webhook_request {
    pub(crate) parts: botspace_webhook_request_parts,
    /// What the pointers in `parts` borrow.
    pub(crate) _host: CString,
    pub(crate) _path_and_query: CString,
    pub(crate) _host_header: CString,
    pub(crate) _url: CString,
    pub(crate) _header_lines: Vec<CString>,
    pub(crate) _header_ptrs: Vec<*const c_char>,
    pub(crate) _body: Vec<u8>,
    pub(crate) _http_bytes: Vec<u8>,
    /// The request kept alive (`botspace_webhook_request_http_kept`).
    pub(crate) _http_kept: Vec<u8>,
}

impl Handle for botspace_webhook_request {}

/// What a webhook request is, as borrowed views into its
/// `botspace_webhook_request` (valid until it is freed). Strings are
/// NUL-terminated. Plain data: copy it freely.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct botspace_webhook_request_parts {
    /// Pass it back to `botspace_service_webhook_outcome`.
    pub id: u64,
    /// `https` (TLS, verify the server's certificate against the system's
    /// roots) rather than `http`.
    pub https: bool,
    /// The host as the URL names it, without brackets for IPv6.
    pub host: *const c_char,
    pub port: u16,
    /// The request target, at least `/`.
    pub path_and_query: *const c_char,
    /// The `Host` header's value: the host (bracketed when IPv6), with the
    /// port when it is not the scheme's own.
    pub host_header: *const c_char,
    /// The URL to send to, rebuilt from the checked parts:
    /// `scheme://host_header/path_and_query`.
    pub url: *const c_char,
    /// The headers to send besides `Host` and `Content-Length`, each a
    /// `"Name: value"` line without CRLF, in order: `header_count` of them.
    pub headers: *const *const c_char,
    pub header_count: usize,
    /// The JSON body, `body_len` bytes (not NUL-terminated).
    pub body: *const u8,
    pub body_len: usize,
    /// The whole HTTP/1.1 request (request line, headers with `Host`,
    /// `Content-Length` and `Connection: close`, body), for a host that
    /// writes to a socket itself.
    pub http_bytes: *const u8,
    pub http_bytes_len: usize,
    /// Unix milliseconds (service clock) by which an answer must have
    /// come; report `timed_out` when none did.
    pub deadline_ms: u64,
    /// Which attempt this is for its event, from 1.
    pub attempt: u32,
}

pub(crate) fn c_string(s: impl Into<Vec<u8>>) -> CString {
    // The core's strings hold no NUL (checked URLs, base64, JSON).
    CString::new(s).unwrap_or_default()
}

/// The pieces joined, as a C string allocated once.
fn c_string_of(pieces: &[&str]) -> CString {
    let mut s = Vec::with_capacity(pieces.iter().map(|p| p.len()).sum::<usize>() + 1);
    for p in pieces {
        s.extend_from_slice(p.as_bytes());
    }
    c_string(s)
}

impl botspace_webhook_request {
    pub(crate) fn new(mut r: botspace::webhook::WebhookRequest) -> Box<botspace_webhook_request> {
        // Each string made once at its final size, with room for its NUL
        // (a `format!` and a CString's growth per string were a fifth of
        // the C server's CPU per delivery).
        let host = c_string_of(&[&r.target.host]);
        let path_and_query = c_string_of(&[&r.target.path_and_query]);
        let host_header = c_string_of(&[&r.host_header()]);
        let url = c_string(r.request_url());
        let header_lines: Vec<CString> = r.header_lines().iter().map(|(n, v)| c_string_of(&[n, ": ", v])).collect();
        let header_ptrs: Vec<*const c_char> = header_lines.iter().map(|c| c.as_ptr()).collect();
        let mut http_bytes = Vec::with_capacity(320 + r.attempt.body.len());
        r.write_http(&mut http_bytes, false);
        let mut http_kept = Vec::with_capacity(http_bytes.len());
        r.write_http(&mut http_kept, true);
        // The request's own body, moved (not copied) now that the whole
        // request was written out from it.
        let body = std::mem::take(&mut r.attempt.body).into_bytes();
        let parts = botspace_webhook_request_parts {
            id: r.id,
            https: r.target.https,
            host: host.as_ptr(),
            port: r.target.port,
            path_and_query: path_and_query.as_ptr(),
            host_header: host_header.as_ptr(),
            url: url.as_ptr(),
            headers: header_ptrs.as_ptr(),
            header_count: header_ptrs.len(),
            body: body.as_ptr(),
            body_len: body.len(),
            http_bytes: http_bytes.as_ptr(),
            http_bytes_len: http_bytes.len(),
            deadline_ms: r.attempt.deadline_ms,
            attempt: r.attempt.attempt,
        };
        // The pointers stay valid: moving a CString or Vec into the box
        // does not move their heap buffers.
        Box::new(botspace_webhook_request {
            parts,
            _host: host,
            _path_and_query: path_and_query,
            _host_header: host_header,
            _url: url,
            _header_lines: header_lines,
            _header_ptrs: header_ptrs,
            _body: body,
            _http_bytes: http_bytes,
            _http_kept: http_kept,
        })
    }
}

/// Writes the next webhook request due at `now_ms` (Unix milliseconds of
/// the service clock, `botspace_service_now_ms`) to `*out_request`, or NULL
/// when none is due; call until it writes NULL. Call it when the wake-up
/// callback fired (new events), when an outcome was reported, and at
/// `botspace_service_webhook_timeout`. Send each request to its `url`,
/// checking every address the name resolves to with
/// `botspace_service_webhook_address_allowed` before connecting to it,
/// within `deadline_ms`, without following redirects, reading at most 64
/// KiB of the answer; then report it with `botspace_service_webhook_outcome`.
/// Reads the database. Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `out_request` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_poll_webhook(
    service: *const botspace_service,
    now_ms: u64,
    out_request: *mut *mut botspace_webhook_request,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let out_request = arg!(out out_request);
        let svc = &service.svc;
        let req =
            svc.poll_webhook(now_ms).map_or(std::ptr::null_mut(), |r| Box::into_raw(botspace_webhook_request::new(r)));
        out_request.write(req);
        botspace_status::Ok
    })
}

/// `botspace_service_poll_webhook` for a thread that must not wait on the
/// store (an event loop): writes the next request due at `now_ms` to
/// `*out_request`, or NULL, taking only a lock held for microseconds. With
/// NULL, `*out_needs_store` says whether the store has work (a bot's log to
/// read, outcomes to write, the first load): then call
/// `botspace_service_poll_webhook` where blocking is allowed (another
/// thread) until it writes NULL, and send what it hands out. Due requests
/// come first, so `*out_needs_store` is false whenever a request is
/// written. Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `out_request` and `out_needs_store`
/// must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_poll_webhook_in_memory(
    service: *const botspace_service,
    now_ms: u64,
    out_request: *mut *mut botspace_webhook_request,
    out_needs_store: *mut bool,
) -> botspace_status {
    use botspace::WebhookPoll;
    ffi_boundary!({
        let service = arg!(ref service);
        let out_request = arg!(out out_request);
        let out_needs_store = arg!(out out_needs_store);
        let svc = &service.svc;
        let (req, needs_store) = match svc.poll_webhook_in_memory(now_ms) {
            WebhookPoll::Request(r) => (Box::into_raw(botspace_webhook_request::new(r)), false),
            WebhookPoll::Idle => (std::ptr::null_mut(), false),
            WebhookPoll::NeedsStore => (std::ptr::null_mut(), true),
        };
        out_request.write(req);
        out_needs_store.write(needs_store);
        botspace_status::Ok
    })
}

/// Writes the request's parts to `*out_parts`: pointers into the request,
/// valid until `botspace_webhook_request_free`.
///
/// # Safety
/// `request` must be a live handle; `out_parts` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_request_parts_get(
    request: *const botspace_webhook_request,
    out_parts: *mut botspace_webhook_request_parts,
) -> botspace_status {
    ffi_boundary!({
        let request = arg!(ref request);
        let out_parts = arg!(out out_parts);
        out_parts.write(request.parts);
        botspace_status::Ok
    })
}

/// Releases a webhook request and sets `*request` to NULL. Accepts NULL and
/// a pointer to NULL. Freeing it does not report an outcome.
///
/// # Safety
/// `*request` must be NULL or a handle from `botspace_service_poll_webhook`
/// that was not released through another copy of the pointer.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_request_free(request: *mut *mut botspace_webhook_request) {
    // SAFETY: the contract above.
    unsafe { Handle::free(request) }
}

/// Reports what became of webhook request `id` at `now_ms`; exactly one of:
/// - `timed_out` true: no answer by its `deadline_ms`;
/// - `status_code` 100..=999: the receiver answered it; `retry_after` is
///   its `Retry-After` header's value exactly as received (NULL when
///   absent), parsed by the library;
/// - `status_code` 0: no answer (the name did not resolve, the address was
///   refused, the connection failed, TLS failed): `failure_message` says
///   why, recorded for `getWebhookInfo` (UTF-8; invalid bytes are
///   replaced).
///
/// A 2xx moves the bot's durable cursor; anything else is retried later.
/// An unknown id (the webhook was deleted meanwhile, or the id was reported
/// already) is ignored. Returns `BOTSPACE_STATUS_INVALID_ARGUMENT` for a
/// status outside 100..=999 and `BOTSPACE_STATUS_NULL_ARGUMENT` for a
/// failure without a message. Writes the database. Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `retry_after` and `failure_message`
/// must each be NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_webhook_outcome(
    service: *const botspace_service,
    id: u64,
    status_code: u16,
    retry_after: *const c_char,
    failure_message: *const c_char,
    timed_out: bool,
    now_ms: u64,
) -> botspace_status {
    // SAFETY: the same contract.
    unsafe {
        botspace_service_webhook_report(
            service,
            id,
            status_code,
            retry_after,
            failure_message,
            timed_out,
            now_ms,
            std::ptr::null_mut(),
        )
    }
}

/// `botspace_service_webhook_outcome` that also says, in
/// `*out_store_wanted` (when not NULL), whether the store has work now
/// (outcomes to write, a bot's log to read): a host that hands out requests
/// with `botspace_service_poll_webhook_in_memory` then has
/// `botspace_service_poll_webhook` called soon where blocking is allowed.
/// Never waits on the store. `*out_store_wanted` is written only on
/// `BOTSPACE_STATUS_OK`. Thread-safe.
///
/// # Safety
/// As `botspace_service_webhook_outcome`; `out_store_wanted` must be NULL
/// or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C call names each input and output
pub unsafe extern "C" fn botspace_service_webhook_report(
    service: *const botspace_service,
    id: u64,
    status_code: u16,
    retry_after: *const c_char,
    failure_message: *const c_char,
    timed_out: bool,
    now_ms: u64,
    out_store_wanted: *mut bool,
) -> botspace_status {
    use botspace::webhook::Outcome;
    ffi_boundary!({
        let service = arg!(ref service);
        let outcome = if timed_out {
            Outcome::TimedOut
        } else if status_code != 0 {
            if !(100..=999).contains(&status_code) {
                return fail(
                    botspace_status::InvalidArgument,
                    format!("status_code {status_code} is not an HTTP status (100..=999, or 0 for no answer)"),
                );
            }
            let ra = arg!(opt_cstr retry_after).map(CStr::to_bytes);
            let retry_after_s =
                ra.and_then(|v| std::str::from_utf8(v).ok()).and_then(|v| botspace::webhook::retry_after_s(v, now_ms));
            Outcome::Answered { status: status_code, retry_after_s }
        } else {
            match arg!(opt_cstr failure_message).map(CStr::to_bytes) {
                Some(m) => Outcome::Failed(String::from_utf8_lossy(m).into_owned()),
                None => {
                    return fail(
                        botspace_status::NullArgument,
                        "argument `failure_message` is NULL with status_code 0 and timed_out false",
                    )
                }
            }
        };
        record_outcome(service, id, outcome, now_ms, arg!(opt_out out_store_wanted))
    })
}

/// Hands `outcome` to the service and writes `*out_store_wanted` when it
/// was given.
fn record_outcome(
    service: &botspace_service,
    id: u64,
    outcome: botspace::webhook::Outcome,
    now_ms: u64,
    out_store_wanted: Option<&mut MaybeUninit<bool>>,
) -> botspace_status {
    let wanted = service.svc.webhook_outcome(id, outcome, now_ms);
    if let Some(out) = out_store_wanted {
        out.write(wanted);
    }
    botspace_status::Ok
}

/// Why a webhook attempt got no answer
/// (`botspace_service_webhook_report_failure`): the library words the
/// message, the same as every other host's.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum botspace_webhook_failure {
    /// The host name did not resolve.
    Resolve = 0,
    /// The host name resolved to no address at all.
    NoAddress = 1,
    /// No connection was made to any address.
    Connect = 2,
    /// The TLS handshake failed (the certificate, most often).
    Tls = 3,
    /// The host cannot be a TLS server name.
    TlsName = 4,
    /// The connection failed once made (reset, closed, a malformed answer).
    Connection = 5,
    /// A kept connection failed and a new one did too, before the request
    /// left.
    BeforeSending = 6,
    /// The host's client could not build the request.
    Build = 7,
    /// The request failed and the client does not say at which step.
    Request = 8,
    /// The receiver answered a redirect the client hid.
    HiddenRedirect = 9,
    /// The address could not be checked against the policy.
    AddressCheck = 10,
}

/// Reports that webhook request `id` got no answer, at `now_ms`, for the
/// reason `kind` (a `botspace_webhook_failure` value): the library records
/// the kind's words for `getWebhookInfo`, followed by ": " and `detail`
/// (what the host's HTTP client said; UTF-8, invalid bytes are replaced)
/// when `detail` is not NULL. E.g. `BOTSPACE_WEBHOOK_FAILURE_TLS` with
/// "certificate expired" records "TLS failed: certificate expired". Returns
/// `BOTSPACE_STATUS_INVALID_ARGUMENT` for an unknown `kind`; otherwise as
/// `botspace_service_webhook_report`. Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `detail` NULL or a NUL-terminated
/// string; `out_store_wanted` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_webhook_report_failure(
    service: *const botspace_service,
    id: u64,
    kind: u32,
    detail: *const c_char,
    now_ms: u64,
    out_store_wanted: *mut bool,
) -> botspace_status {
    use botspace::webhook::{Failure, Outcome};
    ffi_boundary!({
        let service = arg!(ref service);
        let Some(kind) = Failure::ALL.get(kind as usize).copied() else {
            return fail(
                botspace_status::InvalidArgument,
                format!("kind {kind} is not a botspace_webhook_failure (0..={})", Failure::ALL.len() - 1),
            );
        };
        let outcome = match arg!(opt_cstr detail).map(CStr::to_bytes) {
            Some(d) => Outcome::failed(kind, String::from_utf8_lossy(d)),
            None => Outcome::failed_plainly(kind),
        };
        record_outcome(service, id, outcome, now_ms, arg!(opt_out out_store_wanted))
    })
}

/// Writes when to call `botspace_service_poll_webhook` next if no wake-up
/// comes first (Unix milliseconds of the service clock: the earliest retry
/// that waits), or `BOTSPACE_NO_DEADLINE` when nothing waits. Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `out_ms` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_webhook_timeout(
    service: *const botspace_service,
    out_ms: *mut u64,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let out_ms = arg!(out out_ms);
        out_ms.write(service.svc.webhook_timeout().unwrap_or(BOTSPACE_NO_DEADLINE));
        botspace_status::Ok
    })
}

/// The refusal messages, one per address class, as static C strings.
pub(crate) fn refusal_c_str(class: botspace::webhook::AddressClass) -> *const c_char {
    use botspace::webhook::AddressClass as A;
    const ALL: [A; 6] = [A::Loopback, A::Private, A::LinkLocal, A::Multicast, A::Unspecified, A::Reserved];
    static TABLE: OnceLock<Vec<CString>> = OnceLock::new();
    let table = TABLE.get_or_init(|| ALL.iter().map(|c| c_string(c.delivery_refusal())).collect());
    let i = ALL.iter().position(|c| *c == class).unwrap_or(0);
    table[i].as_ptr()
}

/// Whether a webhook delivery may connect to the address `ip` (IPv4 dotted
/// or IPv6 text, NUL-terminated) under the service's policy
/// (`webhook_allow_private_addresses`). Writes NULL to `*out_refusal` when
/// it may; else a static NUL-terminated message (never freed), e.g. "the
/// host name resolves to a loopback address, which this server does not
/// deliver to": skip that address, and when no address is left report the
/// message as the attempt's `failure_message`. Returns
/// `BOTSPACE_STATUS_INVALID_ARGUMENT` when `ip` is not an IP address.
/// Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `ip` a NUL-terminated string;
/// `out_refusal` writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_webhook_address_allowed(
    service: *const botspace_service,
    ip: *const c_char,
    out_refusal: *mut *const c_char,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let ip = arg!(cstr ip);
        let out_refusal = arg!(out out_refusal);
        let text = ip.to_bytes();
        let Some(addr) = std::str::from_utf8(text).ok().and_then(|t| t.parse::<std::net::IpAddr>().ok()) else {
            return fail(
                botspace_status::InvalidArgument,
                format!("argument `ip` is not an IP address: {:?}", String::from_utf8_lossy(text)),
            );
        };
        let refusal = match service.svc.webhook_address_allowed(addr) {
            Ok(()) => std::ptr::null(),
            Err(class) => refusal_c_str(class),
        };
        out_refusal.write(refusal);
        botspace_status::Ok
    })
}

/// What `botspace_webhook_answer_feed` found.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum botspace_webhook_answer_step {
    /// The answer is not whole yet: read more and feed it.
    More = 0,
    /// The receiver answered: report it (`botspace_webhook_pump_report_answer`).
    Answered = 1,
    /// The connection closed before a byte of an answer came: on a kept
    /// connection the receiver had closed it meanwhile (send the request
    /// again on a new one); on a new one, report it.
    ClosedBeforeAnswer = 2,
    /// Not an HTTP answer: report it and close the connection.
    Failed = 3,
}

/// The receiver's answer to one webhook request, read from the
/// connection's bytes by the library (`botspace::webhook::AnswerReader`),
/// for a host that writes `botspace_webhook_request_http_kept` to a socket
/// itself rather than through an HTTP client library: it says when the
/// answer is whole and whether the connection can carry the next delivery,
/// and holds the outcome to report. One per request; not thread-safe.
pub struct botspace_webhook_answer {
    reader: botspace::webhook::AnswerReader,
    last: botspace::webhook::Step,
}

impl Handle for botspace_webhook_answer {}

impl botspace_webhook_answer {
    /// The outcome to report: `None` while the answer is not whole.
    pub(crate) fn outcome(&self) -> Option<botspace::webhook::Outcome> {
        use botspace::webhook::{AnswerReader, Step};
        match &self.last {
            Step::More => None,
            Step::Answered { outcome, .. } | Step::Failed(outcome) => Some(outcome.clone()),
            Step::ClosedBeforeAnswer => Some(AnswerReader::failure()),
        }
    }
}

/// Makes an answer reader for one request and writes it to `*out_answer`.
///
/// # Safety
/// `out_answer` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_answer_new(out_answer: *mut *mut botspace_webhook_answer) -> botspace_status {
    ffi_boundary!({
        let out_answer = arg!(out out_answer);
        let a = botspace_webhook_answer {
            reader: botspace::webhook::AnswerReader::new(),
            last: botspace::webhook::Step::More,
        };
        out_answer.write(a.into_raw());
        botspace_status::Ok
    })
}

/// Releases an answer reader and sets `*answer` to NULL. Accepts NULL and a
/// pointer to NULL.
///
/// # Safety
/// `*answer` must be NULL or a handle from `botspace_webhook_answer_new`
/// that was not released through another copy of the pointer.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_answer_free(answer: *mut *mut botspace_webhook_answer) {
    // SAFETY: the contract above.
    unsafe { Handle::free(answer) }
}

/// Feeds the next `len` bytes read from the connection (`len` 0: the
/// connection closed, `data` may be NULL) at `now_ms` (the service clock),
/// and writes what the answer is now to `*out_step` and whether the
/// connection can carry the next delivery to `*out_reusable` (true only
/// with `BOTSPACE_WEBHOOK_ANSWER_STEP_ANSWERED`). At most 64 KiB of the
/// body are read: past that the status counts and the connection is not
/// kept.
///
/// # Safety
/// `answer` must be a live handle; `data` readable for `len` bytes (or NULL
/// with `len` 0); `out_step` and `out_reusable` writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_answer_feed(
    answer: *mut botspace_webhook_answer,
    data: *const u8,
    len: usize,
    now_ms: u64,
    out_step: *mut botspace_webhook_answer_step,
    out_reusable: *mut bool,
) -> botspace_status {
    use botspace::webhook::Step;
    ffi_boundary!({
        let a = arg!(mut answer);
        let out_step = arg!(out out_step);
        let out_reusable = arg!(out out_reusable);
        if a.last != Step::More {
            return fail(botspace_status::InvalidArgument, "the answer was already whole: feed a new reader");
        }
        a.last = if len == 0 {
            a.reader.closed(now_ms)
        } else {
            let data = arg!(bytes data, len);
            a.reader.feed(data, now_ms)
        };
        let (step, reusable) = match &a.last {
            Step::More => (botspace_webhook_answer_step::More, false),
            Step::Answered { reusable, .. } => (botspace_webhook_answer_step::Answered, *reusable),
            Step::ClosedBeforeAnswer => (botspace_webhook_answer_step::ClosedBeforeAnswer, false),
            Step::Failed(_) => (botspace_webhook_answer_step::Failed, false),
        };
        out_step.write(step);
        out_reusable.write(reusable);
        botspace_status::Ok
    })
}

/// Writes the whole HTTP/1.1 request for a connection kept alive for the
/// next delivery to the same origin (as `http_bytes`, without
/// `Connection: close`) to `*out_bytes` and `*out_len`: a view into the
/// request, valid until it is freed. Its answer is read with a
/// `botspace_webhook_answer`.
///
/// # Safety
/// `request` must be a live handle; `out_bytes` and `out_len` writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_request_http_kept(
    request: *const botspace_webhook_request,
    out_bytes: *mut *const u8,
    out_len: *mut usize,
) -> botspace_status {
    ffi_boundary!({
        let r = arg!(ref request);
        let out_bytes = arg!(out out_bytes);
        let out_len = arg!(out out_len);
        out_bytes.write(r._http_kept.as_ptr());
        out_len.write(r._http_kept.len());
        botspace_status::Ok
    })
}
