//! [`Outbox`]: a gateway connection's output that its socket has not taken
//! yet, kept as whole frames, for a host that writes what
//! [`GatewayConnection::poll_transmit`](super::GatewayConnection::poll_transmit)
//! gives as the socket takes it.
//!
//! The rule it keeps: when the server ends a session behind output the
//! bot is not reading (4008 `slow_consumer`, a stop's 1001), the close
//! frame goes right after the frame being written, and the frames not
//! begun are dropped (the bot gets their events again after it
//! reconnects, from its last ack). A host needs frame boundaries for that,
//! and they are the core's to know: no host parses a WebSocket frame.

/// Bytes framed for the bot and not yet taken by its socket. It only ever
/// receives whole frames (what `poll_transmit` gives), so frame boundaries
/// can be followed from its start.
#[derive(Default, Debug)]
pub struct Outbox {
    buf: Vec<u8>,
    /// Bytes of `buf` already written.
    sent: usize,
    /// Start of the frame that holds `buf[sent]`.
    frame: usize,
    /// An empty buffer lent to `poll_transmit` ([`Outbox::take_spare`]).
    spare: Vec<u8>,
}

impl Outbox {
    /// Bytes not written yet.
    pub fn len(&self) -> usize {
        self.buf.len() - self.sent
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes to write next.
    pub fn pending(&self) -> &[u8] {
        &self.buf[self.sent..]
    }

    /// An empty vector (with the capacity of the last one appended) for
    /// `poll_transmit` to fill, then hand to [`Outbox::append`]: the
    /// connection's calls may run on another thread, so the output goes
    /// there and back by value, without a copy when nothing waits here.
    pub fn take_spare(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.spare)
    }

    /// An outbox whose first bytes are `head`, which are not a frame: the
    /// `101` that upgraded the connection (and the answers before it),
    /// written ahead of the gateway's frames and never dropped by
    /// [`Outbox::close_next`].
    pub fn with_head(head: Vec<u8>) -> Outbox {
        Outbox { frame: head.len(), buf: head, ..Outbox::default() }
    }

    /// Whole frames to send after what waits.
    pub fn append(&mut self, mut out: Vec<u8>) {
        if self.buf.is_empty() {
            std::mem::swap(&mut self.buf, &mut out);
        } else {
            self.buf.extend_from_slice(&out);
        }
        out.clear();
        self.spare = out;
    }

    /// The socket took `n` more bytes.
    pub fn advance(&mut self, n: usize) {
        self.sent = (self.sent + n).min(self.buf.len());
        while let Some(len) = frame_len(&self.buf[self.frame..]) {
            if self.frame + len > self.sent {
                break;
            }
            self.frame += len;
        }
        if self.sent == self.buf.len() {
            self.buf.clear();
            (self.sent, self.frame) = (0, 0);
        } else if self.frame <= self.sent && self.frame > self.buf.len() / 2 {
            // Written frames go once they are half the buffer: memory
            // stays bounded by what waits, at a copy per half.
            self.buf.drain(..self.frame);
            self.sent -= self.frame;
            self.frame = 0;
        }
    }

    /// Moves the last frame (the session's close: appended last) to just
    /// after the frame being written, dropping every frame between that
    /// was not begun.
    pub fn close_next(&mut self) {
        // Past the frame being written, or past the head not yet written
        // (`frame` is where the frames start while `sent` is inside it).
        let end = if self.sent > self.frame {
            self.frame + frame_len(&self.buf[self.frame..]).unwrap_or(self.buf.len() - self.frame)
        } else {
            self.frame
        };
        let mut last = end;
        while let Some(len) = frame_len(&self.buf[last..]) {
            if last + len >= self.buf.len() {
                break;
            }
            last += len;
        }
        if last > end {
            self.buf.drain(end..last);
        }
    }
}

/// Length of the frame at the start of `b`, header and payload, if its
/// header is there (tungstenite's own header parser: the frames are its).
fn frame_len(b: &[u8]) -> Option<usize> {
    let mut cursor = std::io::Cursor::new(b);
    let (_, payload) = tungstenite::protocol::frame::FrameHeader::parse(&mut cursor).ok()??;
    usize::try_from(cursor.position()).ok()?.checked_add(usize::try_from(payload).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An unmasked text frame of `n` bytes of `c`.
    fn text(c: u8, n: usize) -> Vec<u8> {
        let mut f = vec![0x81];
        match n {
            0..=125 => f.push(n as u8),
            126..=0xffff => {
                f.push(126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
            _ => {
                f.push(127);
                f.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        f.extend(std::iter::repeat_n(c, n));
        f
    }

    /// A close frame with code 4008 and no reason.
    fn close() -> Vec<u8> {
        vec![0x88, 2, 0x0f, 0xa8]
    }

    #[test]
    fn frame_lengths_of_each_header_size() {
        assert_eq!(frame_len(&text(b'a', 5)), Some(7));
        assert_eq!(frame_len(&text(b'a', 300)), Some(304));
        assert_eq!(frame_len(&text(b'a', 70_000)), Some(70_010));
        assert_eq!(frame_len(&[0x81]), None, "no length byte yet");
        assert_eq!(frame_len(&[0x81, 126, 1]), None, "half an extended length");
        assert_eq!(frame_len(&[0x81, 0x85, 0, 0, 0, 0]), Some(11), "a mask counts four bytes");
    }

    #[test]
    fn written_frames_leave_and_what_waits_stays_in_order() {
        let mut o = Outbox::default();
        let (a, b) = (text(b'a', 10), text(b'b', 200));
        o.append([a.clone(), b.clone()].concat());
        assert_eq!(o.len(), 12 + 204);
        o.advance(5);
        assert_eq!(o.pending(), &[&a[5..], &b[..]].concat()[..]);
        o.advance(7 + 100);
        assert_eq!(o.pending(), &b[100..]);
        o.advance(104);
        assert!(o.is_empty());
        assert_eq!(o.pending(), b"");
        o.advance(3);
        assert!(o.is_empty(), "past the end changes nothing");
    }

    #[test]
    fn the_close_goes_right_after_the_frame_being_written_and_unbegun_frames_are_dropped() {
        let mut o = Outbox::default();
        let (a, b, c) = (text(b'a', 10), text(b'b', 10), text(b'c', 10));
        o.append([a.clone(), b.clone(), c].concat());
        o.advance(4); // inside `a`
        o.append(close());
        o.close_next();
        assert_eq!(o.pending(), &[&a[4..], &close()[..]].concat()[..]);
        // At a frame boundary: the close is next.
        let mut o = Outbox::default();
        o.append([a.clone(), b.clone()].concat());
        o.advance(a.len());
        o.append(close());
        o.close_next();
        assert_eq!(o.pending(), &close()[..]);
        // Nothing begun: only the close.
        let mut o = Outbox::default();
        o.append([a, b].concat());
        o.append(close());
        o.close_next();
        assert_eq!(o.pending(), &close()[..]);
    }

    #[test]
    fn a_head_goes_first_whole_and_a_close_next_keeps_it() {
        let head = b"HTTP/1.1 101 Switching Protocols\r\n\r\n".to_vec();
        let (a, b, close) = (text(b'a', 10), text(b'b', 300), text(b'z', 4));
        // Nothing of the head written yet: the close comes right after it.
        let mut o = Outbox::with_head(head.clone());
        o.append([a.clone(), b.clone(), close.clone()].concat());
        o.close_next();
        assert_eq!(o.pending(), [&head[..], &close[..]].concat());
        // Half the head written: the rest of it, then the close.
        let mut o = Outbox::with_head(head.clone());
        o.append([a.clone(), b.clone()].concat());
        o.advance(5);
        o.append(close.clone());
        o.close_next();
        assert_eq!(o.pending(), [&head[5..], &close[..]].concat());
        // Past the head and into the first frame: that frame ends first.
        let mut o = Outbox::with_head(head.clone());
        o.append([a.clone(), b.clone(), close.clone()].concat());
        o.advance(head.len() + 3);
        o.close_next();
        assert_eq!(o.pending(), [&a[3..], &close[..]].concat());
        // A head larger than the frames behind it is never compacted away.
        let mut o = Outbox::with_head(vec![b'h'; 100]);
        o.append(text(b'a', 10));
        o.advance(60);
        assert_eq!(o.pending(), [&[b'h'; 40][..], &text(b'a', 10)[..]].concat());
        o.advance(40 + 12);
        assert!(o.is_empty());
    }

    #[test]
    fn the_spare_vector_goes_back_empty_and_keeps_its_capacity() {
        let mut o = Outbox::default();
        o.append(text(b'a', 10));
        let mut v = Vec::with_capacity(4096);
        v.extend_from_slice(&text(b'b', 3));
        o.append(v);
        let spare = o.take_spare();
        assert!(spare.is_empty() && spare.capacity() >= 4096);
        assert_eq!(o.len(), 12 + 5);
    }
}
