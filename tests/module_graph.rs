//! The core's modules depend on each other one way only: no cycle between
//! `src/<module>.rs` (or `src/<module>/`) through `crate::<module>` paths.
//! A cycle is how a "small" helper ends up reaching into a caller's
//! private state; this test names the cycle when one appears.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module → modules its source names through `crate::<module>`.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                let e = e.unwrap().path();
                // A folder inside a module's folder (src/store/postgres/) is the module's too.
                if e.is_dir() {
                    files.extend(std::fs::read_dir(&e).unwrap().map(|f| f.unwrap().path()));
                } else {
                    files.push(e);
                }
            }
        } else {
            files.push(p);
        }
    }
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        // The module a file belongs to: its top-level name under src/.
        let top = rel.iter().next().unwrap().to_str().unwrap().trim_end_matches(".rs").to_string();
        if top == "lib" {
            continue; // the root declares every module
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let deps = g.entry(top.clone()).or_default();
        for (i, _) in text.match_indices("crate::") {
            let rest = &text[i + "crate::".len()..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            // `crate::{a, b}` lists: take each name.
            let names: Vec<String> = if rest.starts_with('{') {
                let end = rest.find('}').unwrap_or(0);
                rest[1..end].split(',').map(|s| s.trim().split("::").next().unwrap_or("").to_string()).collect()
            } else {
                vec![name]
            };
            for n in names {
                // Items re-exported at the crate root (Service, Config...) start upper-case.
                if !n.is_empty() && n != top && n.chars().next().unwrap().is_ascii_lowercase() {
                    deps.insert(n);
                }
            }
        }
    }
    g
}

fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(pos) = stack.iter().position(|s| s == n) {
            let mut c = stack[pos..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        stack.push(n.to_string());
        for d in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(d, g, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for n in g.keys() {
        if let Some(c) = visit(n, g, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

#[test]
fn modules_depend_one_way() {
    let g = graph();
    assert!(g.contains_key("service") && g.contains_key("gateway") && g["service"].contains("gateway"));
    if let Some(c) = find_cycle(&g) {
        panic!("module cycle: {}", c.join(" -> "));
    }
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let mut g = graph();
    g.entry("txn".into()).or_default().insert("service".into());
    assert!(find_cycle(&g).is_some());
}
