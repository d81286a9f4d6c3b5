//! Lowercase hexadecimal, two characters a byte from a table. A leaf:
//! it names nothing else in the crate, so any module may use it without
//! drawing a cycle (tests/module_graph.rs).

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// `bytes` in lowercase hex: one allocation for the whole string.
pub fn lower(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_lower(&mut out, bytes);
    out
}

/// Appends `bytes` in lowercase hex to `out`, allocating nothing per byte.
pub fn push_lower(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_lowercase_digits_a_byte_high_nibble_first() {
        assert_eq!(lower(&[0x00, 0x01, 0x0f, 0x10, 0xa0, 0xab, 0xfe, 0xff]), "00010f10a0abfeff");
        let all: Vec<u8> = (0..=255).collect();
        let expected: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(lower(&all), expected);
    }

    #[test]
    fn empty_input_is_the_empty_string() {
        assert_eq!(lower(&[]), "");
        let mut s = String::from("x");
        push_lower(&mut s, &[]);
        assert_eq!(s, "x");
    }

    #[test]
    fn push_appends_after_what_is_there() {
        let mut s = String::from("\"");
        push_lower(&mut s, &[0xde, 0xad, 0xbe, 0xef]);
        s.push('"');
        assert_eq!(s, "\"deadbeef\"");
    }
}
