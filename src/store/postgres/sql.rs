//! Statements as PostgreSQL reads them. The store's SQL is written once,
//! in one portable dialect with SQLite's `?1` parameters; PostgreSQL
//! numbers its parameters `$1`. Each statement text is translated the
//! first time any connection of the process prepares it, and the
//! translation is kept for the life of the process (the texts are the
//! code's own, a fixed set): no statement is scanned twice, and none is
//! scanned when it runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// A statement as PostgreSQL takes it, and whether the rows it returns are
/// rows it wrote (`UPDATE … RETURNING`, a CTE that writes).
#[derive(Clone)]
pub(super) struct Translated {
    pub text: Arc<str>,
    pub writes: bool,
}

/// `sql` translated: once per text per process.
pub(super) fn translated(sql: &str) -> Translated {
    static DONE: OnceLock<Mutex<HashMap<String, Translated>>> = OnceLock::new();
    let done = DONE.get_or_init(Mutex::default);
    if let Some(t) = done.lock().unwrap_or_else(|e| e.into_inner()).get(sql) {
        return t.clone();
    }
    let upper = sql.trim_start().to_ascii_uppercase();
    let writes = ["UPDATE", "INSERT", "DELETE"].iter().any(|w| upper.starts_with(w))
        || (upper.starts_with("WITH") && ["UPDATE ", "INSERT ", "DELETE "].iter().any(|w| upper.contains(w)));
    let t = Translated { text: positional(sql).into(), writes };
    done.lock().unwrap_or_else(|e| e.into_inner()).insert(sql.to_string(), t.clone());
    t
}

/// `?1`-style parameters (SQLite's, the dialect's) as PostgreSQL's `$1`.
///
/// Only a `?` followed by a digit in the statement's own text is a
/// parameter: the scan skips what PostgreSQL does not read as text of the
/// statement — string literals (`'…'`, `''` inside; `E'…'` with backslash
/// escapes), quoted identifiers (`"…"`), dollar-quoted strings
/// (`$tag$…$tag$`), line comments (`-- …`) and block comments (`/* … */`,
/// nested). A `?` not followed by a digit (jsonb's `?`, `?|`, `?&`) stays.
fn positional(sql: &str) -> String {
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len());
    // Everything up to `done` has been copied to `out`.
    let mut done = 0;
    let mut i = 0;
    while i < b.len() {
        i = match b[i] {
            b'\'' => {
                let escapes = i > 0 && matches!(b[i - 1], b'E' | b'e') && (i < 2 || !is_ident(b[i - 2]));
                skip_quoted(b, i + 1, b'\'', escapes)
            }
            b'"' => skip_quoted(b, i + 1, b'"', false),
            b'-' if b.get(i + 1) == Some(&b'-') => b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |n| i + n),
            b'/' if b.get(i + 1) == Some(&b'*') => skip_block_comment(b, i + 2),
            b'$' if i == 0 || !is_ident(b[i - 1]) => skip_dollar_quoted(b, i),
            b'?' if b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                out.push_str(&sql[done..i]);
                out.push('$');
                done = i + 1;
                i + 1
            }
            _ => i + 1,
        };
    }
    out.push_str(&sql[done..]);
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// The index after the closing `quote` of a quoted run starting at `i`
/// (its opening quote already passed); a doubled quote is one character
/// of the run, as is a backslash and what follows it with `escapes`.
fn skip_quoted(b: &[u8], mut i: usize, quote: u8, escapes: bool) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' if escapes => i += 2,
            c if c == quote && b.get(i + 1) == Some(&quote) => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// The index after the `*/` that closes a block comment whose `/*` ends at
/// `i`; PostgreSQL's block comments nest.
fn skip_block_comment(b: &[u8], mut i: usize) -> usize {
    let mut depth = 1;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            depth += 1;
            i += 2;
        } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

/// At a `$` that starts a token: past a dollar-quoted string (`$$…$$` or
/// `$tag$…$tag$`) when it is one, else just past the `$` (a `$1`
/// parameter or anything else).
fn skip_dollar_quoted(b: &[u8], i: usize) -> usize {
    let tag_len = b[i + 1..].iter().take_while(|&&c| is_ident(c) && !c.is_ascii_digit()).count();
    let end = i + 1 + tag_len;
    if b.get(end) != Some(&b'$') {
        return i + 1;
    }
    let tag = &b[i..=end];
    b[end + 1..].windows(tag.len()).position(|w| w == tag).map_or(b.len(), |n| end + 1 + n + tag.len())
}

#[cfg(test)]
mod tests {
    #[test]
    fn positional_parameters_become_dollar_numbers_outside_strings() {
        assert_eq!(super::positional("SELECT ?1, '?2', ?12 WHERE a = ?3"), "SELECT $1, '?2', $12 WHERE a = $3");
    }

    #[test]
    fn positional_rewrite_leaves_comments_quoted_identifiers_and_dollar_quotes_alone() {
        let p = super::positional;
        assert_eq!(p("SELECT ?1 -- not ?2\nFROM t WHERE a = ?3"), "SELECT $1 -- not ?2\nFROM t WHERE a = $3");
        assert_eq!(p("SELECT /* ?1 /* nested ?2 */ ?3 */ ?4"), "SELECT /* ?1 /* nested ?2 */ ?3 */ $4");
        assert_eq!(p(r#"SELECT "col?1", ?2 FROM "t""?3""#), r#"SELECT "col?1", $2 FROM "t""?3""#);
        assert_eq!(p("SELECT 'it''s ?1', ?2"), "SELECT 'it''s ?1', $2");
        assert_eq!(p(r"SELECT E'\' ?1', ?2"), r"SELECT E'\' ?1', $2");
        assert_eq!(p("SELECT $$ ?1 $$, $q$ ?2 $q$, ?3"), "SELECT $$ ?1 $$, $q$ ?2 $q$, $3");
        // Already numbered, and jsonb's own operators, stay as they are.
        assert_eq!(p("SELECT $1, d ? 'k', d ?| ?2"), "SELECT $1, d ? 'k', d ?| $2");
        // Unterminated runs end the scan without a panic.
        assert_eq!(p("SELECT '?1"), "SELECT '?1");
        assert_eq!(p("SELECT /* ?1"), "SELECT /* ?1");
        assert_eq!(p("SELECT $a$ ?1"), "SELECT $a$ ?1");
        assert_eq!(p("SELECT ?1 --"), "SELECT $1 --");
    }
}

#[cfg(test)]
mod translated_tests {
    #[test]
    fn a_statement_is_translated_once_and_writes_are_known() {
        let a = super::translated("UPDATE t SET a = ?1 WHERE b = ?2");
        let b = super::translated("UPDATE t SET a = ?1 WHERE b = ?2");
        assert_eq!(&*a.text, "UPDATE t SET a = $1 WHERE b = $2");
        assert!(a.writes && std::sync::Arc::ptr_eq(&a.text, &b.text), "the second is the first's translation");
        assert!(!super::translated("SELECT a FROM t WHERE b = ?1").writes);
        assert!(super::translated("WITH x AS (DELETE FROM t RETURNING a) SELECT a FROM x").writes);
    }
}
