//! Between the core's wire bytes and the `http` crate's types.
//!
//! The core is sans-IO and speaks HTTP/1.1 bytes ([`Service::handle_request`]
//! takes a request and returns a response). A hyper host has already parsed
//! the request into an [`http::Request`]; these functions write it back as
//! the bytes the core reads, and read the core's answer into an
//! [`http::Response`].
//!
//! [`Service::handle_request`]: botspace::Service::handle_request

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{Response, StatusCode, Version};

/// The HTTP/1.1 bytes of a request whose body has been read whole.
///
/// A `Transfer-Encoding` (hyper has already decoded the body) is replaced
/// by the `Content-Length` of the decoded body.
pub fn request_bytes(parts: &http::request::Parts, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + body.len());
    out.extend_from_slice(parts.method.as_str().as_bytes());
    out.push(b' ');
    let target = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    out.extend_from_slice(if target.is_empty() { b"/" } else { target.as_bytes() });
    out.extend_from_slice(if parts.version == Version::HTTP_10 { b" HTTP/1.0\r\n" } else { b" HTTP/1.1\r\n" });
    let chunked = parts.headers.contains_key(TRANSFER_ENCODING);
    for (name, value) in &parts.headers {
        if name == TRANSFER_ENCODING || (chunked && name == CONTENT_LENGTH) {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if chunked {
        out.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

/// The core's response bytes as an [`http::Response`]. `Connection` is
/// left to hyper, which decides keep-alive from the request.
///
/// The core only ever produces well-formed responses; anything else (a bug)
/// becomes a bare 500 rather than a panic.
pub fn response_from_bytes(raw: &[u8]) -> Response<Bytes> {
    response_from(raw, |head_len| Bytes::copy_from_slice(&raw[head_len..]))
}

/// [`response_from_bytes`] that keeps the core's buffer as the body (no
/// copy of the body).
pub fn response_from_vec(raw: Vec<u8>) -> Response<Bytes> {
    let raw = Bytes::from(raw);
    response_from(&raw, |head_len| raw.slice(head_len..))
}

fn response_from(raw: &[u8], body: impl FnOnce(usize) -> Bytes) -> Response<Bytes> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut parsed = httparse::Response::new(&mut headers);
    let Ok(httparse::Status::Complete(head_len)) = parsed.parse(raw) else {
        return internal_error();
    };
    let Some(status) = parsed.code.and_then(|c| StatusCode::from_u16(c).ok()) else {
        return internal_error();
    };
    let mut resp = Response::new(body(head_len));
    *resp.status_mut() = status;
    for h in parsed.headers.iter() {
        // `101` keeps its `Connection: Upgrade`; elsewhere hyper decides.
        if h.name.eq_ignore_ascii_case("connection") && status != StatusCode::SWITCHING_PROTOCOLS {
            continue;
        }
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(h.name.as_bytes()), HeaderValue::from_bytes(h.value)) {
            resp.headers_mut().append(n, v);
        }
    }
    resp
}

fn internal_error() -> Response<Bytes> {
    let mut r = Response::new(Bytes::new());
    *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_round_trips_to_the_bytes_the_core_reads() {
        let req = http::Request::post("/bot/getMe?x=1").header("authorization", "Bot t").body(()).unwrap();
        let (parts, ()) = req.into_parts();
        assert_eq!(request_bytes(&parts, b"{}"), b"POST /bot/getMe?x=1 HTTP/1.1\r\nauthorization: Bot t\r\n\r\n{}");
    }

    #[test]
    fn a_chunked_request_gets_the_length_of_its_decoded_body() {
        let req = http::Request::post("/a").header("transfer-encoding", "chunked").body(()).unwrap();
        let (parts, ()) = req.into_parts();
        assert_eq!(request_bytes(&parts, b"abc"), b"POST /a HTTP/1.1\r\ncontent-length: 3\r\n\r\nabc");
    }

    #[test]
    fn the_core_response_keeps_status_headers_and_body() {
        let r = response_from_bytes(b"HTTP/1.1 405 Method Not Allowed\r\nAllow: POST\r\nContent-Length: 2\r\n\r\n{}");
        assert_eq!(r.status(), 405);
        assert_eq!(r.headers()["allow"], "POST");
        assert_eq!(r.body().as_ref(), b"{}");
        assert_eq!(response_from_bytes(b"garbage").status(), 500);
        let r = response_from_vec(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}".to_vec());
        assert_eq!((r.status(), r.body().as_ref()), (StatusCode::OK, &b"{}"[..]));
    }
}
