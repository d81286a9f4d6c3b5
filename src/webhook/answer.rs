//! The receiver's answer to a webhook request, read from the connection's
//! bytes with no I/O of its own: a host that writes
//! [`super::WebhookRequest::write_http`] to a socket itself (rather than
//! through an HTTP client library) feeds what it reads to an
//! [`AnswerReader`], which says when the answer is whole, its status and
//! `Retry-After`, and whether the connection can carry the next delivery.
//! Only the status counts: at most [`MAX_ANSWER_BYTES`] of the body are
//! read, and past that the connection is not kept.

use super::schedule::{Failure, Outcome, MAX_ANSWER_BYTES};

/// The most head lines of an answer: a receiver's answer has a few.
const MAX_HEADERS: usize = 64;

/// The longest chunk-size line (with its extensions) read.
const MAX_CHUNK_LINE: usize = 1024;

/// What an [`AnswerReader`] knows after the bytes fed so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The answer is not whole yet: read more.
    More,
    /// The receiver answered: report `outcome`. `reusable`: the connection
    /// carries nothing more of this answer and may carry the next delivery.
    Answered { outcome: Outcome, reusable: bool },
    /// The connection closed before a single byte of an answer came: on a
    /// kept connection, the receiver had closed it meanwhile and the
    /// request is sent again on a new one; on a new one, a failure
    /// ([`AnswerReader::failure`]).
    ClosedBeforeAnswer,
    /// Not an HTTP answer: report it and close the connection.
    Failed(Outcome),
}

#[derive(Debug)]
enum Body {
    /// `Content-Length`: bytes left.
    Length(usize),
    /// Chunked: the chunk-size line read so far.
    ChunkSize(Vec<u8>),
    /// Chunked: bytes of the chunk left, then its CRLF.
    ChunkData(usize),
    /// Chunked: the CRLF after a chunk's data, bytes of it seen.
    ChunkEnd(u8),
    /// Chunked: the trailer line read so far (the last chunk was seen).
    Trailer(Vec<u8>),
    /// Neither: the body ends when the connection closes.
    UntilClose,
}

/// Reads one answer: see the module's documentation.
#[derive(Debug, Default)]
pub struct AnswerReader {
    /// The head's bytes until it is whole.
    head: Vec<u8>,
    /// Once the head is whole: its status, `Retry-After` and whether the
    /// receiver keeps the connection.
    status: u16,
    retry_after: Option<String>,
    keep: bool,
    body: Option<Body>,
    /// Body bytes read.
    body_seen: usize,
    /// Any byte came.
    started: bool,
}

impl AnswerReader {
    pub fn new() -> AnswerReader {
        AnswerReader::default()
    }

    /// Whether any byte of an answer came.
    pub fn started(&self) -> bool {
        self.started
    }

    /// What a new connection that closed before answering reports.
    pub fn failure() -> Outcome {
        Outcome::failed(Failure::Connection, "the connection closed before an answer came")
    }

    /// Feeds the next bytes read from the connection; `now_ms` (the service
    /// clock) reads an HTTP-date `Retry-After`.
    pub fn feed(&mut self, mut data: &[u8], now_ms: u64) -> Step {
        if !data.is_empty() {
            self.started = true;
        }
        loop {
            if self.body.is_none() {
                let from = self.head.len().saturating_sub(3);
                self.head.extend_from_slice(data);
                let Some(end) = self.head[from..].windows(4).position(|w| w == b"\r\n\r\n").map(|p| from + p + 4)
                else {
                    if self.head.len() > MAX_ANSWER_BYTES {
                        return Step::Failed(Outcome::failed(Failure::Connection, "the answer's head is too long"));
                    }
                    return Step::More;
                };
                // What follows the head in this read.
                let rest_at = data.len() - (self.head.len() - end);
                if let Err(why) = self.read_head(end) {
                    return Step::Failed(Outcome::failed(Failure::Connection, why));
                }
                self.head.clear();
                data = &data[rest_at..];
                if self.body.is_none() {
                    // An interim (1xx) answer: the final one follows.
                    continue;
                }
            }
            return self.read_body(data, now_ms);
        }
    }

    /// The connection closed (a read gave no bytes).
    pub fn closed(&mut self, now_ms: u64) -> Step {
        match &self.body {
            None if !self.started => Step::ClosedBeforeAnswer,
            None => {
                Step::Failed(Outcome::failed(Failure::Connection, "the connection closed within the answer's head"))
            }
            // The status came: it counts, whatever the body.
            Some(_) => self.answered(false, now_ms),
        }
    }

    fn answered(&self, reusable: bool, now_ms: u64) -> Step {
        let retry_after_s = self.retry_after.as_deref().and_then(|v| super::retry_after_s(v, now_ms));
        Step::Answered {
            outcome: Outcome::Answered { status: self.status, retry_after_s },
            reusable: reusable && self.keep,
        }
    }

    /// Reads the head in `self.head[..end]`: the body's framing, or none
    /// for an interim answer.
    fn read_head(&mut self, end: usize) -> Result<(), &'static str> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(&self.head[..end]) {
            Ok(httparse::Status::Complete(_)) => {}
            Ok(httparse::Status::Partial) => return Err("the answer's head is malformed"),
            Err(httparse::Error::TooManyHeaders) => return Err("the answer has too many header lines"),
            Err(_) => return Err("the answer's head is malformed"),
        }
        let status = resp.code.ok_or("the answer's head is malformed")?;
        if (100..200).contains(&status) && status != 101 {
            return Ok(());
        }
        self.status = status;
        // HTTP/1.0 closes unless told otherwise; so does a Connection:
        // close.
        self.keep = resp.version == Some(1);
        let (mut length, mut chunked, mut coded) = (None, false, false);
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("retry-after") {
                self.retry_after = std::str::from_utf8(h.value).ok().map(|v| v.trim().to_string());
            } else if h.name.eq_ignore_ascii_case("content-length") {
                let n = std::str::from_utf8(h.value)
                    .ok()
                    .map(str::trim)
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .map(|v| v.parse::<usize>().unwrap_or(usize::MAX))
                    .ok_or("the answer's Content-Length is not a number")?;
                if length.is_some_and(|l| l != n) {
                    return Err("the answer has two Content-Lengths");
                }
                length = Some(n);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                coded = true;
                let last = h.value.rsplit(|b| *b == b',').next().unwrap_or_default();
                chunked = last.trim_ascii().eq_ignore_ascii_case(b"chunked");
            } else if h.name.eq_ignore_ascii_case("connection") {
                let v = std::str::from_utf8(h.value).unwrap_or_default();
                if v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")) {
                    self.keep = false;
                }
            }
        }
        self.body = Some(if status == 204 || status == 304 || status == 101 {
            self.keep &= status != 101;
            Body::Length(0)
        } else if chunked {
            Body::ChunkSize(Vec::new())
        } else if coded {
            // A coding other than chunked last: the body ends at the close.
            Body::UntilClose
        } else if let Some(n) = length {
            Body::Length(n)
        } else {
            Body::UntilClose
        });
        if matches!(self.body, Some(Body::UntilClose)) {
            self.keep = false;
        }
        Ok(())
    }

    /// Reads body bytes (what the head's framing says), at most
    /// `MAX_ANSWER_BYTES` of them.
    fn read_body(&mut self, mut data: &[u8], now_ms: u64) -> Step {
        loop {
            let body = self.body.as_mut().expect("the head was read");
            match body {
                Body::Length(left) => {
                    if *left > MAX_ANSWER_BYTES - self.body_seen.min(MAX_ANSWER_BYTES) {
                        // Longer than is read: the status counts, the
                        // connection is not kept.
                        return self.answered(false, now_ms);
                    }
                    let n = (*left).min(data.len());
                    *left -= n;
                    self.body_seen += n;
                    data = &data[n..];
                    if *left == 0 {
                        // Bytes past the answer (none was asked for): the
                        // connection is not kept.
                        return self.answered(data.is_empty(), now_ms);
                    }
                    return Step::More;
                }
                Body::UntilClose => {
                    self.body_seen += data.len();
                    if self.body_seen > MAX_ANSWER_BYTES {
                        return self.answered(false, now_ms);
                    }
                    return Step::More;
                }
                Body::ChunkSize(line) | Body::Trailer(line) => {
                    let Some(nl) = data.iter().position(|b| *b == b'\n') else {
                        line.extend_from_slice(data);
                        if line.len() > MAX_CHUNK_LINE {
                            return Step::Failed(Outcome::failed(
                                Failure::Connection,
                                "the answer's chunk is malformed",
                            ));
                        }
                        return Step::More;
                    };
                    line.extend_from_slice(&data[..=nl]);
                    data = &data[nl + 1..];
                    let trailer = matches!(body, Body::Trailer(_));
                    let (Body::ChunkSize(line) | Body::Trailer(line)) = body else { unreachable!() };
                    if trailer {
                        if line.as_slice() == b"\r\n" || line.as_slice() == b"\n" {
                            return self.answered(data.is_empty(), now_ms);
                        }
                        line.clear();
                        continue;
                    }
                    let size = match httparse::parse_chunk_size(line) {
                        Ok(httparse::Status::Complete((_, size))) => size,
                        _ => {
                            return Step::Failed(Outcome::failed(
                                Failure::Connection,
                                "the answer's chunk is malformed",
                            ))
                        }
                    };
                    *body = if size == 0 {
                        Body::Trailer(Vec::new())
                    } else if size > (MAX_ANSWER_BYTES - self.body_seen.min(MAX_ANSWER_BYTES)) as u64 {
                        return self.answered(false, now_ms);
                    } else {
                        Body::ChunkData(size as usize)
                    };
                }
                Body::ChunkData(left) => {
                    let n = (*left).min(data.len());
                    *left -= n;
                    self.body_seen += n;
                    data = &data[n..];
                    if *left > 0 {
                        return Step::More;
                    }
                    *body = Body::ChunkEnd(0);
                }
                Body::ChunkEnd(seen) => {
                    while *seen < 2 {
                        let Some((&b, rest)) = data.split_first() else { return Step::More };
                        if b != [b'\r', b'\n'][*seen as usize] {
                            return Step::Failed(Outcome::failed(
                                Failure::Connection,
                                "the answer's chunk is malformed",
                            ));
                        }
                        *seen += 1;
                        data = rest;
                    }
                    *body = Body::ChunkSize(Vec::new());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{AnswerReader, Step};
    use crate::webhook::{Failure, Outcome, MAX_ANSWER_BYTES};

    fn answered(status: u16, retry_after_s: Option<u64>, reusable: bool) -> Step {
        Step::Answered { outcome: Outcome::Answered { status, retry_after_s }, reusable }
    }

    /// Feeds `text` in pieces of `n` bytes: the last step.
    fn read(text: &[u8], n: usize) -> Step {
        let mut r = AnswerReader::new();
        let mut last = Step::More;
        for piece in text.chunks(n) {
            last = r.feed(piece, 0);
            if last != Step::More {
                return last;
            }
        }
        last
    }

    #[test]
    fn a_content_length_answer_in_any_pieces_keeps_the_connection() {
        let text = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello";
        for n in [1, 2, 3, 7, text.len()] {
            assert_eq!(read(text, n), answered(200, None, true), "pieces of {n}");
        }
        assert_eq!(read(b"HTTP/1.1 204 No Content\r\n\r\n", 100), answered(204, None, true));
        assert_eq!(read(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", 4), answered(200, None, true));
    }

    #[test]
    fn retry_after_in_seconds_or_as_a_date_and_interim_answers_skipped() {
        let text = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Service Unavailable\r\nRetry-After: 120\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(read(text, 5), answered(503, Some(120), true));
        let mut r = AnswerReader::new();
        let date = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(r.feed(date, 784_111_717_000), answered(429, Some(60), true));
    }

    #[test]
    fn chunked_answers_with_extensions_and_trailers() {
        let text =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n";
        for n in [1, 4, text.len()] {
            assert_eq!(read(text, n), answered(200, None, true), "pieces of {n}");
        }
        let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert!(matches!(read(bad, 100), Step::Failed(_)));
        let no_crlf = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n";
        assert!(matches!(read(no_crlf, 100), Step::Failed(_)));
    }

    #[test]
    fn what_closes_the_connection_still_counts_the_status() {
        // Connection: close, HTTP/1.0, a body to the close, bytes past the answer.
        assert_eq!(
            read(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", 9),
            answered(200, None, false)
        );
        assert_eq!(read(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", 9), answered(200, None, false));
        assert_eq!(read(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab", 100), answered(200, None, false));
        let mut r = AnswerReader::new();
        assert_eq!(r.feed(b"HTTP/1.1 500 Internal Server Error\r\n\r\nsome body", 0), Step::More);
        assert_eq!(r.closed(0), answered(500, None, false));
    }

    #[test]
    fn past_64_kib_of_body_the_status_counts_and_nothing_more_is_read() {
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", MAX_ANSWER_BYTES + 1);
        assert_eq!(read(head.as_bytes(), 1000), answered(200, None, false));
        let mut r = AnswerReader::new();
        assert_eq!(r.feed(b"HTTP/1.1 200 OK\r\n\r\n", 0), Step::More);
        assert_eq!(r.feed(&vec![b'x'; MAX_ANSWER_BYTES], 0), Step::More);
        assert_eq!(r.feed(b"x", 0), answered(200, None, false));
        let chunked = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n", MAX_ANSWER_BYTES + 1);
        assert_eq!(read(chunked.as_bytes(), 1000), answered(200, None, false));
    }

    #[test]
    fn a_close_before_any_byte_differs_from_a_close_within_the_head() {
        let mut r = AnswerReader::new();
        assert!(!r.started());
        assert_eq!(r.closed(0), Step::ClosedBeforeAnswer);
        assert_eq!(
            AnswerReader::failure(),
            Outcome::Failed("the connection failed: the connection closed before an answer came".into())
        );
        let mut r = AnswerReader::new();
        assert_eq!(r.feed(b"HTTP/1.1 20", 0), Step::More);
        assert!(r.started());
        assert_eq!(
            r.closed(0),
            Step::Failed(Outcome::failed(Failure::Connection, "the connection closed within the answer's head"))
        );
        assert_eq!(
            read(b"SMTP ready\r\n\r\n", 100),
            Step::Failed(Outcome::Failed("the connection failed: the answer's head is malformed".into()))
        );
        assert_eq!(
            read(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", 100),
            Step::Failed(Outcome::Failed("the connection failed: the answer's Content-Length is not a number".into()))
        );
    }
}
