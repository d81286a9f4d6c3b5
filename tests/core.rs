//! The core's rule tests, in one binary: each file below is a module of
//! its own, as it was a binary of its own before, and linking one binary
//! instead of ten saves most of their build time. Run one file's tests
//! with `cargo test --test core rules_http::`.

// Each file keeps its own `mod common;` (and `mod wire;`), so it reads as
// it did as a binary of its own; the copies of those helpers cost little.
#![allow(clippy::duplicate_mod)]

#[path = "concurrency.rs"]
mod concurrency;
#[path = "gateway_link.rs"]
mod gateway_link;
#[path = "gateway_sansio.rs"]
mod gateway_sansio;
#[path = "group_commit.rs"]
mod group_commit;
#[path = "http_round.rs"]
mod http_round;
#[path = "module_graph.rs"]
mod module_graph;
#[path = "robustness.rs"]
mod robustness;
#[path = "rules_admin_auth.rs"]
mod rules_admin_auth;
#[path = "rules_batch.rs"]
mod rules_batch;
#[path = "rules_console.rs"]
mod rules_console;
#[path = "rules_handles.rs"]
mod rules_handles;
#[path = "rules_http.rs"]
mod rules_http;
#[path = "rules_ops.rs"]
mod rules_ops;
#[path = "rules_retention.rs"]
mod rules_retention;
#[path = "rules_storage.rs"]
mod rules_storage;
#[path = "rules_updates.rs"]
mod rules_updates;
#[path = "rules_webhooks.rs"]
mod rules_webhooks;
#[path = "rules_words.rs"]
mod rules_words;
#[path = "store_boundary.rs"]
mod store_boundary;

/// Cargo.toml turns off test discovery (`autotests = false`) so these files
/// are not also built as binaries of their own; a new file in tests/ must
/// then be named there or here, or it would never run.
#[test]
fn every_test_file_is_built_as_a_target_or_a_module_of_this_one() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let targets: Vec<&str> = manifest
        .split("[[test]]")
        .skip(1)
        .filter_map(|t| t.lines().find_map(|l| l.trim().strip_prefix("name = \"")?.strip_suffix('"')))
        .collect();
    let this = include_str!("core.rs");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root.join("tests")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let Some(stem) = name.strip_suffix(".rs") else { continue };
        let included = this.contains(&format!("#[path = \"{name}\"]\nmod {stem};"));
        if !targets.contains(&stem) && !included {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "tests/ files neither a [[test]] in Cargo.toml nor a module of tests/core.rs: {missing:?}"
    );
    assert!(targets.contains(&"core") && targets.contains(&"vectors"), "{targets:?}");
}
