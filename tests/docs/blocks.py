#!/usr/bin/env python3
"""Every code block of the docs below, compiled, run or checked, so the docs
cannot drift from the API. Run by scripts/test-docs.sh, after it built the
example server (target/release/examples/server) and the npm package (wasm/pkg).

A fenced block is taken by its language:

  rust        an example of a throwaway crate (target/docblocks/rust-<doc>)
              whose [dependencies] are the doc's own ```toml block, paths
              rewritten to this checkout; a block with `fn main` is a program
              and is run (in a temp dir, BOTSPACE_ADMIN_SECRET set, 60 s;
              `// → TEXT` in it is expected output, `…` matching anything);
              any other block is the body of `fn main() -> Result<(),
              Box<dyn std::error::Error>>`.
  c, cpp/c++  gcc -std=c11 / g++ -std=c++17, -Wall -Werror, against
              include/botspace.h (and bindings/cpp). A block with `main(` is a
              program: linked with target/release/libbotspace.a and run. Any
              other block is a fragment: its `#include` lines and the
              function definitions or prototypes that start at column 0 go to
              file scope, the rest becomes the body of a function; the names a
              fragment takes as given are declared by the doc's
              `<!-- fragments LANG: ... -->` comment, put before it.
  js/mjs/javascript
              run with node in target/docblocks/js, where `botspace` is
              wasm/pkg. A block with a top-level import/export is a module
              and is run as one (one that exports a default `fetch` is a
              worker: it must answer GET /healthz with 200); any other block
              is the body of an async function run after the doc's
              `<!-- fragments js: ... -->` code. `// → TEXT` is
              expected output, as for rust.
  sh/bash/console
              checked command by command (SHELL_CHECKS below): cargo targets,
              packages and features exist, flags after `--` are in the
              example server's --help, `make` dry-runs, scripts exist and
              take the flags given, files named exist. Blocks whose curl
              lines call http://127.0.0.1:8080 are run for real against the
              example server started with the flags of the doc's preceding
              `--example server` command (the demo's `export` line applied),
              and `# → TEXT` after a command is its expected output (`…` and
              `...` match anything); in a usage synopsis, indented lines of
              `[--flag ARG]` go on the command above. RUN_BLOCKS are run whole. Commands that
              can be neither are in SKIPPED, each with its reason.
  toml        parses; path dependencies name this workspace's crates,
              versioned ones are in Cargo.lock.
  json        each block, or each line of it, parses.
  ini         the server's config file: each `option = value` names a flag
              of the server's --help.
  text, nginx, output: not code, ignored.

A block opts out only with `<!-- not-compiled: REASON -->` on the line
before its fence; every opt-out is printed with its reason. A block in any
other language fails. Prints one line per block and ends with `# pass N`
and `# fail N` (node --test's summary, which scripts/test-all.sh counts).
"""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ["README.md", "docs/c-api.md", "docs/server.md", "docs/wasm.md"]
WORK = ROOT / "target" / "docblocks"
SERVER = ROOT / "target" / "release" / "examples" / "server"
IGNORED = {"text", "nginx", "output"}

# Shell commands that are neither run nor checkable here, each with why.
# Keyed by a regular expression matched against the start of the command.
SKIPPED = [
    (r"docker ", "needs Docker and an image this repository does not build"),
    (r"\./app\b", "the reader's own program (app.c): its build line is checked"),
    (r"\./example(-cpp)?\b", "a program built by the line before; RUN_BLOCKS runs the example's block"),
    (r"curl -s (-X POST )?http://127\.0\.0\.1:3000",
     "calls the axum example, a server of its own: hosts/hyper/tests/axum_example.rs runs it"),
    (r"sleep |kill ", "part of a multi-node run on PostgreSQL, which this runner does not start"),
    (r"export PKG_CONFIG_PATH", "sets a variable for the lines after it"),
]

# Shell blocks run whole (HOME is a temp dir; cargo and rustup keep theirs),
# keyed by (doc, first command), each with why it is safe and quick.
RUN_BLOCKS = {
    ("docs/c-api.md", 'make -C bindings/c install PREFIX="$HOME/.local"'):
        "installs into a temp HOME; the library is built once (warm: a no-op)",
}

results = []  # (status, doc, line, lang, detail)


def report(status, doc, line, lang, detail=""):
    results.append((status, doc, line, lang, detail))
    print(f"{status} {doc}:{line} ({lang}){' ' + detail if detail else ''}", flush=True)


# ---------------------------------------------------------------------------
# Extraction

class Block:
    def __init__(self, doc, line, lang, text, optout):
        self.doc, self.line, self.lang, self.text, self.optout = doc, line, lang, text, optout


def extract(doc):
    lines = (ROOT / doc).read_text().split("\n")
    blocks, preludes = [], {}
    text = "\n".join(lines)
    for m in re.finditer(r"<!-- fragments ([\w+]+): (.*?)-->", text, re.S):
        # The comment's first line says what it is; the code follows it.
        code = m.group(2).split("\n", 1)[1] if "\n" in m.group(2) else ""
        preludes[m.group(1)] = (text.count("\n", 0, m.start(2)) + 2, code)
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)```([\w+-]*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2).lower(), i
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        body = [ln[len(indent):] if ln.startswith(indent) else ln for ln in lines[i + 1:j]]
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        optout = None
        if k >= 0:
            o = re.match(r"^\s*<!-- not-compiled: (.+?) -->\s*$", lines[k])
            if o:
                optout = o.group(1)
        blocks.append(Block(doc, start + 1, lang, "\n".join(body) + "\n", optout))
        i = j + 1
    return blocks, preludes


def run(cmd, timeout=600, **kw):
    """subprocess.run capturing output as text; a timeout is a failure."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return subprocess.CompletedProcess(cmd, 124, out, f"timed out after {timeout} s")


def tail(p, n=25):
    text = (p.stdout or "") + (p.stderr or "")
    return "\n".join("    " + ln for ln in text.strip().split("\n")[-n:])


# ---------------------------------------------------------------------------
# The example server, for blocks that call it

class Server:
    def __init__(self, args, admin=None):
        self.dir = tempfile.mkdtemp(prefix="docblocks-server-")
        argv = [str(SERVER), *args, "--addr", "127.0.0.1:0", "--db", f"{self.dir}/botspace.db"]
        self.log = open(f"{self.dir}/out.log", "w+")
        try:
            self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        except OSError as e:
            self.log.close()
            raise RuntimeError(f"cannot start the example server: {e}") from e
        deadline = time.time() + 20
        self.out = ""
        while time.time() < deadline:
            self.out = Path(f"{self.dir}/out.log").read_text()
            if re.search(r"^botspace ready$", self.out, re.M) or self.proc.poll() is not None:
                break
            time.sleep(0.1)
        m = re.search(r"^botspace listening on (\S+)$", self.out, re.M)
        if not m or "botspace ready" not in self.out:
            self.stop()
            raise RuntimeError(f"the example server did not start: {' '.join(argv)}\n{self.out}")
        self.base = m.group(1)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------------------
# toml

def lock_packages():
    lock = tomllib.loads((ROOT / "Cargo.lock").read_text())
    return {(p["name"], p["version"]) for p in lock["package"]}


def workspace_crate(path):
    """A `path` dependency written as beside a checkout named botspace."""
    rel = Path(path)
    parts = rel.parts
    if len(parts) < 2 or parts[0] != ".." or parts[1] != "botspace":
        return None
    target = ROOT.joinpath(*parts[2:])
    manifest = target / "Cargo.toml"
    if not manifest.is_file():
        return None
    return target, tomllib.loads(manifest.read_text())["package"]["name"]


def check_toml(b):
    try:
        data = tomllib.loads(b.text)
    except tomllib.TOMLDecodeError as e:
        return f"does not parse: {e}"
    deps = data.get("dependencies")
    if deps is None:
        return None
    locked = lock_packages()
    for name, spec in deps.items():
        if isinstance(spec, dict) and "path" in spec:
            found = workspace_crate(spec["path"])
            if not found:
                return f"{name}: path {spec['path']} is no crate of this checkout (as ../botspace)"
            if found[1] != name:
                return f"{name}: {spec['path']} is the crate {found[1]}"
        else:
            version = spec if isinstance(spec, str) else spec.get("version")
            major = version.split(".")
            major = major[0] if major[0] != "0" else ".".join(major[:2])
            if not any(n == name and (v == major or v.startswith(major + ".")) for n, v in locked):
                return f"{name} {version}: not in Cargo.lock"
    return None


# ---------------------------------------------------------------------------
# rust

def rust_blocks(doc, blocks, tomls):
    rust = [b for b in blocks if b.lang == "rust"]
    if not rust:
        return
    deps = next((tomllib.loads(t.text).get("dependencies") for t in tomls if "[dependencies]" in t.text), None)
    if deps is None:
        for b in rust:
            report("FAIL", b.doc, b.line, "rust", "the doc has no ```toml [dependencies] block to build it with")
        return
    crate = WORK / ("rust-" + re.sub(r"\W", "-", doc))
    shutil.rmtree(crate / "examples", ignore_errors=True)
    (crate / "examples").mkdir(parents=True)
    (crate / "src").mkdir(exist_ok=True)
    (crate / "src" / "lib.rs").write_text("")
    lines = []
    for name, spec in deps.items():
        if isinstance(spec, dict) and "path" in spec:
            spec = dict(spec, path=str(workspace_crate(spec["path"])[0]))
        lines.append(f"{name} = {json.dumps(spec) if isinstance(spec, str) else toml_inline(spec)}")
    (crate / "Cargo.toml").write_text(
        '[package]\nname = "docblocks"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n'
        "[workspace]\n\n[dependencies]\n" + "\n".join(lines) + "\n")
    shutil.copy(ROOT / "Cargo.lock", crate / "Cargo.lock")
    for b in rust:
        if re.search(r"^fn main\(", b.text, re.M):
            src = b.text
        else:
            src = ("fn main() -> Result<(), Box<dyn std::error::Error>> {\n" + b.text + "    Ok(())\n}\n")
        (crate / "examples" / f"l{b.line}.rs").write_text(src)
    env = dict(os.environ, CARGO_TARGET_DIR=str(ROOT / "target"))
    build = run(["cargo", "build", "--offline", "--examples", "--manifest-path", str(crate / "Cargo.toml")],
                timeout=1200, env=env)
    for b in rust:
        errs = [m for m in re.findall(r"--> examples/l(\d+)\.rs", build.stderr) if int(m) == b.line]
        if build.returncode != 0 and (errs or "error" in build.stderr):
            report("FAIL", b.doc, b.line, "rust", "does not compile:\n" + tail(build, 40))
            continue
        if not re.search(r"^fn main\(", b.text, re.M):
            report("ok", b.doc, b.line, "rust", "compiled (a fragment)")
            continue
        with tempfile.TemporaryDirectory(prefix="docblocks-rust-") as tmp:
            p = run([str(ROOT / "target" / "debug" / "examples" / f"l{b.line}")], timeout=60, cwd=tmp,
                    env=dict(os.environ, BOTSPACE_ADMIN_SECRET="docs-admin-secret-0001"))
        wrong = [e for e in re.findall(r"// → (.*)$", b.text, re.M) if not expected_ok(p.stdout, e)]
        if p.returncode != 0:
            report("FAIL", b.doc, b.line, "rust", f"ran and exited {p.returncode}:\n" + tail(p))
        elif wrong:
            report("FAIL", b.doc, b.line, "rust", f"printed {p.stdout[:300]!r}, not {wrong[0]!r}")
        else:
            report("ok", b.doc, b.line, "rust", "compiled and ran")


def toml_inline(spec):
    parts = []
    for k, v in spec.items():
        parts.append(f"{k} = {json.dumps(v) if not isinstance(v, bool) else str(v).lower()}")
    return "{ " + ", ".join(parts) + " }"


# ---------------------------------------------------------------------------
# C and C++

C_HEADERS = ["errno.h", "stdatomic.h", "stdbool.h", "stdint.h", "stdio.h", "stdlib.h", "string.h",
             "sys/socket.h", "sys/types.h", "poll.h", "unistd.h"]
FUNC_START = re.compile(r"^(static\s+|extern\s+|inline\s+)*(const\s+|unsigned\s+|struct\s+)*[A-Za-z_]\w*[\s*&]+[A-Za-z_]\w*\(")


def split_fragment(text):
    """Top-level definitions and prototypes (from column 0) and #include
    lines go to file scope; the rest is the function body."""
    top, body = [], []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("#"):
            top.append(ln)
            body.append("")
            i += 1
            continue
        if FUNC_START.match(ln) and not ln.lstrip().startswith(("return", "else")):
            depth, seen, chunk = 0, False, []
            while i < len(lines):
                chunk.append(lines[i])
                depth += lines[i].count("{") - lines[i].count("}")
                seen = seen or "{" in lines[i]
                i += 1
                if (seen and depth == 0) or (not seen and chunk[-1].rstrip().endswith(";")):
                    break
            top.extend(chunk)
            body.extend([""] * len(chunk))
            continue
        body.append(ln)
        top.append("")
        i += 1
    return top, body


def c_blocks(blocks, preludes):
    for b in blocks:
        cpp = b.lang in ("cpp", "c++")
        tmp = WORK / "c"
        tmp.mkdir(parents=True, exist_ok=True)
        src = tmp / f"{Path(b.doc).stem}-l{b.line}.{'cpp' if cpp else 'c'}"
        whole = re.search(r"^\w[\w\s*]*\bmain\(", b.text, re.M)
        comp = (["g++", "-std=c++17"] if cpp else ["gcc", "-std=c11", "-D_POSIX_C_SOURCE=200809L"]) + [
            "-Wall", "-Werror", "-I", str(ROOT / "include"), "-I", str(ROOT / "bindings" / "cpp")]
        if whole:
            src.write_text(f'#line {b.line + 1} "{b.doc}"\n' + b.text)
            lib = ROOT / "target" / "release" / "libbotspace.a"
            if not lib.exists():
                p = run(["cargo", "build", "--release", "-p", "botspace-c"], timeout=1800, cwd=ROOT)
                if p.returncode != 0:
                    report("FAIL", b.doc, b.line, b.lang, "cannot build the C library:\n" + tail(p))
                    continue
            exe = src.with_suffix("")
            p = run(comp + [str(src), str(lib), "-lpthread", "-ldl", "-lm", "-o", str(exe)], timeout=300)
            if p.returncode != 0:
                report("FAIL", b.doc, b.line, b.lang, "does not compile:\n" + tail(p, 40))
                continue
            with tempfile.TemporaryDirectory() as cwd:
                p = run([str(exe)], timeout=60, cwd=cwd)
            report("ok" if p.returncode == 0 else "FAIL", b.doc, b.line, b.lang,
                   "compiled and ran" if p.returncode == 0 else f"exited {p.returncode}:\n" + tail(p))
            continue
        top, body = split_fragment(b.text)
        out = []
        if cpp:
            out.append('#include "botspace.hpp"')
        else:
            out += [f"#include <{h}>" for h in C_HEADERS] + ["#include <botspace.h>"]
        key = "cpp" if cpp else "c"
        if key in preludes:
            pline, ptext = preludes[key]
            out += [f'#line {pline} "{b.doc}"', ptext]
        out += [f'#line {b.line + 1} "{b.doc}"'] + top
        out += [f"void docblock_l{b.line}(void) {{", f'#line {b.line + 1} "{b.doc}"'] + body + ["}"]
        src.write_text("\n".join(out) + "\n")
        p = run(comp + ["-c", str(src), "-o", os.devnull], timeout=300)
        if p.returncode != 0:
            report("FAIL", b.doc, b.line, b.lang, "does not compile:\n" + tail(p, 40))
        else:
            report("ok", b.doc, b.line, b.lang, "compiled (a fragment)")


# ---------------------------------------------------------------------------
# JavaScript

def js_blocks(blocks, preludes):
    if not blocks:
        return
    pkg = ROOT / "wasm" / "pkg"
    d = WORK / "js"
    (d / "node_modules").mkdir(parents=True, exist_ok=True)
    (d / "package.json").write_text('{"name":"docblocks","private":true,"type":"module"}\n')
    link = d / "node_modules" / "botspace"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(pkg)
    if not (pkg / "package.json").exists():
        for b in blocks:
            report("FAIL", b.doc, b.line, b.lang, "no npm package in wasm/pkg (scripts/build-wasm.sh)")
        return
    for b in blocks:
        f = d / f"{Path(b.doc).stem}-l{b.line}.mjs"
        if re.search(r"^(import|export)\b", b.text, re.M):
            f.write_text(b.text)
            kind = "module"
            entry = f
            if re.search(r"^export default\b", b.text, re.M) and "fetch" in b.text:
                kind = "worker"
                entry = d / f"{f.stem}-harness.mjs"
                entry.write_text(
                    f"import worker from './{f.name}';\n"
                    "const r = await worker.fetch(new Request('http://localhost/healthz'));\n"
                    "if (r.status !== 200) throw new Error(`GET /healthz: ${r.status} ${await r.text()}`);\n")
        else:
            prelude = preludes.get("js", (0, ""))[1]
            f.write_text(prelude + "\nawait (async () => {\n" + b.text + "})();\n")
            kind = "fragment"
            entry = f
        p = run(["node", str(entry)], timeout=60, cwd=d)
        wrong = [e for e in re.findall(r"// → (.*)$", b.text, re.M) if not expected_ok(p.stdout, e)]
        if p.returncode != 0:
            report("FAIL", b.doc, b.line, b.lang, f"{kind} exited {p.returncode}:\n" + tail(p))
        elif wrong:
            report("FAIL", b.doc, b.line, b.lang, f"printed {p.stdout[:300]!r}, not {wrong[0]!r}")
        else:
            report("ok", b.doc, b.line, b.lang, f"ran ({kind})")


# ---------------------------------------------------------------------------
# Shell

def logical_lines(text):
    """(command text, [expected output lines]) per command line: `\\`
    continuations and open quotes joined; `# → ...` after a command is its
    expected output; other comments dropped."""
    out, cur, joint = [], "", "\n"
    for ln in text.split("\n"):
        s = ln.strip()
        if not cur and s.startswith("#"):
            m = re.match(r"#\s*→\s?(.*)$", s)
            if m and out:
                out[-1][1].append(m.group(1))
            continue
        if not cur and not s:
            continue
        if not cur and out and re.match(r"^\s+\[", ln) and "[--" in out[-1][0]:
            # An indented line of a usage synopsis ([--flag ARG]...) goes on
            # the command above it.
            out[-1] = (out[-1][0] + " " + s, out[-1][1])
            continue
        cur = f"{cur}{joint}{ln}" if cur else ln
        joint = "\n"
        if cur.rstrip().endswith("\\"):
            cur, joint = cur.rstrip()[:-1].rstrip(), " "
            continue
        try:
            shlex.split(cur, comments=True)
        except ValueError:
            continue  # an open quote: the command goes on
        out.append((cur, []))
        cur = ""
    if cur:
        out.append((cur, []))
    return out


def commands(line):
    """The simple commands of a command line: split at && || ; | ( ),
    $( ... ) dropped, leading VAR=value assignments kept apart."""
    if "[--" in line:  # a usage synopsis: [--flag ARG | --other]...
        line = re.sub(r"\[|\]|\.\.\.|\|", " ", line)
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = "#"
    toks = list(lex)
    cmds, cur, depth = [], [], 0
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.endswith("$") and i + 1 < len(toks) and toks[i + 1] == "(":
            if t != "$":
                cur.append(t[:-1])
            depth = 1
            i += 2
            while i < len(toks) and depth:
                depth += toks[i].count("(") - toks[i].count(")")
                i += 1
            continue
        if t in ("&&", "||", ";", "|", "(", ")", "&", ";;"):
            if cur:
                cmds.append(cur)
            cur = []
        else:
            cur.append(t)
        i += 1
    if cur:
        cmds.append(cur)
    return cmds


class ShellContext:
    def __init__(self):
        self.meta = json.loads(run(["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
                                   cwd=ROOT).stdout)
        self.packages = {p["name"]: p for p in self.meta["packages"]}
        h = run([str(SERVER), "--help"], timeout=30) if SERVER.exists() else None
        self.server_help = h.stdout + h.stderr if h and h.returncode == 0 else None


def check_flags(flags, help_text, what):
    for f in flags:
        name = f.split("=", 1)[0]
        if not re.search(re.escape(name) + r"(?![\w-])", help_text):
            return f"{what} does not take {name}"
    return None


def check_command(ctx, argv):
    """None when the command is checked and fine; else (status, why)."""
    env = dict(os.environ)
    while argv and re.match(r"^[A-Za-z_]\w*=", argv[0]):
        k, v = argv[0].split("=", 1)
        env[k] = os.path.expandvars(v)
        argv = argv[1:]
    argv = [os.path.expandvars(a) for a in argv]
    if not argv:
        return None
    line = " ".join(argv)
    for pat, why in SKIPPED:
        if re.match(pat, line):
            return ("skip", why)
    cmd, args = argv[0], argv[1:]
    if cmd == "cargo":
        sub = args[0] if args else ""
        if sub not in ("build", "run", "test", "bench", "doc"):
            return ("FAIL", f"cargo {sub}: no check for it")
        rest = args[1:]
        after = rest[rest.index("--") + 1:] if "--" in rest else []
        rest = rest[:rest.index("--")] if "--" in rest else rest
        pkg = "botspace"
        if "-p" in rest:
            pkg = rest[rest.index("-p") + 1]
        if pkg not in ctx.packages:
            return ("FAIL", f"no package {pkg}")
        p = ctx.packages[pkg]
        for opt, kind in (("--example", "example"), ("--test", "test"), ("--bench", "bench")):
            for k, v in enumerate(rest):
                if v == opt:
                    name = rest[k + 1]
                    if not any(t["name"] == name and kind in t["kind"] for t in p["targets"]):
                        return ("FAIL", f"{pkg} has no {kind} {name}")
        if "--features" in rest:
            for feat in rest[rest.index("--features") + 1].split(","):
                if feat not in p["features"]:
                    return ("FAIL", f"{pkg} has no feature {feat}")
        flags = [a for a in after if a.startswith("--")]
        if flags and "--example" in rest:
            ex = rest[rest.index("--example") + 1]
            if pkg == "botspace" and ex == "server":
                return server_flags(ctx, flags)
            src = next(t["src_path"] for t in p["targets"] if t["name"] == ex)
            why = check_flags(flags, Path(src).read_text(), f"the example {ex}")
            return ("FAIL", why) if why else None
        return None
    if cmd in ("botspace-server", "target/release/examples/server", "examples/c-server/build/botspace-server"):
        return server_flags(ctx, [a for a in args if a.startswith("--")])
    if cmd == "make":
        dry = run(["make", "-n", *args], cwd=ROOT, timeout=60, env=env)
        return ("FAIL", "make -n fails:\n" + tail(dry)) if dry.returncode != 0 else None
    if re.match(r"^(\./)?scripts/", cmd):
        script = ROOT / cmd
        if not (script.is_file() and os.access(script, os.X_OK)):
            return ("FAIL", f"{cmd}: no such executable script")
        why = check_flags([a for a in args if a.startswith("--")], script.read_text(), cmd)
        if why:
            return ("FAIL", why)
        if args and args[0] in ("bash", "sh") and "-c" in args:
            return ("inner", args[args.index("-c") + 1])
        return None
    if cmd == "node":
        f = ROOT / args[0]
        return None if f.is_file() else ("FAIL", f"node {args[0]}: no such file")
    if cmd in ("cc", "c++", "gcc", "g++"):
        missing = [a for a in args if re.search(r"\.(c|cpp)$", a) and not (ROOT / a).is_file() and a != "app.c"]
        if missing:
            return ("FAIL", f"no file {missing[0]}")
        return None if shutil.which(cmd) else ("FAIL", f"{cmd} is not installed")
    if cmd in ("cd",):
        return None if (ROOT / args[0]).is_dir() else ("FAIL", f"no directory {args[0]}")
    if cmd == "npm" and args[:1] in (["install"], ["ci"], ["start"]):
        return None
    if cmd in ("export", "pkg-config"):
        return None
    return ("FAIL", f"no check for `{cmd}`: add one to blocks.py or a SKIPPED entry with its reason")


def server_flags(ctx, flags):
    if ctx.server_help is None:
        return ("FAIL", f"{SERVER} --help failed (build it: cargo build --release --example server)")
    why = check_flags(flags, ctx.server_help, "the example server")
    return ("FAIL", why) if why else None


def check_shell_text(ctx, text, skipped):
    for line, _expected in logical_lines(text):
        for argv in commands(line):
            r = check_command(ctx, argv)
            if r is None:
                continue
            if r[0] == "inner":
                why = check_shell_text(ctx, r[1], skipped)
                if why:
                    return why
            elif r[0] == "skip":
                skipped.append(f"`{' '.join(argv)[:60]}`: {r[1]}")
            else:
                return f"`{' '.join(argv)[:80]}`: {r[1]}"
    return None


def expected_ok(out, expected):
    """`…`/`...` in an expected line match anything (the spaces around
    them too)."""
    pat = ".*".join(re.escape(p.strip()) for p in re.split(r"…|\.\.\.", expected.strip()))
    return re.search(pat, out, re.S) is not None


def run_tour(doc, blocks_run, start_flags):
    """Runs blocks whose curl lines call 127.0.0.1:8080 against a server
    started with `start_flags`, its demo `export` line applied."""
    try:
        server = Server(start_flags)
    except RuntimeError as e:
        for b in blocks_run:
            report("FAIL", b.doc, b.line, b.lang, str(e))
        return
    env = dict(os.environ)
    m = re.search(r"^export (.*)$", server.out, re.M)
    if m:
        for kv in shlex.split(m.group(1)):
            k, v = kv.split("=", 1)
            env[k] = v
    try:
        for b in blocks_run:
            failure = None
            n = 0
            for line, expected in logical_lines(b.text):
                line = line.replace("http://127.0.0.1:8080", server.base)
                p = run(["bash", "-c", "set -e\n" + line], timeout=60, env=env)
                n += 1
                if p.returncode != 0:
                    failure = f"`{line.strip()[:80]}` exited {p.returncode}:\n" + tail(p)
                    break
                if line.startswith("export "):
                    for kv in shlex.split(line[len("export "):]):
                        k, v = kv.split("=", 1)
                        env[k] = os.path.expandvars(v)
                    continue
                if "curl" in line:
                    for e in expected:
                        if not expected_ok(p.stdout, e):
                            failure = f"`{line.strip()[:80]}` printed {p.stdout[:300]!r}, not {e!r}"
                    if not expected and not re.match(r'^\{"ok":true', p.stdout):
                        failure = f"`{line.strip()[:80]}` printed {p.stdout[:300]!r}"
                if failure:
                    break
            report("FAIL" if failure else "ok", b.doc, b.line, b.lang,
                   failure or f"ran {n} commands against the server started with {' '.join(start_flags)}")
    finally:
        server.stop()


def shell_blocks(doc, blocks):
    if not blocks:
        return
    ctx = ShellContext()
    tour, start_flags = [], None
    for b in blocks:
        first = logical_lines(b.text)[0][0] if logical_lines(b.text) else ""
        for line, _ in logical_lines(b.text):
            if re.search(r"--example server -- ", line) and "cargo run" in line:
                start_flags = shlex.split(line.split(" -- ", 1)[1], comments=True)
        if "http://127.0.0.1:8080" in b.text and "curl" in b.text:
            if start_flags is None:
                report("FAIL", b.doc, b.line, b.lang, "calls the server, but the doc starts none before it")
            else:
                tour.append(b)
            continue
        key = (doc, re.sub(r"\s+#.*$", "", first.strip()))
        skipped = []
        why = check_shell_text(ctx, b.text, skipped)
        if why:
            report("FAIL", b.doc, b.line, b.lang, why)
            continue
        if key in RUN_BLOCKS:
            why = run_block(b)
            report("FAIL" if why else "ok", b.doc, b.line, b.lang,
                   why or f"checked, then ran ({RUN_BLOCKS[key]})")
        else:
            report("ok", b.doc, b.line, b.lang, "commands checked")
            for s in skipped:
                print(f"    skipped {s}")
    if tour:
        run_tour(doc, tour, start_flags)


def untracked():
    out = run(["git", "ls-files", "--others", "--exclude-standard", "-z"], cwd=ROOT).stdout
    return {f for f in out.split("\0") if f}


def run_block(b):
    """Runs a block as a reader would, from the checkout, with HOME a temp
    dir (cargo and rustup keep theirs); untracked files it leaves in the
    checkout (its programs) are removed after."""
    home = tempfile.mkdtemp(prefix="docblocks-home-")
    env = dict(os.environ, HOME=home,
               CARGO_HOME=os.environ.get("CARGO_HOME", str(Path.home() / ".cargo")),
               RUSTUP_HOME=os.environ.get("RUSTUP_HOME", str(Path.home() / ".rustup")))
    before = untracked()
    try:
        script = "set -euo pipefail\n" + "".join(line + "\n" for line, _ in logical_lines(b.text))
        p = run(["bash", "-c", script], cwd=ROOT, timeout=1800, env=env)
        if p.returncode != 0:
            return f"exited {p.returncode}:\n" + tail(p)
        for _line, expected in logical_lines(b.text):
            for e in expected:
                if not expected_ok(p.stdout, e):
                    return f"printed {p.stdout[-400:]!r}, not {e!r}"
        return None
    finally:
        for f in untracked() - before:
            (ROOT / f).unlink(missing_ok=True)
        shutil.rmtree(home, ignore_errors=True)


# ---------------------------------------------------------------------------

def main():
    # --only c,js: those languages alone (for working on a doc).
    only = None
    if len(sys.argv) > 2 and sys.argv[1] == "--only":
        only = set(sys.argv[2].split(","))
    WORK.mkdir(parents=True, exist_ok=True)
    for doc in DOCS:
        blocks, preludes = extract(doc)
        todo = []
        for b in blocks:
            if b.optout:
                report("opt-out", b.doc, b.line, b.lang, b.optout)
            elif b.lang in IGNORED:
                continue
            elif only is None or b.lang in only:
                todo.append(b)
        by = lambda *langs: [b for b in todo if b.lang in langs]  # noqa: E731
        for b in by("toml"):
            why = check_toml(b)
            report("FAIL" if why else "ok", b.doc, b.line, "toml", why or "parses; dependencies exist")
        for b in by("json"):
            try:
                json.loads(b.text)
                report("ok", b.doc, b.line, "json", "parses")
            except ValueError:
                try:
                    [json.loads(ln) for ln in b.text.strip().split("\n")]
                    report("ok", b.doc, b.line, "json", "parses (a line each)")
                except ValueError as e:
                    report("FAIL", b.doc, b.line, "json", f"does not parse: {e}")
        for b in by("ini"):
            help_text = run([str(SERVER), "--help"]).stdout
            bad = [ln.split("=")[0].strip() for ln in b.text.split("\n")
                   if "=" in ln and not ln.lstrip().startswith("#")
                   and not re.search(r"--" + re.escape(ln.split("=")[0].strip()) + r"(?![\w-])", help_text)]
            report("FAIL" if bad else "ok", b.doc, b.line, "ini",
                   f"the server has no option {bad[0]}" if bad else "options exist")
        rust_blocks(doc, todo, by("toml"))
        c_blocks(by("c", "cpp", "c++"), preludes)
        js_blocks(by("js", "mjs", "javascript"), preludes)
        shell_blocks(doc, by("sh", "bash", "console"))
        known = {"toml", "json", "ini", "rust", "c", "cpp", "c++", "js", "mjs", "javascript", "sh", "bash", "console"}
        for b in todo:
            if b.lang not in known:
                report("FAIL", b.doc, b.line, b.lang or "none",
                       "a block in a language this runner does not take: mark it text, or opt it out")
    passed = sum(1 for r in results if r[0] == "ok")
    failed = sum(1 for r in results if r[0] == "FAIL")
    optout = sum(1 for r in results if r[0] == "opt-out")
    if failed:
        print("\nfailed:")
        for r in results:
            if r[0] == "FAIL":
                print(f"  {r[1]}:{r[2]} ({r[3]})")
    print(f"# docs blocks: {passed} ok, {failed} failed, {optout} opted out")
    print(f"# pass {passed}")
    print(f"# fail {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
