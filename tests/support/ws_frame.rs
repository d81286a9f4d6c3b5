//! The tests' one WebSocket frame reader, on tungstenite's
//! `FrameHeader::parse` (the library's `gateway::Outbox` finds frame
//! lengths with it too): a test checks the server's frames with the same
//! reading of RFC 6455's header as the library, not with a parser of its
//! own. Included by the test files that read frames
//! (`#[path = "support/ws_frame.rs"] mod ws_frame;`).

#![allow(dead_code)]

use std::io::Cursor;
use std::ops::Range;
use tungstenite::protocol::frame::FrameHeader;

/// One whole frame at the start of a buffer.
pub struct Frame<'a> {
    pub header: FrameHeader,
    /// The payload as it is on the wire (a masked frame's still masked).
    pub payload: &'a [u8],
    /// How many bytes of the buffer the frame takes, header and payload.
    pub len: usize,
}

impl Frame<'_> {
    /// The frame's opcode as on the wire (0x1 text, 0x8 close, 0xA pong...).
    pub fn opcode(&self) -> u8 {
        self.header.opcode.into()
    }
}

/// The header at the start of `b` and where its payload lies in `b` (which
/// may not hold all of it yet); `None` while the header is not whole.
pub fn header(b: &[u8]) -> Option<(FrameHeader, Range<usize>)> {
    let mut cursor = Cursor::new(b);
    // tungstenite fails only when reading fails, and a slice reads without
    // failing.
    let (header, payload_len) = FrameHeader::parse(&mut cursor).expect("reading a slice")?;
    let start = usize::try_from(cursor.position()).unwrap();
    let end = usize::try_from(payload_len).ok().and_then(|n| start.checked_add(n)).expect("a payload length that fits");
    Some((header, start..end))
}

/// The whole frame at the start of `b`; `None` while its header or its
/// payload is not whole.
pub fn frame(b: &[u8]) -> Option<Frame<'_>> {
    let (header, payload) = header(b)?;
    let len = payload.end;
    Some(Frame { header, payload: b.get(payload)?, len })
}

/// [`frame`] of what a server wrote: asserts, as soon as the header is
/// whole, that the frame is unmasked (a server never masks, RFC 6455
/// section 5.1).
pub fn server_frame(b: &[u8]) -> Option<Frame<'_>> {
    let (header, _) = header(b)?;
    assert!(header.mask.is_none(), "server frames are never masked");
    frame(b)
}

/// A server's whole output split into (opcode, payload) frames: every
/// frame unmasked and whole, nothing left over.
pub fn server_frames(mut b: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let f = server_frame(b).unwrap_or_else(|| panic!("a truncated frame: {b:?}"));
        out.push((f.opcode(), f.payload.to_vec()));
        b = &b[f.len..];
    }
    out
}
