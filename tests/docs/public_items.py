#!/usr/bin/env python3
"""Every public item of `botspace` and `botspace-runtime`, and every public
method of `Service`, is named in the "Public items and who calls them"
section of docs/architecture.md, so the page keeps saying who calls what;
and each `Service` method's own doc shows an example or names its caller.

Reads rustdoc's output: run `cargo doc --workspace --no-deps` first
(scripts/test-rust.sh does). Item lists come from each crate's `all.html`;
`Service`'s methods from its page (trait methods such as `fmt` left out).

    python3 tests/docs/public_items.py [TARGET_DOC_DIR]
"""
import html
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "target" / "doc"
CRATES = ["botspace", "botspace_runtime"]
# Methods every type gets from blanket trait impls: not the crate's API.
BLANKET = {"borrow", "borrow_mut", "fmt", "from", "into", "try_from", "try_into", "type_id", "clone", "clone_into",
           "to_owned", "eq", "ne", "drop", "default", "vzip", "init", "deref", "deref_mut"}


def section(text: str) -> str:
    start = text.index("## Public items and who calls them")
    rest = text[start + 3:]
    end = rest.find("\n## ")
    return rest if end < 0 else rest[:end]


def named(text: str) -> tuple:
    """The identifiers inside backticks, split at `::`, `(`, `,` and
    spaces; and the modules named as `module::*`, whose constants the line
    covers together (a module of numbers has one caller line)."""
    words, globs = set(), set()
    for span in re.findall(r"`([^`\n]+)`", text):
        if span.endswith("::*"):
            globs.add(span[:-3])
        words.update(w for w in re.split(r"[^A-Za-z0-9_]+", span) if w)
    return words, globs


def covered(path: str, words: set, globs: set) -> bool:
    name = path.split("::")[-1]
    if name in words:
        return True
    module = "::".join(path.split("::")[:-1])
    return name.isupper() and module in globs


def public_items(crate: str) -> list:
    page = (DOC / crate / "all.html").read_text()
    return [html.unescape(p) for p in re.findall(r'<li><a href="[^"]+">([^<]+)</a></li>', page)]


def service_methods() -> list:
    page = (DOC / "botspace" / "struct.Service.html").read_text()
    # Inherent methods only: the trait impl blocks come after this anchor.
    inherent = page.split('id="trait-implementations"')[0]
    return sorted(set(re.findall(r'id="method\.([a-z_0-9]+)"', inherent)) - BLANKET)


# A method's doc says who calls it when it names one of these, or shows an example.
CALLER = re.compile(r"\b(host|hosts|hyper|C ABI|C server|WASM|wasm|runtime|tests?|servers?|faces?|worker|botspace_[a-z_]+)\b")


def undocumented_callers() -> list:
    """`Service` methods whose doc neither shows an example nor says which
    host calls them."""
    page = (DOC / "botspace" / "struct.Service.html").read_text().split('id="trait-implementations"')[0]
    parts = re.split(r'<section id="method\.([a-z_0-9]+)"', page)
    bad = []
    for name, body in zip(parts[1::2], parts[2::2]):
        m = re.search(r'<div class="docblock">(.*?)</div></details>', body, re.S)
        doc = m.group(1) if m else ""
        if "<pre" not in doc and not CALLER.search(html.unescape(re.sub(r"<[^>]+>", "", doc))):
            bad.append(f"botspace::Service::{name} (its doc shows no example and names no caller)")
    return bad


def main() -> int:
    words, globs = named(section((ROOT / "docs" / "architecture.md").read_text()))
    missing = []
    for crate in CRATES:
        missing += [f"{crate}::{p}" for p in public_items(crate) if not covered(p, words, globs)]
    missing += [f"botspace::Service::{m}" for m in service_methods() if m not in words]
    missing += undocumented_callers()
    if missing:
        print("docs/architecture.md, \"Public items and who calls them\", does not name:")
        for m in missing:
            print("  " + m)
        return 1
    count = sum(len(public_items(c)) for c in CRATES) + len(service_methods())
    print(f"public items: all {count} named in docs/architecture.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
