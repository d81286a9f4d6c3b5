//! Rust source split into code and literals, comments dropped: the one
//! scanner of the tests that read `src/` as text (tests/module_graph.rs,
//! tests/store_boundary.rs). Each includes it with
//! `#[path = "support/rust_source.rs"] mod rust_source;`.

// Each includer uses what it needs of it.
#![allow(dead_code)]

/// A piece of Rust source.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Piece<'a> {
    /// Code outside comments and literals (a lifetime's quote included).
    Code(&'a str),
    /// A string literal (plain, byte, raw) as written, and what stands
    /// between its quotes.
    Str { written: &'a str, content: &'a str },
    /// A char literal as written (`'x'`, `'\n'`, `'\u{1F600}'`).
    Char(&'a str),
}

/// The pieces of `src`, in order, without its comments (line and nested
/// block comments).
pub fn pieces(src: &str) -> Vec<Piece<'_>> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    // Where the code not yet handed out starts.
    let mut code = 0;
    let mut i = 0;
    while i < b.len() {
        let (end, piece) = if b[i..].starts_with(b"//") {
            (b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |n| i + n), None)
        } else if b[i..].starts_with(b"/*") {
            (block_comment_end(b, i), None)
        } else if let Some((hashes, open)) = raw_string_start(b, i) {
            let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
            let start = i + open;
            let stop =
                b[start..].windows(close.len()).position(|w| w == close.as_slice()).map_or(b.len(), |n| start + n);
            let end = (stop + close.len()).min(b.len());
            (end, Some(Piece::Str { written: &src[i..end], content: &src[start..stop] }))
        } else if b[i] == b'"' || (b[i] == b'b' && b.get(i + 1) == Some(&b'"') && starts_token(b, i)) {
            let start = i + if b[i] == b'b' { 2 } else { 1 };
            let mut stop = start;
            while stop < b.len() && b[stop] != b'"' {
                stop += if b[stop] == b'\\' { 2 } else { 1 };
            }
            let stop = stop.min(b.len());
            let end = (stop + 1).min(b.len());
            (end, Some(Piece::Str { written: &src[i..end], content: &src[start..stop] }))
        } else if let Some(end) = char_literal_end(src, i) {
            (end, Some(Piece::Char(&src[i..end])))
        } else {
            i += 1;
            continue;
        };
        if code < i {
            out.push(Piece::Code(&src[code..i]));
        }
        out.extend(piece);
        i = end;
        code = end;
    }
    if code < b.len() {
        out.push(Piece::Code(&src[code..]));
    }
    out
}

/// Where the block comment that opens at `i` ends (comments nest).
fn block_comment_end(b: &[u8], mut i: usize) -> usize {
    let mut depth = 0;
    while i < b.len() {
        if b[i..].starts_with(b"/*") {
            depth += 1;
            i += 2;
        } else if b[i..].starts_with(b"*/") {
            depth -= 1;
            i += 2;
            if depth == 0 {
                break;
            }
        } else {
            i += 1;
        }
    }
    i.min(b.len())
}

/// Whether `b[i]` is a name character.
pub fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Whether a token starts at `i`: no name goes on into it.
fn starts_token(b: &[u8], i: usize) -> bool {
    i == 0 || !is_ident(b[i - 1])
}

/// At `r"`, `r#"`, `br##"`…: the number of `#` and the length of the
/// opener.
fn raw_string_start(b: &[u8], i: usize) -> Option<(usize, usize)> {
    if !starts_token(b, i) {
        return None;
    }
    let mut j = i;
    if b.get(j) == Some(&b'b') {
        j += 1;
    }
    if b.get(j) != Some(&b'r') {
        return None;
    }
    j += 1;
    let hashes = b[j..].iter().take_while(|c| **c == b'#').count();
    j += hashes;
    (b.get(j) == Some(&b'"')).then_some((hashes, j + 1 - i))
}

/// At a `'`: where the char literal it opens ends, or `None` for a
/// lifetime (`'a`).
fn char_literal_end(src: &str, i: usize) -> Option<usize> {
    let b = src.as_bytes();
    if b[i] != b'\'' {
        return None;
    }
    if b.get(i + 1) == Some(&b'\\') {
        // An escape: '\n', '\'', '\u{1F600}'.
        let mut j = i + 3;
        while j < b.len() && b[j] != b'\'' {
            j += 1;
        }
        return Some((j + 1).min(b.len()));
    }
    let len = src.get(i + 1..)?.chars().next().map_or(1, char::len_utf8);
    (b.get(i + 1 + len) == Some(&b'\'')).then_some(i + 2 + len)
}
