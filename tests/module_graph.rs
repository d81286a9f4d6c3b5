//! The core's source files depend on each other one way only: no cycle in
//! the graph whose nodes are the files under `src/` and whose edges are the
//! paths a file names — `use crate::…`, `use super::…`, `use self::…`, a
//! child module's `use child::…`, and the same paths written in code
//! (`crate::metrics::Timer::sampled()`). A path through a re-export
//! (`pub use`, `pub(crate) use`, a glob) is followed to the file that
//! defines the item, so `crate::Service` is an edge to `src/service/mod.rs`
//! and `super::Registry` (re-exported by `gateway/mod.rs`) an edge to
//! `src/gateway/registry.rs`. Files in one folder are nodes like any other.
//!
//! A cycle is how a "small" helper ends up reaching into a caller's
//! private state; the test prints the cycle, file by file, when one
//! appears. Method calls (`self.run_batch()`) carry no path and are not
//! seen: the graph is the one the `use` lines and written paths draw.

#[path = "support/rust_source.rs"]
mod rust_source;

use rust_source::{pieces, Piece};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A token of Rust source, once comments, strings and chars are gone.
#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Punct(char),
}

/// Tokens of `src`, with comments, string, byte-string, raw-string and
/// char literals dropped (so a path in a doc comment or a message is not
/// an edge). Lifetimes (`'a`) become identifiers, which is harmless.
fn tokens(src: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    for piece in pieces(src) {
        let Piece::Code(code) = piece else { continue };
        let b = code.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if c.is_ascii_alphabetic() || c == b'_' {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                out.push(Tok::Ident(code[start..i].to_string()));
            } else if c == b':' && b.get(i + 1) == Some(&b':') {
                out.push(Tok::Sep);
                i += 2;
            } else if c.is_ascii_whitespace() || c.is_ascii_digit() || !c.is_ascii() || c == b'\'' {
                // A lifetime's quote: its name is read as an identifier next.
                i += 1;
            } else {
                out.push(Tok::Punct(c as char));
                i += 1;
            }
        }
    }
    out
}

/// One name a `use` binds in a module: `use a::b::{c, d as e, f::*}` binds
/// `c` → `a::b::c`, `e` → `a::b::d`, and a glob over `a::b::f`.
#[derive(Clone, Debug)]
struct Binding {
    /// `None` for a glob.
    name: Option<String>,
    path: Vec<String>,
}

/// A module: the file it lives in and what it holds.
#[derive(Default, Debug)]
struct Module {
    file: PathBuf,
    children: BTreeSet<String>,
    bindings: Vec<Binding>,
    /// Paths the module names (in `use` lines that are not re-exports, and in code).
    uses: Vec<Vec<String>>,
    /// `macro_rules! name` defined in the module (a `#[macro_export]` one
    /// is named `crate::name`, whatever file defines it).
    macros: BTreeSet<String>,
    /// A `#[cfg(test)]` module: a file's tests may name anything, and are
    /// not part of the graph.
    test: bool,
}

type Modules = BTreeMap<Vec<String>, Module>;

/// Reads `use` trees: after `use`, up to the `;`.
fn use_tree(toks: &[Tok], i: &mut usize, prefix: &[String], out: &mut Vec<(Option<String>, Vec<String>)>) {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(*i) {
            Some(Tok::Ident(s)) if s == "as" => {
                *i += 1;
                if let Some(Tok::Ident(alias)) = toks.get(*i) {
                    *i += 1;
                    if alias != "_" {
                        out.push((Some(alias.clone()), path.clone()));
                    } else {
                        out.push((None, path.clone()));
                    }
                }
                return;
            }
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                *i += 1;
            }
            Some(Tok::Sep) => *i += 1,
            Some(Tok::Punct('*')) => {
                *i += 1;
                out.push((None, path.clone()));
                return;
            }
            Some(Tok::Punct('{')) => {
                *i += 1;
                loop {
                    match toks.get(*i) {
                        Some(Tok::Punct('}')) => {
                            *i += 1;
                            return;
                        }
                        Some(Tok::Punct(',')) => *i += 1,
                        None => return,
                        _ => use_tree(toks, i, &path, out),
                    }
                }
            }
            _ => {
                // `self` inside braces names the prefix itself.
                if path.last().is_some_and(|l| l == "self") {
                    path.pop();
                }
                if let Some(name) = path.last() {
                    out.push((Some(name.clone()), path.clone()));
                }
                return;
            }
        }
    }
}

/// Parses one file (and the inline `mod x { … }` blocks in it) into `mods`.
fn parse_file(file: &Path, module: Vec<String>, mods: &mut Modules) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let toks = tokens(&text);
    // The module each open brace belongs to, to leave inline modules.
    let mut stack: Vec<(Vec<String>, usize)> = Vec::new();
    let mut current = module.clone();
    let mut depth = 0usize;
    mods.entry(current.clone()).or_default().file = file.to_path_buf();
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Tok::Punct('}') => {
                if stack.last().is_some_and(|(_, d)| *d == depth) {
                    current = stack.pop().unwrap().0;
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(kw) if kw == "mod" && matches!(toks.get(i + 1), Some(Tok::Ident(_))) => {
                let Some(Tok::Ident(name)) = toks.get(i + 1) else { unreachable!() };
                let mut child = current.clone();
                child.push(name.clone());
                mods.get_mut(&current).unwrap().children.insert(name.clone());
                match toks.get(i + 2) {
                    Some(Tok::Punct('{')) => {
                        depth += 1;
                        stack.push((current.clone(), depth));
                        let cfg_test = [Tok::Punct('#'), Tok::Punct('[')]
                            .into_iter()
                            .chain(["cfg", "test"].map(|s| Tok::Ident(s.into())))
                            .collect::<Vec<_>>();
                        let before: Vec<Tok> = toks[i.saturating_sub(7)..i]
                            .iter()
                            .filter(|t| !matches!(t, Tok::Punct('(' | ')' | ']')))
                            .cloned()
                            .collect();
                        let test = mods[&current].test || before.ends_with(&cfg_test);
                        let entry = mods.entry(child.clone()).or_default();
                        entry.file = file.to_path_buf();
                        entry.test = test;
                        current = child;
                        i += 3;
                    }
                    _ => {
                        // `mod x;`: src/…/x.rs or src/…/x/mod.rs (or a #[path], unused in src/).
                        let dir = if module.is_empty() || file.file_name().unwrap() == "mod.rs" {
                            file.parent().unwrap().to_path_buf()
                        } else {
                            file.with_extension("")
                        };
                        let (flat, nested) = (dir.join(format!("{name}.rs")), dir.join(name).join("mod.rs"));
                        let child_file = if flat.exists() { flat } else { nested };
                        parse_file(&child_file, child, mods);
                        i += 2;
                    }
                }
            }
            Tok::Ident(kw) if kw == "macro_rules" && matches!(toks.get(i + 1), Some(Tok::Punct('!'))) => {
                if let Some(Tok::Ident(name)) = toks.get(i + 2) {
                    mods.get_mut(&current).unwrap().macros.insert(name.clone());
                }
                i += 3;
            }
            Tok::Ident(kw) if kw == "use" => {
                // `pub use`, `pub(crate) use`, `pub(super) use`, `pub(in x) use`.
                let public = i >= 1
                    && (matches!(&toks[i - 1], Tok::Ident(p) if p == "pub")
                        || (matches!(toks[i - 1], Tok::Punct(')'))
                            && toks[..i].iter().rev().take(6).any(|t| matches!(t, Tok::Ident(p) if p == "pub"))));
                i += 1;
                let mut found = Vec::new();
                use_tree(&toks, &mut i, &[], &mut found);
                let m = mods.get_mut(&current).unwrap();
                for (name, path) in found {
                    // A re-export (`pub use`) is followed, not an edge of its own.
                    if !public {
                        m.uses.push(path.clone());
                    }
                    m.bindings.push(Binding { name, path });
                }
            }
            Tok::Ident(first) if matches!(toks.get(i + 1), Some(Tok::Sep)) => {
                // A path in code: `a::b::c`, unless it continues one (`x::a::b`).
                let continues = i >= 1 && matches!(toks[i - 1], Tok::Sep);
                let mut path = vec![first.clone()];
                let mut j = i + 1;
                while let (Some(Tok::Sep), Some(Tok::Ident(s))) = (toks.get(j), toks.get(j + 1)) {
                    path.push(s.clone());
                    j += 2;
                }
                if !continues {
                    mods.get_mut(&current).unwrap().uses.push(path);
                }
                i = j;
            }
            _ => i += 1,
        }
    }
}

/// Turns a path named in `module` into a path from the crate root, or
/// `None` for a path into another crate (`std::…`, `serde::…`) or a local
/// item (`Self::new`, `Vec::new`).
fn absolute(mods: &Modules, module: &[String], path: &[String]) -> Option<Vec<String>> {
    absolute_within(mods, module, path, 0)
}

/// Bindings followed at most this deep: a `use` that names itself (`pub(super)
/// use m;` re-exporting a macro `m` of the same module) ends there instead
/// of recursing without end.
const MAX_BINDING_DEPTH: usize = 32;

fn absolute_within(mods: &Modules, module: &[String], path: &[String], depth: usize) -> Option<Vec<String>> {
    if depth > MAX_BINDING_DEPTH {
        return None;
    }
    let (first, rest) = path.split_first()?;
    match first.as_str() {
        "crate" => Some(rest.to_vec()),
        "self" => Some(module.iter().chain(rest).cloned().collect()),
        "super" => {
            let parent = &module[..module.len().checked_sub(1)?];
            if rest.first().is_some_and(|s| s == "super") {
                absolute_within(mods, parent, rest, depth + 1)
            } else {
                Some(parent.iter().chain(rest).cloned().collect())
            }
        }
        _ => {
            let m = mods.get(module)?;
            if m.children.contains(first) {
                return Some(module.iter().chain(path).cloned().collect());
            }
            // A name a `use` in this module bound: expand it.
            let b = m.bindings.iter().find(|b| b.name.as_deref() == Some(first.as_str()))?;
            let mut p = absolute_within(mods, module, &b.path, depth + 1)?;
            p.extend_from_slice(rest);
            Some(p)
        }
    }
}

/// The file that defines what the absolute `path` names, following
/// re-exports and globs. `seen` stops a glob loop.
fn resolve(mods: &Modules, path: &[String], seen: &mut BTreeSet<Vec<String>>) -> Option<PathBuf> {
    let mut module: Vec<String> = Vec::new();
    for (k, seg) in path.iter().enumerate() {
        let m = mods.get(&module)?;
        if m.children.contains(seg) {
            module.push(seg.clone());
            continue;
        }
        if !seen.insert(path[..=k].to_vec()) {
            return None;
        }
        // An item of `module`: imported by a `use` there, or defined there.
        // A `use` that names itself (`pub(crate) use m;` for a macro `m` of
        // this module) re-exports what is defined here.
        let names_itself = |b: &&Binding| b.path.len() == 1 && b.path[0] == *seg;
        if let Some(b) =
            m.bindings.iter().find(|b| b.name.as_deref() == Some(seg.as_str())).filter(|b| !names_itself(b))
        {
            let mut target = absolute(mods, &module, &b.path)?;
            target.extend_from_slice(&path[k + 1..]);
            return resolve(mods, &target, seen);
        }
        for glob in m.bindings.iter().filter(|b| b.name.is_none()) {
            if let Some(mut target) = absolute(mods, &module, &glob.path) {
                target.extend_from_slice(&path[k..]);
                if let Some(f) = resolve(mods, &target, seen) {
                    return Some(f);
                }
            }
        }
        if module.is_empty() {
            if let Some(def) = mods.values().find(|d| d.macros.contains(seg)) {
                return Some(def.file.clone());
            }
        }
        return Some(m.file.clone());
    }
    Some(mods.get(&module)?.file.clone())
}

/// The crate at `root` (its `lib.rs`): file → files it depends on, as
/// paths relative to `root`.
fn graph_of(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut mods = Modules::new();
    parse_file(&root.join("lib.rs"), Vec::new(), &mut mods);
    let name = |f: &Path| f.strip_prefix(root).unwrap().display().to_string();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, m) in &mods {
        let from = name(&m.file);
        let deps = g.entry(from.clone()).or_default();
        if m.test {
            continue;
        }
        for used in &m.uses {
            let Some(abs) = absolute(&mods, path, used) else { continue };
            if let Some(to) = resolve(&mods, &abs, &mut BTreeSet::new()) {
                let to = name(&to);
                if to != from {
                    deps.insert(to);
                }
            }
        }
    }
    g
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    graph_of(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

/// Every cycle's smallest witness, one per strongly connected component.
fn cycles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Shortest cycle through each node, by breadth-first search back to it.
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut covered = BTreeSet::new();
    for start in g.keys() {
        if covered.contains(start) {
            continue;
        }
        let mut prev: BTreeMap<&String, &String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        let mut found = false;
        while let Some(n) = queue.pop_front() {
            for d in g.get(n).into_iter().flatten() {
                if d == start {
                    // start -> … -> n -> start, read back through `prev`.
                    let mut back = vec![n.clone()];
                    let mut at = n;
                    while at != start {
                        at = prev[at];
                        back.push(at.clone());
                    }
                    back.reverse();
                    back.push(start.clone());
                    covered.extend(back.iter().cloned());
                    out.push(back);
                    found = true;
                    break;
                }
                if !prev.contains_key(d) && d != start {
                    prev.insert(d, n);
                    queue.push_back(d);
                }
            }
            if found {
                break;
            }
        }
    }
    out
}

#[test]
fn no_file_in_src_is_part_of_a_cycle() {
    let g = graph();
    // The graph sees through re-exports and into folders: these edges
    // exist only that way.
    let has = |from: &str, to: &str| g.get(from).is_some_and(|d| d.contains(to));
    let accept = &g["service/gateway.rs"];
    assert!(has("service/gateway.rs", "service/mod.rs"), "crate::Service → service/mod.rs: {accept:?}");
    assert!(has("service/gateway.rs", "gateway/driver.rs"), "crate::gateway::GatewaySession: {accept:?}");
    assert!(has("gateway/driver.rs", "gateway/registry.rs"), "{:?}", g["gateway/driver.rs"]);
    assert!(g.len() > 60, "every file under src/ is a node: {}", g.len());
    if std::env::var_os("MODULE_GRAPH_PRINT").is_some() {
        for (f, d) in &g {
            println!("{f} -> {d:?}");
        }
    }
    let found = cycles(&g);
    let text: Vec<String> = found.iter().map(|c| c.join(" -> ")).collect();
    assert!(found.is_empty(), "import cycles in src/:\n  {}", text.join("\n  "));
}

/// The same graph with each folder (and each file directly under `src/`)
/// as one node: `gateway/*` → `service/*` and `service/*` → `gateway/*`
/// would be a cycle here even when no two files close one.
fn folders(g: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, BTreeSet<String>> {
    let top = |f: &str| f.split('/').next().unwrap().trim_end_matches(".rs").to_string();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, deps) in g {
        let entry = out.entry(top(from)).or_default();
        entry.extend(deps.iter().map(|d| top(d)).filter(|d| *d != top(from)));
    }
    out
}

#[test]
fn no_module_of_src_is_part_of_a_cycle() {
    let g = folders(&graph());
    assert!(g["service"].contains("gateway") && g["gateway"].contains("store"), "{g:?}");
    let found = cycles(&g);
    let text: Vec<String> = found.iter().map(|c| c.join(" -> ")).collect();
    assert!(found.is_empty(), "module cycles in src/:\n  {}", text.join("\n  "));
}

/// The parser and the cycle finder on a small crate written here: a cycle
/// through a `pub use` re-export, `super::`, an inline module and a path
/// in code is found; the same crate without the back edge has none.
/// A directory of its own for a test's made-up crate.
fn scratch_crate(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("botspace-module-graph-{tag}-{}", std::process::id()))
}

fn write_file(dir: &Path, name: &str, text: &str) {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn the_graph_follows_re_exports_and_finds_a_cycle() {
    let dir = scratch_crate("reexports");
    let write = |name: &str, text: &str| write_file(&dir, name, text);
    write("lib.rs", "mod a;\nmod b;\npub use a::Thing;\n");
    write("a/mod.rs", "mod inner;\npub(crate) use inner::Thing;\n");
    // A string and a comment naming crate::b are not edges.
    write("a/inner.rs", "// crate::b::X\npub struct Thing;\nconst S: &str = \"crate::b::X\";\n");
    // A test module's paths are not edges.
    write("b.rs", "use crate::Thing;\npub struct X;\n#[cfg(test)]\nmod t { use crate::a::Thing; use super::X; }\n");
    let g = graph_of(&dir);
    assert_eq!(g["b.rs"], BTreeSet::from(["a/inner.rs".to_string()]), "{g:?}");
    assert!(g["a/mod.rs"].is_empty() && g["a/inner.rs"].is_empty(), "{g:?}");
    assert!(cycles(&g).is_empty(), "{g:?}");

    // Now inner.rs reaches back, in code, through the parent's `super::`.
    write("a/inner.rs", "pub struct Thing;\nfn f() { let _ = super::super::b::X; }\n");
    let g = graph_of(&dir);
    let found = cycles(&g);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found, vec![vec!["a/inner.rs".to_string(), "b.rs".to_string(), "a/inner.rs".to_string()]], "{g:?}");
}

/// A module that re-exports its own macro under the same name binds the
/// name to itself: the graph is still read, and the macro's users depend
/// on its file.
#[test]
fn a_use_that_names_itself_does_not_loop() {
    let dir = scratch_crate("self");
    let write = |name: &str, text: &str| write_file(&dir, name, text);
    write(
        "lib.rs",
        "mod m;
mod user;
",
    );
    write("m.rs", "macro_rules! cols { () => { \"a, b\" }; }\npub(crate) use cols;\n");
    write("user.rs", "const C: &str = crate::m::cols!();\n");
    let g = graph_of(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(g["user.rs"], BTreeSet::from(["m.rs".to_string()]), "{g:?}");
    assert!(cycles(&g).is_empty(), "{g:?}");
}
