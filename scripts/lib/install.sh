# What the test and bench scripts need on a fresh Debian machine, installed
# only when missing, every tool at an exact version. Source it:
#
#   source scripts/lib/install.sh
#   need_cmd cc:gcc c++:g++ make valgrind    # commands, from the Debian package named after ':'
#   need_apt postgresql                      # Debian packages, by name
#   need_rustup_component rustfmt clippy
#   need_rustup_target wasm32-unknown-unknown
#   need_cargo_tool cbindgen 0.29.4          # cargo install --locked --version, unless that version is installed
#   need_pip schemathesis==4.32.5 PyYAML==6.0.3          # pip, exact versions
#
# Each one fails (returns non-zero, with a message on stderr) when it cannot
# install; apt-get update runs at most once per script.
# shellcheck shell=bash

_install_log() { printf '[install] %s\n' "$*" >&2; }

_sudo() {
  if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi
}

_APT_UPDATED=0
# need_apt PKG...: installs the Debian packages that are not installed.
need_apt() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  _install_log "apt-get install ${missing[*]}"
  if [[ $_APT_UPDATED -eq 0 ]]; then
    _sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || true
    _APT_UPDATED=1
  fi
  _sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null ||
    { _install_log "cannot install ${missing[*]}"; return 1; }
}

# need_cmd CMD[:PKG]...: installs PKG (default: CMD) for each command not on PATH.
need_cmd() {
  local pkgs=() spec
  for spec in "$@"; do
    command -v "${spec%%:*}" >/dev/null 2>&1 || pkgs+=("${spec#*:}")
  done
  [[ ${#pkgs[@]} -eq 0 ]] || need_apt "${pkgs[@]}"
}

# need_rustup_component NAME...: rustup components of the active toolchain.
need_rustup_component() {
  local c
  for c in "$@"; do
    rustup component list --installed 2>/dev/null | grep -q "^$c" && continue
    _install_log "rustup component add $c"
    rustup component add "$c" >&2 || { _install_log "cannot add the rustup component $c"; return 1; }
  done
}

# need_rustup_target TARGET...: rustup targets of the active toolchain.
need_rustup_target() {
  local t
  for t in "$@"; do
    rustup target list --installed 2>/dev/null | grep -qx "$t" && continue
    _install_log "rustup target add $t"
    rustup target add "$t" >&2 || { _install_log "cannot add the rustup target $t"; return 1; }
  done
}

# need_cargo_tool CRATE VERSION: `cargo install CRATE --version VERSION
# --locked` unless exactly that version is installed by cargo.
need_cargo_tool() {
  local crate=$1 version=$2
  export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
  cargo install --list 2>/dev/null | grep -qx "$crate v$version:" && return 0
  _install_log "cargo install $crate $version"
  cargo install "$crate" --version "=$version" --locked --quiet ||
    { _install_log "cannot install $crate $version"; return 1; }
}

# need_pip PKG==VERSION...: pip installs the packages whose installed
# version (the distribution's own metadata) is not exactly VERSION.
need_pip() {
  local want=() req have
  for req in "$@"; do
    have=$(python3 -c 'import importlib.metadata as m, sys
try: print(m.version(sys.argv[1]))
except m.PackageNotFoundError: pass' "${req%%==*}" 2>/dev/null)
    [[ "$have" == "${req#*==}" ]] || want+=("$req")
  done
  [[ ${#want[@]} -eq 0 ]] && return 0
  _install_log "pip install ${want[*]}"
  python3 -m pip install -q "${want[@]}" >&2 || { _install_log "cannot pip install ${want[*]}"; return 1; }
}
