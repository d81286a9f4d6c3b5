#!/usr/bin/env bash
# Builds the npm package `botspace` into wasm/pkg/ from a clean checkout:
# installs what is missing (clang, the wasm32 target, the wasm-bindgen CLI of
# the exact version in Cargo.lock, Node.js, the npm dev tools), compiles the
# wasm crate with SQLite inside, runs wasm-bindgen and wasm-opt, and lays out
# the package (JS layer, TypeScript types, package.json with `exports`), and
# writes the module's size into docs/wasm.md.
#
#   scripts/build-wasm.sh              # build wasm/pkg
#   scripts/build-wasm.sh --pack       # also write target/npm/botspace-<version>.tgz (npm pack)
#   scripts/build-wasm.sh --test-panic # build target/wasm-pkg-test-panic: the same package
#                                      # plus `debugPanic` (cargo feature test-panic),
#                                      # for wasm/test/panic.test.mjs only
#
# Idempotent, and quick when everything is installed and up to date.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WASM="$ROOT/wasm"
PKG="$WASM/pkg"
TARGET=wasm32-unknown-unknown
PACK=0
FEATURES=""
for arg in "$@"; do
  case "$arg" in
    --pack) PACK=1 ;;
    --test-panic) FEATURES="test-panic" ;;
    *) echo "usage: $0 [--pack] [--test-panic]" >&2; exit 2 ;;
  esac
done

log() { printf '[build-wasm] %s\n' "$*" >&2; }

APT_UPDATED=0
apt_install() {
  if ! command -v apt-get >/dev/null; then
    log "missing $* and no apt-get: install it by hand"; exit 1
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if [ "$APT_UPDATED" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq >&2
    APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >&2
}

# --- tools -------------------------------------------------------------------

# clang compiles SQLite's C for wasm32 (gcc cannot).
command -v clang >/dev/null || { log "installing clang"; apt_install clang; }
if ! command -v llvm-ar >/dev/null && ! ls /usr/bin/llvm-ar-* >/dev/null 2>&1; then
  log "installing llvm (llvm-ar for wasm32 archives)"; apt_install llvm
fi
command -v cargo >/dev/null || { log "cargo is required (rustup.rs)"; exit 1; }
if command -v rustup >/dev/null; then
  if ! rustup target list --installed | grep -qx "$TARGET"; then
    log "adding rust target $TARGET"; rustup target add "$TARGET" >&2
  fi
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  log "installing nodejs and npm"; apt_install nodejs npm
fi
NODE_MAJOR="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$NODE_MAJOR" -lt 20 ]; then
  log "Node.js >= 20 is required (found $(node --version))"; exit 1
fi

# The wasm-bindgen CLI must be exactly the version of the crate in Cargo.lock.
WB_VERSION="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' "$ROOT/Cargo.lock")"
[ -n "$WB_VERSION" ] || { log "wasm-bindgen not found in Cargo.lock"; exit 1; }
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$WB_VERSION" ]; then
  log "installing wasm-bindgen-cli $WB_VERSION"
  # --locked first; if the registry index can no longer satisfy the CLI's
  # own lock file (a yanked dependency), resolve afresh.
  cargo install wasm-bindgen-cli --version "$WB_VERSION" --locked >&2 \
    || cargo install wasm-bindgen-cli --version "$WB_VERSION" >&2
fi

# npm dev tools (binaryen for wasm-opt), pinned by wasm/package-lock.json.
npm_ci() { # dir
  local dir="$1" stamp="$1/node_modules/.lock-stamp"
  local sum; sum="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$sum" ]; then
    log "npm ci in ${dir#"$ROOT"/}"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
    echo "$sum" > "$stamp"
  fi
}
npm_ci "$WASM"

# --- compile -----------------------------------------------------------------

log "cargo build --release --target $TARGET (Rust opt-level 2 + LTO, SQLite C -Oz)"
# Run from wasm/ so wasm/.cargo/config.toml applies (getrandom cfg, SQLite's
# flags, and CFLAGS -Oz: SQLite is most of the module and -O3 would bloat it
# by half). The Rust code is what runs hot: measured, opt-level "z" made
# requests about 2x slower for about 0.1 MB, "s" 15-35 % slower for 0.18 MB,
# while 2 instead of 3 saves 36 KB at the same speed (within noise). The
# profile is passed here because the root [profile.release] is shared with
# native builds.
(cd "$WASM" && cargo build --release --target "$TARGET" -p botspace-wasm --features "$FEATURES" \
  --config 'profile.release.opt-level=2' \
  --config 'profile.release.lto=true' \
  --config 'profile.release.codegen-units=1' \
  --config 'profile.release.panic="abort"' >&2)

TARGET_DIR="$(cd "$WASM" && cargo metadata --format-version 1 --no-deps | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).target_directory))')"
RAW="$TARGET_DIR/$TARGET/release/botspace_wasm.wasm"
# The test build goes under target/, never where the shipped package is.
[ -z "$FEATURES" ] || PKG="$TARGET_DIR/wasm-pkg-test-panic"
VERSION="$(cd "$WASM" && cargo metadata --format-version 1 --no-deps | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).packages.find(p=>p.name==="botspace").version))')"

# --- the size in the docs -----------------------------------------------------

# The shipped module's size, in MB of 10^6 bytes to two decimals, goes on the
# line after the marker in docs/wasm.md: the one place the docs give it.
# Rewritten only when it changed; scripts/test-wasm.sh fails then, so the
# new figure gets committed.
write_size() {
  [ -z "$FEATURES" ] || return 0
  local size gz
  size="$(stat -c %s "$PKG/botspace_bg.wasm")"
  gz="$(gzip -9c "$PKG/botspace_bg.wasm" | wc -c)"
  node -e '
    const fs = require("fs");
    const [doc, size, gz] = process.argv.slice(1);
    const mb = (n) => (Number(n) / 1e6).toFixed(2);
    const line = `\`botspace_bg.wasm\` is ${mb(size)} MB (${mb(gz)} MB gzipped).`;
    const lines = fs.readFileSync(doc, "utf8").split("\n");
    const at = lines.findIndex((l) => l.startsWith("<!-- wasm-size:"));
    if (at < 0) { console.error("no <!-- wasm-size: --> marker in " + doc); process.exit(1); }
    if (lines[at + 1] !== line) {
      lines[at + 1] = line;
      fs.writeFileSync(doc, lines.join("\n"));
      console.error("[build-wasm] docs/wasm.md: " + line);
    }
  ' "$ROOT/docs/wasm.md" "$size" "$gz"
}

# --- package -----------------------------------------------------------------

# Skip the slow steps (wasm-opt) when nothing that goes into the package changed.
INPUTS_SUM="$( { sha256sum "$RAW" "$WASM"/js/* "$ROOT"/LICENSE-* "$0"; echo "$VERSION $WB_VERSION $FEATURES"; } | sha256sum | cut -d' ' -f1)"
if [ -f "$PKG/.build-stamp" ] && [ "$(cat "$PKG/.build-stamp")" = "$INPUTS_SUM" ] && [ -f "$PKG/botspace_bg.wasm" ]; then
  log "wasm/pkg is up to date ($(stat -c %s "$PKG/botspace_bg.wasm") bytes)"
  write_size
  if [ "$PACK" -eq 1 ]; then
    mkdir -p "$TARGET_DIR/npm"
    (cd "$WASM" && npm pack ./pkg --pack-destination "$TARGET_DIR/npm" --loglevel=error >&2)
  fi
  echo "$PKG"
  exit 0
fi

STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
log "wasm-bindgen --target web"
# botspace.d.ts (the raw classes and the typescript_custom_section shapes of
# wasm/src/imp.rs) comes from wasm-bindgen; index.d.ts imports from it.
wasm-bindgen --target web --out-name botspace --out-dir "$STAGE" "$RAW"

WASM_OPT="$WASM/node_modules/.bin/wasm-opt"
if [ -x "$WASM_OPT" ]; then
  log "wasm-opt -Os"
  "$WASM_OPT" -Os --strip-debug --strip-producers \
    --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
    --enable-mutable-globals --enable-reference-types --enable-multivalue \
    "$STAGE/botspace_bg.wasm" -o "$STAGE/botspace_bg.opt.wasm"
  mv "$STAGE/botspace_bg.opt.wasm" "$STAGE/botspace_bg.wasm"
else
  log "wasm-opt not available: the module is not post-optimised"
fi

rm -rf "$PKG"
mkdir -p "$PKG"
cp "$STAGE/botspace.js" "$STAGE/botspace.d.ts" "$STAGE/botspace_bg.wasm" "$PKG/"
for f in core.js errors.js http.js slab.js storage.js webhook-node.js node.js web.js worker.js index.d.ts; do cp "$WASM/js/$f" "$PKG/"; done
cp "$WASM/js/README.md" "$PKG/README.md"
# The package is "MIT OR Apache-2.0" (package.json): both texts ship with it.
cp "$ROOT/LICENSE-MIT" "$ROOT/LICENSE-APACHE" "$PKG/"
node -e '
  const fs = require("fs");
  const [tmpl, out, version] = process.argv.slice(1);
  const p = JSON.parse(fs.readFileSync(tmpl, "utf8"));
  p.version = version;
  fs.writeFileSync(out, JSON.stringify(p, null, 2) + "\n");
' "$WASM/js/package.json" "$PKG/package.json" "$VERSION"

echo "$INPUTS_SUM" > "$PKG/.build-stamp"
SIZE="$(stat -c %s "$PKG/botspace_bg.wasm")"
GZ="$(gzip -9c "$PKG/botspace_bg.wasm" | wc -c)"
log "built ${PKG#"$ROOT"/}: botspace $VERSION, botspace_bg.wasm $SIZE bytes ($GZ gzipped)"
write_size
if [ "$PACK" -eq 1 ]; then
  mkdir -p "$TARGET_DIR/npm"
  (cd "$WASM" && npm pack ./pkg --pack-destination "$TARGET_DIR/npm" --loglevel=error >&2)
  log "packed $TARGET_DIR/npm/botspace-$VERSION.tgz"
fi
echo "$PKG"
