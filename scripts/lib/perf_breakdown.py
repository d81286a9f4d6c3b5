#!/usr/bin/env python3
"""Where a server's CPU went, by layer, from a `perf record` file.

    perf report -i perf.data --no-children --sort dso,sym --stdio -q | python3 scripts/lib/perf_breakdown.py

Reads perf's flat self-time list (one line per symbol) and sums it into the
layers one request crosses. Self time: code inlined into a caller counts
for the caller, so the layers are approximate at their edges; the
"top symbols" lines show what each figure is made of.
"""
import re
import sys

# (layer, pattern over "dso symbol"), first match wins. Kernel symbols are
# split into scheduling (a thread switched in or out: the cost of a
# hand-off) and everything else a syscall does (mostly the network stack).
LAYERS = [
    ("kernel: scheduling (sleeps, wake-ups, switches)", r"\[k\] (finish_task_switch|__schedule|schedule|try_to_wake_up|futex|_raw_spin_unlock_irqrestore|_raw_spin_unlock_irq|psi_|update_curr|dequeue|enqueue|select_task_rq|ttwu|pick_next|switch_mm|__switch_to)"),
    ("kernel: fsync and files", r"\[k\] .*(ext4|jbd2|blk_|bio|fdatasync|file_write|filemap|iomap|xfs|nvme|virtio_blk|folio)"),
    ("kernel: network and other syscalls", r"\[k\] "),
    ("hand-offs: threads, channels, wakers", r"(tokio::sync|oneshot|crossbeam|std::sync|parking_lot|Condvar|Mutex|futex|pthread_cond|pthread_mutex|__lll_lock|__lll_unlock|AtomicWaker|std::thread|botspace_runtime::workers|core_thread)"),
    ("async runtime (tokio)", r"tokio::"),
    ("the host's own code", r"(botspace_hyper::|botspace_runtime::|botspace_c::)"),
    ("HTTP: parse and framing", r"(\bhyper::|\bhttp::|httparse|botspace::http|botspace::connection|botspace::entry|body_len|frame_request|RequestFramer|libcurl|curl_|Curl_)"),
    ("JSON", r"(serde_json|serde::|itoa|ryu)"),
    ("commit and durability", r"(botspace::group|botspace::txn::Db|fdatasync|wal_sync|sqlite3WalFrames|sqlite3OsSync|unixSync|full_fsync)"),
    ("rules, methods, auth", r"(botspace::methods|botspace::rules|botspace::txn|botspace::auth|botspace::ratelimit|botspace::throttle|botspace::events|sha2::|botspace::model)"),
    ("store (botspace::store, rusqlite, postgres client)", r"(botspace::store|rusqlite|postgres|tokio_postgres)"),
    ("SQLite engine", r"(sqlite3|\bpager|btree|Btree|Vdbe|vdbe|sqlite|pcache|balance_nonroot|pthreadMutex|unixMutex)"),
    ("gateway and webhooks", r"(botspace::gateway|tungstenite|botspace::webhook|WebhookPump)"),
    ("service, routing, logging", r"(botspace::service|botspace::route|botspace::log|botspace::metrics|botspace::)"),
    ("allocation and copies", r"(malloc|_int_free|cfree|free\b|realloc|calloc|memmove|memcpy|memset|__rust_alloc|__rust_dealloc|alloc::)"),
    ("clock", r"(clock_gettime|vdso|Timespec|Instant)"),
    # The C server's own functions (what is left of its binary).
    ("the host's own code", r"^botspace-server "),
    ("libc: socket calls", r"^libc\S* .*(send|recv|epoll|accept|pthread_disable_asynccancel|pthread_enable_asynccancel|writev|readv|__libc_write|__libc_read)"),
]


def main() -> int:
    totals = {name: 0.0 for name, _ in LAYERS}
    totals["other"] = 0.0
    tops = {name: [] for name in totals}
    for line in sys.stdin:
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+(\[.\])\s+(.*)", line)
        if not m:
            continue
        pct, dso, kind, sym = float(m.group(1)), m.group(2), m.group(3), m.group(4).strip()
        text = f"{dso} {kind} {sym}"
        layer = next((name for name, pat in LAYERS if re.search(pat, text)), "other")
        totals[layer] += pct
        tops[layer].append((pct, sym))
    print("| layer | share of the server's CPU | largest symbols |")
    print("|---|---:|---|")
    for name, pct in sorted(totals.items(), key=lambda kv: -kv[1]):
        if pct < 0.5:
            continue
        top = ", ".join(f"`{s[:48]}` {p:.1f}" for p, s in sorted(tops[name], reverse=True)[:3])
        print(f"| {name} | {pct:.1f} % | {top} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
