//! What a host decides about a connection, decided once for every host:
//! the answers a host sends on its own (408 for a request that did not
//! arrive in time, 503 `server_busy` at the connection limit, 404 for a
//! path the listener does not serve), which way a request goes
//! ([`route()`]), the numbers of a server's connection handling
//! ([`limits`]), and what a response the core made says (its status and
//! error code, [`response_error`]).
//!
//! The hosts own sockets and clocks: they ask here what to send and when,
//! and send it. Nothing here does I/O or reads a clock; each function is a
//! plain function of its inputs, unit-tested on its own.

pub mod http;
pub mod lane;
pub mod limits;
mod report;

pub use lane::{route, Lane, Listener};
pub use report::Report;

use crate::error::ApiError;
use crate::protocol::ErrorCode;

/// The whole answer to a request that did not arrive whole within the
/// host's request deadline (`--request-timeout`): 408 `request_timeout`
/// with `Connection: close` (the host closes once it is sent).
pub fn request_timeout() -> Vec<u8> {
    closing(ApiError::request_timeout())
}

/// The interim answer to a request whose head asked `Expect:
/// 100-continue` and was accepted: the client sends its body after it.
pub const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// The whole answer to a connection the host refuses at its connection
/// limit when every connection is busy: 503 `server_busy`, `Retry-After:
/// 1`, `Connection: close`.
pub fn server_busy() -> Vec<u8> {
    closing(ApiError::server_busy())
}

/// The answer to a request for `path` on a listener that does not serve
/// it ([`Lane::NotHere`]): the 404 a path with no method gets
/// (`method_not_found`, or `token_in_path` for `/bot<token>/<method>`), so
/// the other listener's paths are not revealed. The path is not repeated.
pub fn not_here(path: &str) -> Vec<u8> {
    crate::route::no_method_at(path).into_response()
}

/// The answers a host gives on its own, by code, for the faces that name
/// them rather than call the functions above (JavaScript): `detail` is the
/// path of [`ErrorCode::MethodNotFound`] ([`not_here`]), the description
/// of [`ErrorCode::StorageError`] and [`ErrorCode::InvalidRequest`]
/// (a host tool's refusal), and unused otherwise ([`answer_failed`]
/// included). `None` for a code that
/// only a request handler gives.
pub fn host_answer(code: ErrorCode, detail: &str) -> Option<Vec<u8>> {
    Some(match code {
        ErrorCode::RequestTimeout => request_timeout(),
        ErrorCode::ServerBusy => server_busy(),
        ErrorCode::MethodNotFound => not_here(detail),
        ErrorCode::StorageError => ApiError::storage_error(detail).into_response(),
        ErrorCode::InvalidRequest => ApiError::invalid_request(detail).into_response(),
        ErrorCode::WebsocketUnavailable => ApiError::websocket_unavailable().into_response(),
        ErrorCode::InvalidToken => ApiError::invalid_token().into_response(),
        ErrorCode::AnswerFailed => answer_failed(),
        _ => return None,
    })
}

/// The whole answer to a request the host cannot get the core's answer
/// for: the core call panicked, or the thread that was to answer it is
/// gone. 500 `answer_failed`, in the same envelope as every refusal (an
/// HTTP stack's bare 500 would tell the client nothing). Whether the
/// request was carried out is unknown (the failure may have come after
/// its commit), so it does not say "safe to retry" as `internal_error`
/// does: the description points at the `Idempotency-Key`.
pub fn answer_failed() -> Vec<u8> {
    ApiError::answer_failed().into_response()
}

/// `e`'s answer with `Connection: close`: for a refusal after which the
/// connection cannot carry another request (its body may be unread), so
/// every host closes it once sent, whatever its HTTP stack would do.
pub(crate) fn closing(e: ApiError) -> Vec<u8> {
    let body = e.body();
    let mut extra: Vec<(&str, &str)> = e.headers().iter().map(|(k, v)| (*k, v.as_str())).collect();
    extra.push(("Connection", "close"));
    crate::http::response(e.status(), &extra, &body)
}

/// What a response the core produced says, for a host's logs and metrics:
/// its status and, for a refusal, its error code. `None` for bytes that
/// do not start with an HTTP/1.1 status line. Reads the status line and
/// the envelope's `error`, never the rest.
pub fn response_error(resp: &[u8]) -> Option<(u16, Option<ErrorCode>)> {
    let status = resp.strip_prefix(b"HTTP/1.1 ")?.get(..3)?;
    if !status.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let status = status.iter().fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    if status < 400 {
        return Some((status, None));
    }
    let body = resp.windows(4).position(|w| w == b"\r\n\r\n").map_or(&[][..], |at| &resp[at + 4..]);
    let key = br#""error":""#;
    let code = body.windows(key.len()).position(|w| w == key).and_then(|at| {
        let rest = &body[at + key.len()..];
        let end = rest.iter().position(|&b| b == b'"')?;
        std::str::from_utf8(&rest[..end]).ok().and_then(ErrorCode::parse)
    });
    Some((status, code))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(resp: &[u8]) -> (String, serde_json::Value) {
        let at = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        (String::from_utf8(resp[..at].to_vec()).unwrap(), serde_json::from_slice(&resp[at + 4..]).unwrap())
    }

    #[test]
    fn request_timeout_is_a_closing_408() {
        let (head, body) = split(&request_timeout());
        assert_eq!(
            head,
            "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\nContent-Length: 106\r\nConnection: close"
        );
        assert_eq!(
            body,
            serde_json::json!({"ok": false, "error_code": 408, "error": "request_timeout",
                               "description": "the request did not arrive in time"})
        );
    }

    #[test]
    fn server_busy_is_a_closing_503_with_retry_after() {
        let (head, body) = split(&server_busy());
        assert_eq!(
            head,
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: 101\r\nRetry-After: 1\r\nConnection: close"
        );
        assert_eq!(
            body,
            serde_json::json!({"ok": false, "error_code": 503, "error": "server_busy",
                               "description": "too many connections; retry later"})
        );
    }

    #[test]
    fn not_here_is_the_404_of_a_path_without_a_method() {
        let resp = not_here("/admin/createUser");
        let (head, body) = split(&resp);
        assert!(head.starts_with("HTTP/1.1 404 Not Found\r\n"), "{head}");
        assert!(!head.contains("Connection"), "the connection stays: {head}");
        assert_eq!(body["error"], "method_not_found");
        assert_eq!(resp, ApiError::method_not_found().into_response());
        assert_eq!(not_here("/botbot_x/getMe"), ApiError::token_in_path().into_response());
    }

    #[test]
    fn answer_failed_is_a_500_in_the_envelope() {
        let resp = answer_failed();
        let (head, body) = split(&resp);
        assert_eq!(head, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: 190");
        assert_eq!(
            body,
            serde_json::json!({"ok": false, "error_code": 500, "error": "answer_failed",
                               "description": "the server failed while answering: the request may or may not have been carried out; retry with the same Idempotency-Key"})
        );
        assert_eq!(response_error(&resp), Some((500, Some(ErrorCode::AnswerFailed))));
        assert_eq!(host_answer(ErrorCode::AnswerFailed, "ignored"), Some(resp));
    }

    #[test]
    fn host_answers_by_code_are_the_same_answers() {
        assert_eq!(host_answer(ErrorCode::RequestTimeout, ""), Some(request_timeout()));
        assert_eq!(host_answer(ErrorCode::ServerBusy, ""), Some(server_busy()));
        assert_eq!(host_answer(ErrorCode::MethodNotFound, "/x"), Some(not_here("/x")));
        let (head, body) = split(&host_answer(ErrorCode::StorageError, "the page storage failed").unwrap());
        assert!(head.starts_with("HTTP/1.1 500 Internal Server Error\r\n"), "{head}");
        assert_eq!(
            body,
            serde_json::json!({"ok": false, "error_code": 500, "error": "storage_error",
                               "description": "the page storage failed"})
        );
        let (head, body) = split(&host_answer(ErrorCode::WebsocketUnavailable, "").unwrap());
        assert!(head.starts_with("HTTP/1.1 501 Not Implemented\r\n"), "{head}");
        assert_eq!(body["error"], "websocket_unavailable");
        let (head, body) = split(&host_answer(ErrorCode::InvalidToken, "").unwrap());
        assert!(head.starts_with("HTTP/1.1 401 Unauthorized\r\n"), "{head}");
        assert_eq!(body["error"], "invalid_token");
        assert_eq!(split(&host_answer(ErrorCode::InvalidRequest, "bad image").unwrap()).1["description"], "bad image");
        // A request handler's code is not a host's to give.
        assert_eq!(host_answer(ErrorCode::RateLimited, ""), None);
        assert_eq!(host_answer(ErrorCode::StorageFull, ""), None);
    }

    #[test]
    fn response_error_reads_status_and_code() {
        assert_eq!(response_error(&request_timeout()), Some((408, Some(ErrorCode::RequestTimeout))));
        assert_eq!(response_error(&server_busy()), Some((503, Some(ErrorCode::ServerBusy))));
        let full = ApiError::storage_full("disk").into_response();
        assert_eq!(response_error(&full), Some((503, Some(ErrorCode::StorageFull))));
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 35\r\n\r\n{\"ok\":true,\"result\":{\"error\":\"x\"}}";
        assert_eq!(response_error(ok), Some((200, None)), "a success is not read past its status");
        // A header that happens to hold the words does not count: only the body.
        let odd = b"HTTP/1.1 500 Internal Server Error\r\nX: \"error\":\"storage_full\"\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(response_error(odd), Some((500, None)));
        assert_eq!(response_error(b"HTTP/1.0 200 OK\r\n\r\n"), None);
        assert_eq!(response_error(b"HTTP/1.1 2x0 OK\r\n\r\n"), None);
        assert_eq!(response_error(b""), None);
    }
}
