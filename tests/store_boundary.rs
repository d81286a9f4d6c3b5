//! The store boundary: only `src/store/` knows which database it runs on.
//! Everything else (the rest of the core, the hyper host, the C ABI) asks
//! the store for what it needs (typed rows, domain functions such as
//! `store::limits::take`, capabilities such as `Conn::is_shared`) and
//! never which database it is, never a database's own types, and never
//! SQL. Otherwise a rule grows a second copy per database, and a third
//! database would mean editing every caller.
//!
//! The scan reads each file's code with comments removed (so prose may
//! name the databases) and checks the string literals for SQL.

#[path = "support/rust_source.rs"]
mod rust_source;

use rust_source::{is_ident, pieces, Piece};
use std::path::{Path, PathBuf};

/// What code outside the store must not say, with why.
const FORBIDDEN: &[(&str, &str)] = &[
    ("Dialect", "the SQL dialect is the store's business"),
    (".dialect()", "asks which database it is"),
    (".sqlite()", "reaches for the SQLite connection"),
    (".sqlite_ref()", "reaches for the SQLite connection"),
    ("Conn::Sqlite", "matches on the kind of connection"),
    ("Conn::Postgres", "matches on the kind of connection"),
    ("Row::Sqlite", "decodes a database's own row"),
    ("Row::Pg", "decodes a database's own row"),
    ("Stmt::Sqlite", "holds a database's own statement"),
    ("Stmt::Pg", "holds a database's own statement"),
    ("StorageError::Sqlite", "matches on a database's own error"),
    ("StorageError::Postgres", "matches on a database's own error"),
    ("store::sqlite", "uses one database's module"),
    ("store::postgres", "uses one database's module"),
    ("rusqlite", "uses a database's own client"),
    ("tokio_postgres", "uses a database's own client"),
    ("::postgres::", "uses a database's own client"),
    ("starts_with(\"postgres", "asks which database the URL names"),
    ("database.starts_with", "asks which database the configuration names"),
    ("store::Row", "decodes the store's rows itself"),
    ("Row<'", "decodes the store's rows itself"),
    ("r.get(", "decodes a row by column index"),
    ("get_str(", "decodes a row by column index"),
];

/// Words that begin an SQL statement.
const STATEMENT_WORDS: &[&str] = &[
    "SELECT", "INSERT", "UPDATE", "DELETE", "PRAGMA", "CREATE", "WITH", "ALTER", "DROP", "BEGIN", "COMMIT", "ROLLBACK",
    "ATTACH", "DETACH", "VACUUM", "REPLACE",
];

/// Pieces of SQL inside a literal (a statement built from parts).
const SQL_PIECES: &[&str] = &["INSERT INTO", "DELETE FROM", " FROM ", " WHERE ", " SET ", "ON CONFLICT"];

/// Whether a string literal's text is SQL: it begins with a statement
/// word (then a space, or nothing), or holds a piece of a statement.
fn is_sql(s: &str) -> bool {
    let t = s.trim_start();
    let word: String = t.chars().take_while(char::is_ascii_uppercase).collect();
    let after = t[word.len()..].chars().next();
    (STATEMENT_WORDS.contains(&word.as_str()) && after.is_none_or(char::is_whitespace))
        || SQL_PIECES.iter().any(|p| s.contains(p))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = entry.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The files outside the store: the core's other modules, the hyper host
/// and the C ABI.
fn outside_store() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "hosts/hyper/src", "bindings/c/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    let store = root.join("src/store");
    files.retain(|f| !f.starts_with(&store));
    assert!(files.len() > 20, "the scan found only {} files: is it looking in the right place?", files.len());
    files
}

/// `text` split into its code with comments removed (string literals kept,
/// so a pattern may include one) and its string literals' contents.
fn lex(text: &str) -> (String, Vec<String>) {
    let (mut code, mut strings) = (String::new(), Vec::new());
    for piece in pieces(text) {
        match piece {
            Piece::Code(c) | Piece::Char(c) => code.push_str(c),
            Piece::Str { written, content } => {
                code.push_str(written);
                strings.push(content.to_string());
            }
        }
    }
    (code, strings)
}

/// Whether `line` holds `pattern` as a token of its own: a pattern that
/// starts with a name character must not continue a longer name
/// (`r.get(` is not `header.get(`).
fn holds(line: &str, pattern: &str) -> bool {
    line.match_indices(pattern)
        .any(|(i, _)| !pattern.as_bytes()[0].is_ascii_alphanumeric() || i == 0 || !is_ident(line.as_bytes()[i - 1]))
}

/// Each breach of the boundary in one file's text: `(line, what, why)`.
fn breaches(text: &str) -> Vec<(usize, String, &'static str)> {
    let (code, strings) = lex(text);
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        for (pattern, why) in FORBIDDEN {
            if holds(line, pattern) {
                found.push((n + 1, (*pattern).to_string(), *why));
            }
        }
    }
    for s in strings.iter().filter(|s| is_sql(s)) {
        // Line numbers of strings: where the literal's first line is.
        let at = text.find(s.as_str()).map_or(0, |i| text[..i].lines().count().max(1));
        found.push((at, format!("{:?}", s.chars().take(60).collect::<String>()), "SQL belongs in src/store/"));
    }
    found
}

#[test]
fn no_code_outside_the_store_asks_which_database_it_is_or_holds_sql() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    for f in outside_store() {
        let text = std::fs::read_to_string(&f).unwrap();
        for (line, what, why) in breaches(&text) {
            all.push(format!("{}:{line}: {what}: {why}", f.strip_prefix(root).unwrap().display()));
        }
    }
    assert!(all.is_empty(), "the store boundary is crossed:\n{}", all.join("\n"));
}

/// The scan itself: each kind of breach is caught, prose and names that
/// merely look alike are not.
#[test]
fn the_scan_catches_each_kind_of_breach_and_ignores_prose() {
    let caught = |src: &str| breaches(src).into_iter().map(|(_, what, _)| what).collect::<Vec<_>>();
    assert_eq!(caught("let k = conn.dialect();"), [".dialect()"]);
    assert_eq!(caught("if let Conn::Postgres(pg) = &c {}"), ["Conn::Postgres"]);
    assert_eq!(caught("use crate::store::sqlite::open_reader;"), ["store::sqlite"]);
    assert_eq!(caught("let n = if cfg.database.starts_with(\"postgres\") { 0 } else { 1 };").len(), 2);
    assert_eq!(caught("let id: String = r.get(0)?;"), ["r.get("]);
    assert_eq!(caught("fn row(r: &crate::store::Row<'_>) {}"), ["store::Row", "Row<'"]);
    assert!(caught("let v = req.header.get(0); let d = my_rusqlite_like;").is_empty());
    assert_eq!(caught("q(\"SELECT id FROM bots WHERE id = ?1\")").len(), 1);
    assert_eq!(caught("const Q: &str = r#\"DELETE FROM t\"#;").len(), 1);
    assert_eq!(caught("c.batch(\"COMMIT\"); c.batch(\"  VACUUM INTO x\");").len(), 2);
    assert_eq!(caught("let q = format!(\"{cols} FROM bots WHERE id = ?1\");").len(), 1);
    // Words in messages are not statements.
    assert!(caught("err(\"SELECTED items\"); err(\"Update the bot\"); err(\"COMMIT_OUTCOME\");").is_empty());
    // Comments, rustdoc and plain words may name the databases.
    assert!(caught("// conn.dialect() and Conn::Postgres, SELECT * FROM t WHERE x\nlet a = 1;").is_empty());
    assert!(caught("/// On PostgreSQL, `store::postgres` runs SELECT\nfn f() {}").is_empty());
    assert!(caught("/* nested /* Dialect */ rusqlite */ let b = '\"'; let c = \"a // b\";").is_empty());
    assert!(caught("fn f<'a>(x: &'a str) -> &'a str { x } // Dialect").is_empty());
    assert!(caught("let s = \"is the store shared?\"; conn.is_shared();").is_empty());
}
