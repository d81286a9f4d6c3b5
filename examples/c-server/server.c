/*
 * botspace-server: botspace over real TCP, in C (C11 + POSIX, and Linux's epoll).
 *
 *   botspace-server [--addr HOST:PORT] [--admin-addr HOST:PORT] [--db PATH]
 *                   [--admin-secret S | --admin-secret-file PATH] [--operational-key HEX64]
 *                   [--max-connections N] [--request-timeout SECS]
 *                   [--gateway-poll-interval-ms MS] [--database-timeout-ms MS] [--manual-clock]
 *                   [--demo-token]
 *
 * One thread, one epoll loop, non-blocking sockets. Each HTTP connection
 * is driven by the library's connection (botspace_http_connection): it
 * owns the connection's buffers and rules (framing, keep-alive and
 * pipelining in order, 100 Continue, the Connection header, refusals and
 * their lingering close, the request and idle deadlines, half close, the
 * budget of unsent answers); this server only moves its bytes, keeps the
 * sockets and the clock, and answers the requests it gives. After each
 * epoll_wait, the library's round (botspace_http_round_serve) answers every
 * complete request buffered on any connection with one group commit: one
 * transaction and one fsync for all the connections that are waiting, each
 * connection's answers in its own order. Partial reads and writes are buffered
 * per connection. GET /bot/gateway upgrades a connection to the bot
 * gateway: the connection then owns the library's gateway link
 * (botspace_gateway_link: the session, the output the socket has not taken,
 * and the rules of its end), fed what the socket delivers and polled when
 * its bot has new events (the wake-up callback writes to a self-pipe) or
 * when its deadline passes. On a PostgreSQL database a second thread
 * waits for other servers' commits (botspace_service_wait_store_notifications)
 * and wakes the loop through the same callback.
 *
 * It behaves like the Rust example server (examples/server.rs): the same
 * flags, the same first line `botspace listening on http://HOST:PORT`, the
 * same demo lines (the library's botspace_service_demo_start, so both print
 * what one policy decides), `botspace ready` at the end of the
 * start-up output, and a clean stop on SIGINT/SIGTERM. Hostile clients are
 * bounded the same way (docs/reliability.md): a connection cap where the
 * connection waiting longest for a request (or with a parked poll) makes room, a deadline for each
 * request, an idle timeout, accept errors logged at most once a second,
 * gateway readers that stay behind for two heartbeat intervals closed with
 * 4008 `slow_consumer`, and no further request taken from a client that
 * leaves the library's budget of answers unread (the library's connection
 * stops giving and reading requests).
 */
#define _GNU_SOURCE /* epoll, EPOLLRDHUP */

#include "botspace.h"

#include <curl/curl.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* The policy (timeouts, lingering, the batch size, the slow consumer's
 * drop, the default connection cap, how much is read at once and per turn,
 * the spare webhook transfers) is the library's, the same as the Rust
 * server's: botspace_host_policy_default. An HTTP connection's bounds are
 * its library connection's (botspace_http_connection), a gateway's its
 * library link's (botspace_gateway_link). */
static botspace_host_policy policy;

/* ------------------------------------------------------------------------ */
/* Small utilities */

static void die_oom(void) {
    fputs("out of memory\n", stderr);
    exit(1);
}

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) die_oom();
    return q;
}

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Operator lines. Which are printed, on which stream and as which bytes
 * (the text, or the JSON line of --log-format json) is the library's
 * (botspace_output_*, the Rust server's rule too); this writes them. Every
 * line is flushed (the test harness reads through a pipe). */
enum { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2 };
static botspace_output output = {LOG_INFO, false}; /* --log-format, the level (botspace_output_from_env) */

/* The wall clock of a JSON line's `ts`. */
static uint64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void write_to(botspace_stream stream, const uint8_t *bytes, size_t len) {
    FILE *to = stream == BOTSPACE_STREAM_STDERR ? stderr : stdout;
    fwrite(bytes, 1, len, to);
    fflush(to);
}

/* Writes a line the library rendered ({NULL, 0}: none) and frees it. */
static void write_line(botspace_stream stream, botspace_bytes *line) {
    if (line->len > 0) write_to(stream, line->ptr, line->len);
    botspace_bytes_free(line);
}

/* One operator line at `level`. Never pass a secret, a bot token or
 * message text. */
static void log_at(int level, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    botspace_stream stream;
    botspace_bytes line = {NULL, 0};
    if (botspace_output_log(&output, level, msg, strlen(msg), wall_ms(), &stream, &line) == BOTSPACE_STATUS_OK)
        write_line(stream, &line);
}

/* One of the library's lines about the server's life
 * (BOTSPACE_SERVER_LINE_READY, _STOPPING, _STOPPED), the Rust server's too. */
static void say_server_line(uint32_t which) {
    botspace_stream stream;
    botspace_bytes line = {NULL, 0};
    if (botspace_output_server_line(&output, which, 0, wall_ms(), &stream, &line) == BOTSPACE_STATUS_OK)
        write_line(stream, &line);
}

/* The library's own operator lines (evictions, 408s, slow-consumer closes,
 * token rotations) and its log records (a database that went away, a
 * migration's leftovers), rendered and filtered by the same rule. */
static void on_library_line(void *ud, botspace_stream stream, const uint8_t *line, size_t len) {
    (void)ud;
    write_to(stream, line, len);
}

static void set_nonblocking(int fd) {
    int fl = fcntl(fd, F_GETFL, 0);
    if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    int fdfl = fcntl(fd, F_GETFD, 0);
    if (fdfl >= 0) fcntl(fd, F_SETFD, fdfl | FD_CLOEXEC);
}

/* ------------------------------------------------------------------------ */
/* Wake-ups: the callback runs on whichever thread committed a change (here
 * the loop thread, inside handle_request) or heard of another server's
 * (the notification thread), records the bot id and writes one byte to the
 * self-pipe so a sleeping epoll_wait returns. */

static int wake_pipe[2] = {-1, -1};
static pthread_mutex_t wake_mu = PTHREAD_MUTEX_INITIALIZER;
static char **wake_ids;
static size_t wake_n, wake_cap;

static void on_wake(void *user_data, const char *bot_id, size_t bot_id_len) {
    (void)user_data;
    pthread_mutex_lock(&wake_mu);
    int seen = 0;
    for (size_t i = 0; i < wake_n; i++) {
        if (strlen(wake_ids[i]) == bot_id_len && memcmp(wake_ids[i], bot_id, bot_id_len) == 0) {
            seen = 1;
            break;
        }
    }
    if (!seen) {
        if (wake_n == wake_cap) {
            wake_cap = wake_cap ? wake_cap * 2 : 16;
            wake_ids = xrealloc(wake_ids, wake_cap * sizeof *wake_ids);
        }
        char *id = malloc(bot_id_len + 1);
        if (!id) die_oom();
        memcpy(id, bot_id, bot_id_len + 1);
        wake_ids[wake_n++] = id;
    }
    pthread_mutex_unlock(&wake_mu);
    char one = 1;
    /* Non-blocking: a full pipe already guarantees a wake-up. */
    ssize_t w = write(wake_pipe[1], &one, 1);
    (void)w;
}

/* Takes the pending bot ids (caller frees them and the array). */
static char **take_wakes(size_t *n) {
    pthread_mutex_lock(&wake_mu);
    char **ids = wake_ids;
    *n = wake_n;
    wake_ids = NULL;
    wake_n = wake_cap = 0;
    pthread_mutex_unlock(&wake_mu);
    return ids;
}

/* ------------------------------------------------------------------------ */
/* Other servers' commits: on PostgreSQL a thread of its own blocks in
 * botspace_service_run_store_notifications (never holding anything the
 * loop needs); each notification reaches the loop through on_wake. */

static botspace_service *svc; /* the one service, shared with the notification thread */
static pthread_t notify_thread;
static int notify_running;
static atomic_int notify_stop;

static bool notify_should_stop(void *user_data) {
    (void)user_data;
    return atomic_load(&notify_stop);
}

/* The library's loop: its waits, its retry after a broken listening
 * connection and what it says about it; this thread only runs it. */
static void *notify_loop(void *arg) {
    (void)arg;
    botspace_service_run_store_notifications(svc, notify_should_stop, NULL);
    return NULL;
}

static void start_notify_loop(void) {
    bool available = false;
    if (botspace_service_has_store_notifications(svc, &available) != BOTSPACE_STATUS_OK || !available) return;
    if (pthread_create(&notify_thread, NULL, notify_loop, NULL) != 0) {
        log_at(LOG_WARN, "cannot start the notification thread (gateways fall back to polling)");
        return;
    }
    notify_running = 1;
}

/* Before the service is freed: no call may be under way then. */
static void stop_notify_loop(void) {
    if (!notify_running) return;
    atomic_store(&notify_stop, 1);
    pthread_join(notify_thread, NULL);
    notify_running = 0;
}

/* ------------------------------------------------------------------------ */
/* Signals: the handler sets a flag and writes to the self-pipe (both
 * async-signal-safe). */

static volatile sig_atomic_t stop_requested = 0;

static void on_signal(int sig) {
    (void)sig;
    int saved = errno;
    stop_requested = 1;
    char one = 1;
    ssize_t w = write(wake_pipe[1], &one, 1);
    (void)w;
    errno = saved;
}

/* ------------------------------------------------------------------------ */
/* Connections */

enum conn_state {
    ST_HTTP,   /* the library's HTTP connection (`http`) decides */
    ST_GATEWAY /* upgraded: the library's gateway link (`link`) decides */
};

typedef struct conn {
    int fd;
    botspace_listener role; /* which paths its listener serves */
    enum conn_state st;
    /* ST_HTTP: the library's connection. It owns the input, the answers
     * not yet sent and every rule of the connection (framing, order,
     * budget, 100 Continue, Connection header, refusals, deadlines); this
     * server moves its bytes and answers the requests it gives. */
    botspace_http_connection *http;
    int shut_wr; /* the library's connection or link lingers: write side shut */
    /* ST_GATEWAY: the library's link. It owns the session, the output the
     * socket has not taken and every rule of its end (a close the server
     * decides goes right after the frame being written, the last writes,
     * the lingering close); this server moves its bytes. */
    botspace_gateway_link *link;
    const char *bot_id; /* owned by link */
    int peer_eof; /* the peer closed its side */
    int write_blocked; /* the last send said EAGAIN: written again when epoll says so */
    /* HTTP batching (serve_http_round): */
    int fresh;    /* bytes arrived this turn: served ahead of the backlog */
    char peer[64];          /* the client's address, for the admin throttle */
    size_t peer_len;
    /* Long polling: the library parked this connection's getUpdates (its
     * answer comes from botspace_service_poll_parked); 0 when none. */
    uint64_t parked;
    /* A busy refusal (the admission's REFUSE_LINGERING): not in nlive;
     * the admission counts it until it closes. */
    int refusal;
    /* Since when the library's connection waits for a request, as the
     * admission's eviction order has it (order_sync);
     * BOTSPACE_NO_DEADLINE: not in the order. */
    uint64_t waiting_since;
    /* epoll: the events registered for fd (`watched`: registered at all). */
    uint32_t events;
    int watched;
    size_t idx;  /* in conns */
    int dirty;   /* in the turn's list of connections to settle */
} conn_t;

static conn_t **conns;
static size_t nconns, conns_cap;
static size_t nlive; /* connections with an open socket: what --max-connections counts */

/* The one epoll instance: connections (data.ptr: their conn_t), and the
 * wake pipe, listeners and curl's sockets (data.u64: a tag, below). */
static int epfd = -1;
enum { TAG_WAKE = 1, TAG_LISTENER = 2, TAG_ADMIN_LISTENER = 3, TAG_CURL = 4, TAG_HOOK = 5 };
#define TAG_OF(kind, fd) (((uint64_t)(uint32_t)(fd) << 3) | (uint64_t)(kind)) /* conn_t pointers end in 0 bits */

/* The connections something happened to this turn (an event, an accept,
 * an answer, a wake-up): only these are settled, watched anew and given
 * to the round; the others wait in epoll and their deadlines, the
 * earliest of which (`next_due`) brings a pass over all of them. So a
 * turn costs what is active, not what is open. */
static conn_t **dirty;
static size_t ndirty, dirty_cap;
static uint64_t next_due = 0; /* mono ms; 0: a pass over all at the next turn */

static void mark_dirty(conn_t *c) {
    if (c->dirty) return;
    if (ndirty == dirty_cap) {
        dirty_cap = dirty_cap ? dirty_cap * 2 : 64;
        dirty = xrealloc(dirty, dirty_cap * sizeof *dirty);
    }
    c->dirty = 1;
    dirty[ndirty++] = c;
}

/* The library's admission of this server's connections (both listeners):
 * whom to serve, evict or refuse at --max-connections or out of
 * descriptors, the order in which waiting connections are evicted (by the
 * address of their conn_t), the lingering refusals, the accept errors said.
 * Made in main. */
static botspace_admission *admission;

static uint64_t conn_id(const conn_t *c) {
    return (uint64_t)(uintptr_t)c;
}

static conn_t *conn_of(uint64_t id) {
    return (conn_t *)(uintptr_t)id;
}

/* Keeps the admission's eviction order in step with the library's
 * connection: `since` is its waiting_since_ms (BOTSPACE_NO_DEADLINE while
 * a request or an answer is on its way: busy, not to be evicted; always
 * for a gateway). Called at every sweep, which comes before the accepts
 * of each turn, so the order is the connections' state when they run. */
static void order_sync(conn_t *c, uint64_t since) {
    if (c->refusal || since == c->waiting_since) return;
    if (since == BOTSPACE_NO_DEADLINE) botspace_admission_remove(admission, conn_id(c));
    else botspace_admission_touch(admission, conn_id(c), since);
    c->waiting_since = since;
}

/* Where the library's connection stands (state, reading, deadlines). */
static botspace_http_connection_info http_info(const conn_t *c) {
    botspace_http_connection_info i;
    memset(&i, 0, sizeof i);
    i.state = BOTSPACE_CONNECTION_STATE_CLOSED;
    i.timeout_ms = i.waiting_since_ms = BOTSPACE_NO_DEADLINE;
    if (c->http) botspace_http_connection_get_info(c->http, &i);
    return i;
}

/* Where the library's gateway link stands (state, reading, deadline). */
static botspace_gateway_link_info link_info(const conn_t *c) {
    botspace_gateway_link_info i;
    memset(&i, 0, sizeof i);
    i.state = BOTSPACE_CONNECTION_STATE_CLOSED;
    i.timeout_ms = BOTSPACE_NO_DEADLINE;
    if (c->link) botspace_gateway_link_get_info(c->link, &i);
    return i;
}

/* Bytes to send: the library's connection's or link's. */
static const unsigned char *conn_output(const conn_t *c, size_t *len) {
    const uint8_t *p = NULL;
    *len = 0;
    if (c->http) botspace_http_connection_poll_transmit(c->http, &p, len);
    else if (c->link) botspace_gateway_link_poll_transmit(c->link, &p, len);
    return p;
}

static size_t conn_unsent(const conn_t *c) {
    size_t n = 0;
    conn_output(c, &n);
    return n;
}

static uint64_t svc_now(void) {
    uint64_t now = 0;
    botspace_service_now_ms(svc, &now);
    return now;
}

static void conn_close(conn_t *c) {
    /* The client is gone: its parked poll is forgotten (its offset stays
     * acknowledged). */
    if (c->parked) botspace_service_cancel_parked(svc, c->parked);
    c->parked = 0;
    botspace_gateway_link_free(&c->link);
    c->bot_id = NULL;
    if (c->fd >= 0) {
        if (c->watched) epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
        c->watched = 0;
        close(c->fd);
        if (c->refusal) botspace_admission_refusal_ended(admission);
        else nlive--;
        order_sync(c, BOTSPACE_NO_DEADLINE);
    }
    c->fd = -1;
}

static void conn_free(conn_t *c) {
    conn_close(c);
    botspace_http_connection_free(&c->http);
    free(c);
}

/* Writes as much of the output as the socket takes. Returns -1 on a dead peer. */
static int conn_flush(conn_t *c, uint64_t now) {
    size_t len;
    const unsigned char *p;
    while ((p = conn_output(c, &len)), len > 0) {
        int flags = 0;
#ifdef MSG_NOSIGNAL
        flags |= MSG_NOSIGNAL;
#endif
        ssize_t n = send(c->fd, p, len, flags);
        if (n > 0) {
            /* A write that took some restarts the library's write timeout. */
            if (c->http) botspace_http_connection_sent(c->http, (size_t)n, now);
            else botspace_gateway_link_sent(c->link, (size_t)n, now);
            c->write_blocked = 0;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->write_blocked = 1;
            return 0;
        } else {
            return -1;
        }
    }
    c->write_blocked = 0;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Group commit across connections
 *
 * After each epoll_wait, serve_http_round() gives the turn's connections to the
 * library's round (botspace_http_round_serve), which answers every
 * complete request buffered on any HTTP connection: batches of up to
 * policy.max_batch, one group commit (one transaction and
 * one fsync) each, each connection's answers in its own order; connections
 * that read bytes this turn first, then the backlog round robin; the host
 * API, polls and another listener's paths alone, each ending its
 * connection's share of a batch. What it leaves to this server is what
 * changes a connection here: a gateway upgrade (the socket becomes the
 * gateway's) and a parked poll (the connection waits for its answer). */

static botspace_http_round *http_round;
static botspace_round_connection *round_conns; /* round_cap of each */
static botspace_round_step *round_steps;
static size_t round_cap;

/* GET /bot/gateway: the connection becomes the gateway's, or gets the
 * refusal and stays HTTP. */
static void upgrade(conn_t *c, const botspace_http_request *r, uint64_t mono) {
    botspace_bytes resp = {NULL, 0};
    botspace_gateway *gw = NULL;
    if (botspace_gateway_accept(svc, r->ptr, r->len, svc_now(), &resp, &gw) != BOTSPACE_STATUS_OK) {
        /* A failed call: the library's 500 answer_failed, in its turn. */
        botspace_http_connection_answer(c->http, NULL, 0, mono);
        return;
    }
    if (!gw) {
        botspace_http_connection_answer(c->http, resp.ptr, resp.len, mono);
        botspace_bytes_free(&resp);
        return;
    }
    /* Answers not sent yet go first, then the 101, then the gateway's
     * frames; what the bot sent after its request is the gateway's first
     * input (it may talk at once). */
    botspace_bytes rest = {NULL, 0}, unsent = {NULL, 0};
    botspace_http_connection_upgrade(c->http, &rest, &unsent);
    botspace_http_connection_free(&c->http);
    unsigned char *head = malloc(unsent.len + resp.len + 1);
    if (!head) die_oom();
    if (unsent.len) memcpy(head, unsent.ptr, unsent.len);
    memcpy(head + unsent.len, resp.ptr, resp.len);
    botspace_status st = botspace_gateway_link_new(&gw, head, unsent.len + resp.len, &c->link);
    free(head);
    botspace_bytes_free(&resp);
    botspace_bytes_free(&unsent);
    c->st = ST_GATEWAY;
    if (st != BOTSPACE_STATUS_OK) {
        botspace_gateway_free(&gw);
        botspace_bytes_free(&rest);
        conn_close(c);
        return;
    }
    botspace_gateway_link_bot_id(c->link, &c->bot_id);
    if (rest.len > 0) botspace_gateway_link_handle_input(c->link, rest.ptr, rest.len, mono);
    else botspace_gateway_link_handle_timeout(c->link, mono);
    botspace_bytes_free(&rest);
}

/* Whether a connection may have a request to take now. */
static int has_request(const conn_t *c) { return c->http && c->fd >= 0 && http_info(c).has_request; }

/* One round over the turn's connections (those that read bytes, were
 * accepted or answered, and the backlog of those with requests held back:
 * every connection that can have a request to take; a gateway or a closed
 * one is an entry without an HTTP connection: the round skips it), then
 * the steps it left. Each stays in the list: its answers are settled and
 * sent at the next turn. */
static void serve_http_round(void) {
    if (ndirty > round_cap) {
        round_cap = dirty_cap;
        round_conns = xrealloc(round_conns, round_cap * sizeof *round_conns);
        round_steps = xrealloc(round_steps, round_cap * sizeof *round_steps);
    }
    size_t n = ndirty;
    for (size_t i = 0; i < n; i++) {
        conn_t *c = dirty[i];
        round_conns[i].conn = c->fd >= 0 ? c->http : NULL;
        round_conns[i].fresh = c->fresh != 0;
        round_conns[i].peer = c->peer;
        round_conns[i].peer_len = c->peer_len;
    }
    uint64_t mono = mono_ms();
    size_t nsteps = 0;
    if (n == 0 || botspace_http_round_serve(http_round, svc, round_conns, n, mono, round_steps, &nsteps) != BOTSPACE_STATUS_OK)
        nsteps = 0;
    for (size_t k = 0; k < nsteps; k++) {
        const botspace_round_step *st = &round_steps[k];
        conn_t *c = dirty[st->connection];
        if (st->kind == BOTSPACE_ROUND_STEP_KIND_GATEWAY) upgrade(c, &st->request, mono);
        /* Parked: the connection waits (no thread does) until
         * serve_parked() gets its answer from the library. */
        else c->parked = st->poll_id;
    }
    for (size_t i = 0; i < n; i++) dirty[i]->fresh = 0;
}

/* ------------------------------------------------------------------------ */
/* Gateway */

/* Runs the gateway link now (the loop's monotonic clock; the link reads
 * the service's clock for its session itself): the library runs its
 * session (deadlines, output up to its budget counting what the socket
 * has not taken, the 4008 of a bot that stays behind) and the rules of its
 * end. */
static void gateway_run(conn_t *c) {
    if (c->st == ST_GATEWAY && c->link) botspace_gateway_link_handle_timeout(c->link, mono_ms());
}

/* ------------------------------------------------------------------------ */
/* Reading */

/* Whether to wait for the connection's input: as the library's link or
 * connection says. */
static int conn_wants_input(const conn_t *c) {
    return c->st == ST_GATEWAY ? link_info(c).wants_read : http_info(c).wants_read;
}

/* What a connection does when its peer closes its side. */
static void conn_peer_closed(conn_t *c, uint64_t mono) {
    c->peer_eof = 1;
    if (c->st == ST_HTTP) {
        /* The library answers what was sent whole (serve_http_round), then
         * closes; a parked poll has nobody left to answer: closed now. */
        botspace_http_connection_handle_eof(c->http, mono);
        c->fresh = 1;
        if (http_info(c).state == BOTSPACE_CONNECTION_STATE_CLOSED) conn_close(c);
    } else {
        botspace_gateway_link_handle_eof(c->link, mono);
    }
}

/* The loop's one read buffer, policy.read_chunk_bytes (made in main). */
static unsigned char *read_buf;

/* Reads what the socket has (at most policy.read_per_turn_bytes a turn).
 * HTTP bytes go to the library's connection, as many as it takes; gateway
 * bytes go to the library's link at once. */
static void conn_read(conn_t *c, uint64_t mono) {
    unsigned char *chunk = read_buf;
    size_t total = 0;
    while (total < policy.read_per_turn_bytes && c->fd >= 0) {
        size_t want = policy.read_chunk_bytes;
        if (c->st == ST_HTTP) {
            size_t limit = http_info(c).read_limit;
            if (limit == 0) break;
            if (limit < want) want = limit;
        }
        ssize_t n = recv(c->fd, chunk, want, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) { /* EOF or error */
            conn_peer_closed(c, mono);
            return;
        }
        total += (size_t)n;
        if (c->st == ST_HTTP) {
            botspace_http_connection_handle_input(c->http, chunk, (size_t)n, mono);
            c->fresh = 1;
        } else {
            botspace_gateway_link_handle_input(c->link, chunk, (size_t)n, mono);
            if (!conn_wants_input(c)) break;
        }
        /* A short read drained the socket: skip the recv that would only say
         * EAGAIN (poll reports anything that arrives later). */
        if ((size_t)n < want) break;
    }
}

/* ------------------------------------------------------------------------ */
/* The demo: the library decides what to create and print (the Rust server
 * prints the same lines); `admin_base` is where /admin/ is served. */

static int demo(const botspace_bytes *base, const botspace_bytes *admin_base, int rotate_token) {
    botspace_bytes lines = {NULL, 0};
    botspace_status st = botspace_service_demo_start(svc, (const char *)base->ptr, base->len,
                                                     (const char *)admin_base->ptr, admin_base->len,
                                                     rotate_token != 0, &lines);
    if (st != BOTSPACE_STATUS_OK) {
        char msg[512];
        size_t n = 0;
        botspace_last_error_message(msg, sizeof msg, &n);
        log_at(LOG_ERROR, "%s", msg);
        return -1;
    }
    /* The demo's output (its token included), whatever the level. */
    botspace_stream stream;
    botspace_bytes line = {NULL, 0};
    if (botspace_output_block(&output, "demo", 4, (const char *)lines.ptr, lines.len, wall_ms(), &stream, &line) ==
        BOTSPACE_STATUS_OK)
        write_line(stream, &line);
    botspace_bytes_free(&lines);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Start-up: the options (flags, BOTSPACE_* variables, the config file, their
 * defaults and messages) are the library's, the Rust server's too
 * (botspace_server_options_parse). */

static botspace_server_options *opts;
static botspace_server_settings settings; /* borrowed from opts */

/* Binds and listens on HOST:PORT ([v6]:PORT too). */
static int listen_on(const char *addr) {
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof host) {
        log_at(LOG_ERROR, "cannot listen on %s: expected HOST:PORT", addr);
        return -1;
    }
    size_t hl = (size_t)(colon - addr);
    memcpy(host, addr, hl);
    host[hl] = 0;
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = 0;
    }
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int gai = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res);
    if (gai != 0) {
        log_at(LOG_ERROR, "cannot listen on %s: %s", addr, gai_strerror(gai));
        return -1;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0) break;
        err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        log_at(LOG_ERROR, "cannot listen on %s: %s", addr, strerror(err));
        return -1;
    }
    set_nonblocking(fd);
    return fd;
}

/* ------------------------------------------------------------------------ */
/* Webhook deliveries
 *
 * The library decides every delivery (botspace_service_poll_webhook): which
 * event is due, to which URL, with which headers, body and deadline, what
 * an answer means and when to retry. This part only sends each request
 * with libcurl's multi interface, inside the same epoll loop: curl's
 * sockets join the epoll set (CURLMOPT_SOCKETFUNCTION), its timer bounds the
 * wait (CURLMOPT_TIMERFUNCTION), and each finished transfer is
 * reported with botspace_service_webhook_report. New events wake the loop
 * through the wake-up callback; retries come due at
 * botspace_service_webhook_timeout.
 *
 * When the store's part runs is the library's too (botspace_webhook_pump):
 * the loop takes what is due without the store (botspace_webhook_pump_take)
 * and sleeps until botspace_webhook_pump_timeout; the store's part (a bot's
 * log to read, the outcomes to write and sync, the first load) runs on a
 * thread of its own, one turn each time the pump gives it one, and each
 * turn's end wakes the loop through the wake pipe to send what it found.
 * The pump also caps the transfers in flight (a share of --max-connections,
 * all bots together): it hands out a request only with a slot free, and
 * each report through it gives one back. Curl's handles stay on the loop's
 * thread. */

typedef struct wh_xfer {
    struct wh_xfer *prev, *next; /* every transfer in flight */
    CURL *easy;
    botspace_webhook_request *req;
    uint64_t id;
    /* The request's header list: nodes kept with the transfer (no
     * allocation per delivery), pointing into `req`'s header lines. */
    struct curl_slist *headers;
    size_t headers_cap;
    char *retry_after;       /* the Retry-After value of the last response head, raw */
    size_t answer_bytes;
    int answer_too_long;     /* the body passed BOTSPACE_WEBHOOK_MAX_ANSWER_BYTES: the transfer stopped there */
    const char *refusal;     /* an address the policy refused (the library's message) */
    int opened;              /* a socket was opened to an allowed address */
    char error[CURL_ERROR_SIZE];
} wh_xfer;

static wh_xfer *wh_all;

/* Finished transfers kept for the next ones (policy.webhook_spare_transfers
 * of them, made in webhook_init), with their easy handle and every option
 * that is the same for each delivery already set: a delivery neither
 * allocates a handle nor resets and sets it up again (both showed in
 * profiles as a large part of a delivery's cost). */
static wh_xfer **wh_spare;
static size_t wh_nspare;

/* The library's schedule, and the store thread that runs its turns. */
static botspace_webhook_pump *wh_pump;
static pthread_t wh_store_thread;
static int wh_store_running;

static CURLM *wh_multi;
static int64_t wh_timer_due = -1; /* mono ms of curl's timer, -1 for none */

/* curl's sockets join the loop's epoll as curl asks (level-triggered, as
 * curl_multi_socket_action expects). */
static int wh_socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp) {
    (void)easy, (void)userp, (void)socketp;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(epfd, EPOLL_CTL_DEL, s, NULL); /* fails harmlessly when already closed */
        return 0;
    }
    struct epoll_event e;
    memset(&e, 0, sizeof e);
    e.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
    e.data.u64 = TAG_OF(TAG_CURL, s);
    if (epoll_ctl(epfd, EPOLL_CTL_MOD, s, &e) != 0 && errno == ENOENT) epoll_ctl(epfd, EPOLL_CTL_ADD, s, &e);
    return 0;
}

static int wh_timer_cb(CURLM *multi, long timeout_ms, void *userp) {
    (void)multi, (void)userp;
    wh_timer_due = timeout_ms < 0 ? -1 : (int64_t)(mono_ms() + (uint64_t)timeout_ms);
    return 0;
}

/* Every address curl is about to connect to, after resolving: the
 * library's policy decides (no connection to loopback, private, link-local
 * ... addresses unless allowed), so a name cannot lead past the rules
 * setWebhook applied to literal addresses. */
static curl_socket_t wh_open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a) {
    wh_xfer *x = clientp;
    (void)purpose;
    char ip[INET6_ADDRSTRLEN] = "";
    if (a->family == AF_INET) inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->addr)->sin_addr, ip, sizeof ip);
    else if (a->family == AF_INET6) inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&a->addr)->sin6_addr, ip, sizeof ip);
    const char *refusal = NULL;
    if (!*ip || botspace_service_webhook_address_allowed(svc, ip, &refusal) != BOTSPACE_STATUS_OK) return CURL_SOCKET_BAD;
    if (refusal) {
        x->refusal = refusal;
        return CURL_SOCKET_BAD;
    }
    x->opened = 1;
    return socket(a->family, a->socktype, a->protocol);
}

/* The Retry-After header of the final response head, kept raw: the library
 * parses it (seconds or an HTTP date). */
static size_t wh_header_cb(char *line, size_t size, size_t n, void *userp) {
    wh_xfer *x = userp;
    size_t len = size * n;
    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        free(x->retry_after);
        x->retry_after = NULL;
    } else if (len > 12 && strncasecmp(line, "retry-after:", 12) == 0) {
        size_t s = 12, e = len;
        while (s < e && (line[s] == ' ' || line[s] == '\t')) s++;
        while (e > s && (line[e - 1] == '\r' || line[e - 1] == '\n' || line[e - 1] == ' ' || line[e - 1] == '\t')) e--;
        free(x->retry_after);
        x->retry_after = malloc(e - s + 1);
        if (!x->retry_after) die_oom();
        memcpy(x->retry_after, line + s, e - s);
        x->retry_after[e - s] = 0;
    }
    return len;
}

/* The answer's body is not used: counted and dropped, and the transfer
 * stops once it passes BOTSPACE_WEBHOOK_MAX_ANSWER_BYTES. */
static size_t wh_body_cb(char *data, size_t size, size_t n, void *userp) {
    wh_xfer *x = userp;
    (void)data;
    x->answer_bytes += size * n;
    if (x->answer_bytes > BOTSPACE_WEBHOOK_MAX_ANSWER_BYTES) {
        x->answer_too_long = 1;
        return 0;
    }
    return size * n;
}

static void wh_xfer_destroy(wh_xfer *x) {
    if (x->easy) curl_easy_cleanup(x->easy);
    free(x->headers);
    free(x);
}

/* Ends a transfer: its request is freed, and the transfer (with its
 * handle) is kept for the next delivery when there is room. */
static void wh_xfer_free(wh_xfer *x) {
    if (x->prev) x->prev->next = x->next;
    else if (wh_all == x) wh_all = x->next;
    if (x->next) x->next->prev = x->prev;
    x->prev = x->next = NULL;
    if (x->easy) curl_multi_remove_handle(wh_multi, x->easy);
    botspace_webhook_request_free(&x->req);
    free(x->retry_after);
    x->retry_after = NULL;
    if (x->easy && wh_nspare < policy.webhook_spare_transfers) wh_spare[wh_nspare++] = x;
    else wh_xfer_destroy(x);
}

/* The roots a webhook's TLS certificate must chain to, as the Rust server
 * takes them (rustls-native-certs): when SSL_CERT_FILE (a PEM bundle) or
 * SSL_CERT_DIR (hashed directories, ':'-separated) is set, those and only
 * those; otherwise libcurl's built-in bundle. libcurl itself reads neither
 * variable (it always passes its compiled-in paths to OpenSSL), so they are
 * handed over here. Read once, at start. */
static const char *wh_ca_file, *wh_ca_dir;
static int wh_ca_from_env;

static void wh_roots_from_env(void) {
    wh_ca_file = getenv("SSL_CERT_FILE");
    wh_ca_dir = getenv("SSL_CERT_DIR");
    if (wh_ca_dir && !wh_ca_dir[strspn(wh_ca_dir, ":")]) wh_ca_dir = NULL; /* no directory in it */
    wh_ca_from_env = wh_ca_file || wh_ca_dir;
}

static int wh_set_roots(CURL *e) {
    if (!wh_ca_from_env) return 1;
    return curl_easy_setopt(e, CURLOPT_CAINFO, wh_ca_file) == CURLE_OK &&
           curl_easy_setopt(e, CURLOPT_CAPATH, wh_ca_dir) == CURLE_OK;
}

/* The store thread: each turn the pump gives it (its polls read the bots'
 * logs, write and sync the outcomes; what they hand out waits in the pump),
 * then a wake-up for the loop, until the pump stops. */
static void *wh_store_loop(void *arg) {
    (void)arg;
    bool turn = false;
    while (botspace_webhook_pump_wait_turn(wh_pump, &turn) == BOTSPACE_STATUS_OK && turn) {
        botspace_webhook_pump_store_turn(wh_pump, svc, svc_now(), NULL);
        /* Non-blocking: a full pipe already guarantees a wake-up. */
        char one = 1;
        ssize_t w = write(wake_pipe[1], &one, 1);
        (void)w;
    }
    return NULL;
}

/* A transfer with its easy handle and the options every delivery shares;
 * NULL when curl cannot make one. */
static wh_xfer *wh_xfer_new(void) {
    wh_xfer *x = calloc(1, sizeof *x);
    if (!x) die_oom();
    CURL *e = x->easy = curl_easy_init();
    int ok = e && curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK &&
             /* A proxy from the environment would be connected to instead
              * of the checked addresses. */
             curl_easy_setopt(e, CURLOPT_PROXY, "") == CURLE_OK &&
             wh_set_roots(e) &&
             curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_POST, 1L) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, wh_open_socket) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, x) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, wh_header_cb) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_HEADERDATA, x) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, wh_body_cb) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_WRITEDATA, x) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->error) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_PRIVATE, x) == CURLE_OK;
    if (!ok) {
        wh_xfer_destroy(x);
        return NULL;
    }
    return x;
}


/* Plain http to a literal address (no name to resolve, no TLS) goes out on
 * the loop's own sockets: the library writes the request
 * (botspace_webhook_request_http_kept) and reads the answer
 * (botspace_webhook_answer), the connection stays open for the next
 * delivery to the same address, and the socket never leaves epoll while it
 * lives. libcurl's multi interface cost most of a delivery (a transfer's
 * set-up and its socket callbacks, epoll_ctl calls per request); it keeps
 * the rest: names, TLS. */
typedef struct wh_plain {
    struct wh_plain *prev, *next; /* wh_busy or wh_idle */
    int fd;
    struct sockaddr_storage sa; /* the origin: address and port */
    socklen_t salen;
    botspace_webhook_request *req; /* NULL while idle */
    uint64_t id;
    uint64_t deadline_ms; /* service clock */
    const uint8_t *out;
    size_t out_len, out_off;
    botspace_webhook_answer *answer;
    int reused;     /* the connection carried an earlier request */
    int connecting; /* connect() is under way */
    int want_out;   /* EPOLLOUT is asked for */
    int got_bytes;  /* a byte of the answer came */
} wh_plain;

static wh_plain *wh_busy, *wh_idle;
static size_t wh_nidle;
static wh_plain **wh_by_fd;
static size_t wh_by_fd_cap;
static uint64_t wh_plain_due = UINT64_MAX; /* the earliest deadline in wh_busy */

static void wh_plain_link(wh_plain **list, wh_plain *c) {
    c->prev = NULL;
    c->next = *list;
    if (*list) (*list)->prev = c;
    *list = c;
}

static void wh_plain_unlink(wh_plain **list, wh_plain *c) {
    if (c->prev) c->prev->next = c->next;
    else if (*list == c) *list = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

/* Closes a connection that is on no list; its request, if any, is freed
 * (reported or not: the caller's choice). */
static void wh_plain_destroy(wh_plain *c) {
    if (c->fd >= 0) {
        epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
        if ((size_t)c->fd < wh_by_fd_cap) wh_by_fd[c->fd] = NULL;
        close(c->fd);
    }
    botspace_webhook_answer_free(&c->answer);
    botspace_webhook_request_free(&c->req);
    free(c);
}

static void wh_plain_watch(wh_plain *c, int out) {
    struct epoll_event e;
    memset(&e, 0, sizeof e);
    e.events = EPOLLIN | (out ? EPOLLOUT : 0);
    e.data.u64 = TAG_OF(TAG_HOOK, c->fd);
    epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &e);
    c->want_out = out;
}

/* A request's end: reported, the connection kept for the next one to its
 * address (when the answer allows and there is room) or closed. */
static void wh_plain_done(wh_plain *c, int keep) {
    wh_plain_unlink(&wh_busy, c);
    botspace_webhook_answer_free(&c->answer);
    botspace_webhook_request_free(&c->req);
    if (keep && wh_nidle < policy.webhook_spare_transfers) {
        if (c->want_out) wh_plain_watch(c, 0);
        c->reused = 1;
        wh_plain_link(&wh_idle, c);
        wh_nidle++;
    } else {
        wh_plain_destroy(c);
    }
}

static void wh_plain_fail(wh_plain *c, botspace_webhook_failure kind, int err) {
    char detail[160];
    snprintf(detail, sizeof detail, "%s (os error %d)", strerror(err), err);
    botspace_webhook_pump_report_failure(wh_pump, svc, c->id, (uint32_t)kind, detail, svc_now(), NULL);
    wh_plain_done(c, 0);
}

static void wh_plain_send(botspace_webhook_request *req, const botspace_webhook_request_parts *p,
                          const struct sockaddr_storage *sa, socklen_t salen, int reuse);

/* A kept connection the receiver had closed meanwhile: the request goes
 * again on a new connection (at worst a duplicate, which the webhook-id
 * lets the receiver drop). */
static void wh_plain_again(wh_plain *c) {
    botspace_webhook_request *req = c->req;
    c->req = NULL;
    struct sockaddr_storage sa = c->sa;
    socklen_t salen = c->salen;
    wh_plain_done(c, 0);
    botspace_webhook_request_parts p;
    botspace_webhook_request_parts_get(req, &p);
    wh_plain_send(req, &p, &sa, salen, 0);
}

static void wh_plain_write(wh_plain *c) {
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!c->want_out) wh_plain_watch(c, 1);
            return;
        }
        if (c->reused && c->out_off == 0) wh_plain_again(c);
        else wh_plain_fail(c, BOTSPACE_WEBHOOK_FAILURE_CONNECTION, errno);
        return;
    }
    if (c->want_out) wh_plain_watch(c, 0);
}

/* Sends `req` (plain http, a literal address) on a kept connection to its
 * address when `reuse` and one is idle, else on a new one, whose address
 * the library's policy checks first. */
static void wh_plain_send(botspace_webhook_request *req, const botspace_webhook_request_parts *p,
                          const struct sockaddr_storage *sa, socklen_t salen, int reuse) {
    uint64_t now = svc_now();
    wh_plain *c = NULL;
    if (reuse) {
        for (c = wh_idle; c; c = c->next)
            if (c->salen == salen && memcmp(&c->sa, sa, salen) == 0) break;
        if (c) {
            wh_plain_unlink(&wh_idle, c);
            wh_nidle--;
        }
    }
    if (!c) {
        const char *refusal = NULL;
        if (botspace_service_webhook_address_allowed(svc, p->host, &refusal) != BOTSPACE_STATUS_OK || refusal) {
            if (refusal) botspace_webhook_pump_report(wh_pump, svc, p->id, 0, NULL, refusal, false, now, NULL);
            else botspace_webhook_pump_report_failure(wh_pump, svc, p->id, BOTSPACE_WEBHOOK_FAILURE_ADDRESS_CHECK, NULL, now, NULL);
            botspace_webhook_request_free(&req);
            return;
        }
        int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            int err = errno;
            char detail[160];
            snprintf(detail, sizeof detail, "%s (os error %d)", strerror(err), err);
            botspace_webhook_pump_report_failure(wh_pump, svc, p->id, BOTSPACE_WEBHOOK_FAILURE_CONNECT, detail, now, NULL);
            botspace_webhook_request_free(&req);
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c = calloc(1, sizeof *c);
        if (!c) die_oom();
        c->fd = fd;
        c->sa = *sa;
        c->salen = salen;
        if ((size_t)fd >= wh_by_fd_cap) {
            size_t cap = wh_by_fd_cap ? wh_by_fd_cap : 256;
            while (cap <= (size_t)fd) cap *= 2;
            wh_by_fd = xrealloc(wh_by_fd, cap * sizeof *wh_by_fd);
            memset(wh_by_fd + wh_by_fd_cap, 0, (cap - wh_by_fd_cap) * sizeof *wh_by_fd);
            wh_by_fd_cap = cap;
        }
        wh_by_fd[fd] = c;
        struct epoll_event e;
        memset(&e, 0, sizeof e);
        e.events = EPOLLIN | EPOLLOUT;
        e.data.u64 = TAG_OF(TAG_HOOK, fd);
        epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e);
        c->want_out = 1;
        if (connect(fd, (const struct sockaddr *)sa, salen) != 0 && errno != EINPROGRESS) {
            int err = errno;
            c->req = req;
            c->id = p->id;
            wh_plain_link(&wh_busy, c);
            wh_plain_fail(c, BOTSPACE_WEBHOOK_FAILURE_CONNECT, err);
            return;
        }
        c->connecting = 1;
    }
    c->req = req;
    c->id = p->id;
    c->deadline_ms = p->deadline_ms;
    if (c->deadline_ms < wh_plain_due) wh_plain_due = c->deadline_ms;
    c->got_bytes = 0;
    c->out_off = 0;
    botspace_webhook_request_http_kept(req, &c->out, &c->out_len);
    if (botspace_webhook_answer_new(&c->answer) != BOTSPACE_STATUS_OK) die_oom();
    wh_plain_link(&wh_busy, c);
    if (!c->connecting) wh_plain_write(c);
}

/* Whether `p` goes out on the loop's own sockets; its address when so. */
static int wh_plain_target(const botspace_webhook_request_parts *p, struct sockaddr_storage *sa, socklen_t *salen) {
    if (p->https) return 0;
    memset(sa, 0, sizeof *sa);
    struct sockaddr_in *a4 = (struct sockaddr_in *)sa;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)sa;
    if (inet_pton(AF_INET, p->host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons(p->port);
        *salen = sizeof *a4;
        return 1;
    }
    if (inet_pton(AF_INET6, p->host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(p->port);
        *salen = sizeof *a6;
        return 1;
    }
    return 0;
}

/* A socket event of one of the loop's own webhook connections. */
static void wh_plain_event(int fd, uint32_t re) {
    wh_plain *c = (size_t)fd < wh_by_fd_cap ? wh_by_fd[fd] : NULL;
    if (!c) return;
    if (!c->req) {
        /* Idle: the receiver closed it (or sent what nobody asked for). */
        wh_plain_unlink(&wh_idle, c);
        wh_nidle--;
        wh_plain_destroy(c);
        return;
    }
    if (c->connecting) {
        if (!(re & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        if (err) {
            wh_plain_fail(c, BOTSPACE_WEBHOOK_FAILURE_CONNECT, err);
            return;
        }
        c->connecting = 0;
        wh_plain_write(c);
        return;
    }
    if (c->want_out && (re & EPOLLOUT)) {
        wh_plain_write(c);
        return;
    }
    if (!(re & (EPOLLIN | EPOLLERR | EPOLLHUP))) return;
    char buf[16384];
    for (;;) {
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n < 0) {
            if (c->reused && !c->got_bytes) wh_plain_again(c);
            else wh_plain_fail(c, BOTSPACE_WEBHOOK_FAILURE_CONNECTION, errno);
            return;
        }
        if (n > 0) c->got_bytes = 1;
        botspace_webhook_answer_step step = BOTSPACE_WEBHOOK_ANSWER_STEP_MORE;
        bool reusable = false;
        botspace_webhook_answer_feed(c->answer, (const uint8_t *)buf, (size_t)n, svc_now(), &step, &reusable);
        if (step == BOTSPACE_WEBHOOK_ANSWER_STEP_MORE) {
            if (n == 0) return; /* not reached: a close always ends the answer */
            continue;
        }
        if (step == BOTSPACE_WEBHOOK_ANSWER_STEP_CLOSED_BEFORE_ANSWER && c->reused) {
            wh_plain_again(c);
            return;
        }
        botspace_webhook_pump_report_answer(wh_pump, svc, c->id, c->answer, svc_now(), NULL);
        wh_plain_done(c, reusable);
        return;
    }
}

/* Reports every request past its deadline as timed out (its connection is
 * closed: the answer may still come on it). */
static void wh_plain_expire(uint64_t now) {
    if (now < wh_plain_due) return;
    uint64_t due = UINT64_MAX;
    wh_plain *c = wh_busy;
    while (c) {
        wh_plain *next = c->next;
        if (c->deadline_ms <= now) {
            botspace_webhook_pump_report(wh_pump, svc, c->id, 0, NULL, NULL, true, now, NULL);
            wh_plain_done(c, 0);
        } else if (c->deadline_ms < due) {
            due = c->deadline_ms;
        }
        c = next;
    }
    wh_plain_due = due;
}

/* Starts one request; on a local failure reports it at once. */
static void wh_start(botspace_webhook_request *req, uint64_t now) {
    botspace_webhook_request_parts p;
    botspace_webhook_request_parts_get(req, &p);
    struct sockaddr_storage sa;
    socklen_t salen = 0;
    if (wh_plain_target(&p, &sa, &salen)) {
        wh_plain_send(req, &p, &sa, salen, 1);
        return;
    }
    wh_xfer *x = wh_nspare ? wh_spare[--wh_nspare] : wh_xfer_new();
    if (!x) {
        botspace_webhook_pump_report_failure(wh_pump, svc, p.id, BOTSPACE_WEBHOOK_FAILURE_BUILD, NULL, now, NULL);
        botspace_webhook_request_free(&req);
        return;
    }
    x->req = req;
    x->id = p.id;
    x->answer_bytes = 0;
    x->answer_too_long = 0;
    x->refusal = NULL;
    x->opened = 0;
    x->error[0] = 0;
    /* The library's headers are every header a delivery carries; the two
     * empty ones only tell libcurl not to add its own defaults (Expect:
     * 100-continue, Accept): how this client library is driven, not a
     * header of this host's. */
    static const char *const NONE[] = {"Expect:", "Accept:"};
    size_t n = p.header_count + 2;
    if (n > x->headers_cap) {
        x->headers = xrealloc(x->headers, n * sizeof *x->headers);
        x->headers_cap = n;
    }
    for (size_t i = 0; i < n; i++) {
        x->headers[i].data = (char *)(i < p.header_count ? p.headers[i] : NONE[i - p.header_count]);
        x->headers[i].next = i + 1 < n ? &x->headers[i + 1] : NULL;
    }
    uint64_t left = p.deadline_ms > now ? p.deadline_ms - now : 1;
    CURL *e = x->easy;
    int ok = curl_easy_setopt(e, CURLOPT_URL, p.url) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_POSTFIELDS, (const char *)p.body) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)p.body_len) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(left > LONG_MAX ? LONG_MAX : left)) == CURLE_OK &&
             curl_multi_add_handle(wh_multi, e) == CURLM_OK;
    if (!ok) {
        botspace_webhook_pump_report_failure(wh_pump, svc, x->id, BOTSPACE_WEBHOOK_FAILURE_BUILD, NULL, now, NULL);
        /* Not added: the handle is not kept (its options may be half set). */
        botspace_webhook_request_free(&x->req);
        wh_xfer_destroy(x);
        return;
    }
    x->next = wh_all;
    if (wh_all) wh_all->prev = x;
    wh_all = x;
}

/* The outcome of a finished transfer; the library words a failure, as for the Rust server. */
static void wh_finish(wh_xfer *x, CURLcode rc) {
    uint64_t now = svc_now();
    long status = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    long os_errno = 0;
    curl_easy_getinfo(x->easy, CURLINFO_OS_ERRNO, &os_errno);
    const char *detail = x->error[0] ? x->error : curl_easy_strerror(rc);
    char os_detail[128];
    if ((rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && x->answer_too_long)) && status >= 100 && status <= 999) {
        botspace_webhook_pump_report(wh_pump, svc, x->id, (uint16_t)status, x->retry_after, NULL, false, now, NULL);
        return;
    }
    if (rc == CURLE_OPERATION_TIMEDOUT) {
        botspace_webhook_pump_report(wh_pump, svc, x->id, 0, NULL, NULL, true, now, NULL);
        return;
    }
    if (rc == CURLE_COULDNT_CONNECT && x->refusal && !x->opened) {
        botspace_webhook_pump_report(wh_pump, svc, x->id, 0, NULL, x->refusal, false, now, NULL);
        return;
    }
    botspace_webhook_failure kind = BOTSPACE_WEBHOOK_FAILURE_CONNECTION;
    if (rc == CURLE_COULDNT_CONNECT && os_errno) { /* the Rust server's detail: the OS error */
        snprintf(os_detail, sizeof os_detail, "%s (os error %ld)", strerror((int)os_errno), os_errno);
        detail = os_detail;
    }
    if (rc == CURLE_COULDNT_CONNECT) kind = BOTSPACE_WEBHOOK_FAILURE_CONNECT;
    else if (rc == CURLE_COULDNT_RESOLVE_HOST) kind = BOTSPACE_WEBHOOK_FAILURE_RESOLVE;
    else if (rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CERTPROBLEM ||
             rc == CURLE_SSL_CIPHER || rc == CURLE_SSL_CACERT_BADFILE)
        kind = BOTSPACE_WEBHOOK_FAILURE_TLS;
    botspace_webhook_pump_report_failure(wh_pump, svc, x->id, (uint32_t)kind, detail, now, NULL);
}

/* Reports every finished transfer. */
static void wh_reap(void) {
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(wh_multi, &left))) {
        if (m->msg != CURLMSG_DONE) continue;
        wh_xfer *x = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        CURLcode rc = m->data.result;
        wh_finish(x, rc);
        wh_xfer_free(x);
    }
}

/* Starts every request the library has due, then runs curl's timer: a
 * transfer added here is sent in the same turn, not one wait later. */
static void webhook_turn(uint64_t now) {
    if (!wh_multi) return;
    wh_plain_expire(now);
    botspace_webhook_request *req = NULL;
    while (botspace_webhook_pump_take(wh_pump, svc, now, &req) == BOTSPACE_STATUS_OK && req) {
        wh_start(req, now);
        req = NULL;
    }
    /* Read again: adding a transfer above set the timer from the clock. */
    if (wh_timer_due >= 0 && (int64_t)mono_ms() >= wh_timer_due) {
        int running = 0;
        wh_timer_due = -1;
        curl_multi_socket_action(wh_multi, CURL_SOCKET_TIMEOUT, 0, &running);
        wh_reap();
    }
}

/* How long epoll_wait may sleep for the webhooks: curl's timer, the pump's
 * timeout. */
static int64_t webhook_poll_timeout(uint64_t mono, uint64_t now, int64_t timeout) {
    if (!wh_multi) return timeout;
    if (wh_timer_due >= 0) {
        int64_t d = wh_timer_due - (int64_t)mono;
        if (d < timeout) timeout = d < 0 ? 0 : d;
    }
    uint64_t due = BOTSPACE_NO_DEADLINE;
    botspace_webhook_pump_timeout(wh_pump, svc, now, &due);
    if (wh_plain_due < due) due = wh_plain_due;
    if (due != BOTSPACE_NO_DEADLINE) {
        uint64_t at = due <= now ? 0 : due - now;
        if ((int64_t)at < timeout) timeout = (int64_t)at;
    }
    return timeout;
}

static int webhook_init(void) {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(wh_multi = curl_multi_init())) {
        log_at(LOG_ERROR, "cannot start libcurl for webhook deliveries");
        return -1;
    }
    if (botspace_webhook_pump_new(&wh_pump) != BOTSPACE_STATUS_OK) die_oom();
    wh_spare = xrealloc(NULL, policy.webhook_spare_transfers * sizeof *wh_spare);
    curl_multi_setopt(wh_multi, CURLMOPT_SOCKETFUNCTION, wh_socket_cb);
    curl_multi_setopt(wh_multi, CURLMOPT_TIMERFUNCTION, wh_timer_cb);
    wh_roots_from_env();
    /* The loop's thread takes the signals (the store thread's syncs are
     * not interrupted): the thread starts with every signal blocked. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int started = pthread_create(&wh_store_thread, NULL, wh_store_loop, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started != 0) {
        log_at(LOG_ERROR, "cannot start the webhook store thread");
        curl_multi_cleanup(wh_multi);
        wh_multi = NULL;
        free(wh_spare);
        wh_spare = NULL;
        botspace_webhook_pump_free(&wh_pump);
        return -1;
    }
    wh_store_running = 1;
    return 0;
}

/* Transfers still in flight are dropped: unreported, they are sent again
 * from the durable cursor after a restart. */
static void webhook_shutdown(void) {
    if (!wh_multi) return;
    if (wh_store_running) {
        /* A turn under way ends first (its sync, its reads). */
        botspace_webhook_pump_stop(wh_pump);
        pthread_join(wh_store_thread, NULL);
        wh_store_running = 0;
    }
    /* With what store turns handed out and the loop did not take. */
    botspace_webhook_pump_free(&wh_pump);
    while (wh_all) wh_xfer_free(wh_all);
    while (wh_busy) {
        wh_plain *c = wh_busy;
        wh_plain_unlink(&wh_busy, c);
        wh_plain_destroy(c);
    }
    while (wh_idle) {
        wh_plain *c = wh_idle;
        wh_plain_unlink(&wh_idle, c);
        wh_plain_destroy(c);
    }
    wh_nidle = 0;
    free(wh_by_fd);
    wh_by_fd = NULL;
    wh_by_fd_cap = 0;
    while (wh_nspare) wh_xfer_destroy(wh_spare[--wh_nspare]);
    free(wh_spare);
    wh_spare = NULL;
    curl_multi_cleanup(wh_multi);
    wh_multi = NULL;
    curl_global_cleanup();
}

/* ------------------------------------------------------------------------ */
/* The loop */

typedef struct {
    int lfd;  /* -1 once stopping */
    int afd;  /* the --admin-addr listener; -1 without one, or once stopping */
    int stopping;
    uint64_t stop_deadline;
    uint64_t accept_paused_until; /* the admission's resume_at_ms after an accept error */
    int accepting;                /* the listeners are in epoll */
    struct epoll_event *events;   /* what epoll_wait reports, policy-free: at most this many a turn */
    size_t backlog;               /* connections left with a request to take: no sleep */
} loop_t;

/* How many events one epoll_wait reports; more wait for the next turn
 * (level-triggered: nothing is lost). */
enum { MAX_EVENTS = 1024 };

/* A connection driven by the library's connection: a new one, or (with
 * `refusal`) its busy refusal with a linger (the 503 server_busy, then a
 * short linger so that a client that was writing its request reads it
 * rather than a reset, closed at the library's deadline; it takes no slot
 * of --max-connections and is never evicted). */
static void add_conn(int fd, botspace_listener role, uint64_t mono, int refusal) {
    conn_t *c = calloc(1, sizeof *c);
    if (!c) die_oom();
    c->fd = fd;
    c->refusal = refusal;
    c->waiting_since = BOTSPACE_NO_DEADLINE;
    if (!refusal) nlive++;
    c->role = role;
    c->st = ST_HTTP;
    botspace_status st =
        refusal ? botspace_http_connection_refusing_busy(mono, &c->http)
                : botspace_http_connection_new(svc, role, settings.request_timeout_ms, settings.idle_timeout_ms, mono,
                                               &c->http);
    if (st != BOTSPACE_STATUS_OK) die_oom();
    /* A new connection waits for its first request: it can be evicted. */
    order_sync(c, http_info(c).waiting_since_ms);
    /* The peer's IP address names it for the admin throttle. */
    struct sockaddr_storage sa;
    socklen_t salen = sizeof sa;
    if (getpeername(fd, (struct sockaddr *)&sa, &salen) == 0) {
        const void *addr = sa.ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&sa)->sin6_addr
                                                    : (const void *)&((struct sockaddr_in *)&sa)->sin_addr;
        if (!inet_ntop(sa.ss_family, addr, c->peer, sizeof c->peer)) c->peer[0] = 0;
    }
    c->peer_len = strlen(c->peer);
    if (nconns == conns_cap) {
        conns_cap = conns_cap ? conns_cap * 2 : 64;
        conns = xrealloc(conns, conns_cap * sizeof *conns);
    }
    c->idx = nconns;
    conns[nconns++] = c;
    mark_dirty(c); /* watched, and its deadlines known, at the next settle */
}

/* Closes a gateway connection with the library's 1001 `server_shutdown`:
 * the link sends it right after the frame being written, then lingers. */
static void gateway_going_away(conn_t *c) {
    botspace_gateway_link_close(c->link, BOTSPACE_CLOSE_SERVER_SHUTDOWN, mono_ms(), NULL);
}

/* Stop: no new connections; gateways get 1001; HTTP connections finish
 * what they have buffered. */
static void begin_stop(loop_t *L, uint64_t mono) {
    botspace_service_begin_shutdown(svc); /* /readyz: 503 shutting_down */
    L->stopping = 1;
    L->stop_deadline = mono + policy.drain_ms;
    say_server_line(BOTSPACE_SERVER_LINE_STOPPING);
    close(L->lfd);
    L->lfd = -1;
    if (L->afd >= 0) close(L->afd);
    L->afd = -1;
    for (size_t i = 0; i < nconns; i++)
        if (conns[i]->st == ST_GATEWAY) gateway_going_away(conns[i]);
    next_due = 0; /* stopping: every connection is settled at each turn */
}

/* Runs the gateways of every bot the wake callback named. */
static void run_woken_gateways(void) {
    size_t nw = 0;
    char **woken = take_wakes(&nw);
    for (size_t i = 0; i < nconns && nw > 0; i++) {
        conn_t *c = conns[i];
        if (c->st != ST_GATEWAY) continue;
        for (size_t k = 0; k < nw; k++) {
            if (strcmp(c->bot_id, woken[k]) == 0) {
                gateway_run(c);
                mark_dirty(c);
                break;
            }
        }
    }
    for (size_t k = 0; k < nw; k++) free(woken[k]);
    free(woken);
}

/* Sends every parked poll's answer the library has ready at `now` (a
 * commit gave its bot events: the wake callback woke this loop; or its
 * deadline came: `[]`). A stop passes UINT64_MAX: every poll is answered. */
static void serve_parked(uint64_t now) {
    for (;;) {
        uint64_t id = 0;
        botspace_bytes resp = {NULL, 0};
        if (botspace_service_poll_parked(svc, now, &id, &resp) != BOTSPACE_STATUS_OK || id == 0) break;
        for (size_t i = 0; i < nconns; i++) {
            conn_t *c = conns[i];
            if (c->parked != id) continue;
            c->parked = 0;
            /* What it pipelined behind the poll is taken next. */
            botspace_http_connection_answer(c->http, resp.ptr, resp.len, mono_ms());
            mark_dirty(c);
            break;
        }
        botspace_bytes_free(&resp);
    }
}

/* A refusal that does not linger (past the library's cap on lingering
 * refusals, or out of descriptors): the 503 goes best effort (what the
 * client already sent is read first) and the socket closes at once, so a
 * flood of connections costs one accept each. */
static void refuse_now(int fd) {
    unsigned char drain[4096];
    for (int i = 0; i < 4 && recv(fd, drain, sizeof drain, MSG_DONTWAIT) > 0; i++) {
    }
    botspace_bytes out = {NULL, 0};
    int flags = MSG_DONTWAIT;
#ifdef MSG_NOSIGNAL
    flags |= MSG_NOSIGNAL;
#endif
    if (botspace_server_busy_response(&out) == BOTSPACE_STATUS_OK) {
        ssize_t w = send(fd, out.ptr, out.len, flags);
        (void)w;
    }
    botspace_bytes_free(&out);
    shutdown(fd, SHUT_WR);
    close(fd);
}

/* True when the peer has sent bytes not read yet: a stop answers them
 * before it closes the connection (closing would reset it instead). */
static int bytes_waiting(int fd) {
    unsigned char b;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0;
}

/* Whether a connection is done: closed by the library (at one of its
 * deadlines, the write timeout among them), or cut by
 * the end of a stop. Shuts the write side of one the library lingers. */
static int conn_done(conn_t *c, const loop_t *L, uint64_t mono) {
    /* A socket that last said EAGAIN is written when epoll says so
     * (serve_ready), not tried again on every turn. */
    if (c->fd >= 0 && conn_unsent(c) > 0 && !c->write_blocked && conn_flush(c, mono) != 0) conn_close(c);
    if (c->fd >= 0 && c->st == ST_HTTP) {
        /* The library's deadlines: the request timeout (its 408, counted
         * and logged by the service, goes out now), the idle timeout, the
         * write timeout (a peer that took nothing of what waits for it:
         * CLOSED), the end of a lingering close. */
        botspace_expired e = BOTSPACE_EXPIRED_NOTHING;
        botspace_http_connection_handle_timeout(c->http, svc, mono, &e);
        if (e == BOTSPACE_EXPIRED_REQUEST && conn_flush(c, mono) != 0) conn_close(c);
    }
    if (c->fd < 0) return 1;
    botspace_connection_state state;
    int idle = 0;
    if (c->st == ST_HTTP) {
        botspace_http_connection_info i = http_info(c);
        state = i.state;
        idle = i.idle;
        order_sync(c, i.waiting_since_ms);
    } else {
        state = link_info(c).state;
        order_sync(c, BOTSPACE_NO_DEADLINE); /* a gateway is never evicted */
    }
    if (state == BOTSPACE_CONNECTION_STATE_LINGERING && !c->shut_wr) {
        shutdown(c->fd, SHUT_WR);
        c->shut_wr = 1;
    }
    /* The write timeout is the library's HTTP connection's: a gateway's
     * reader that stays behind is the link's to judge (4008 slow_consumer
     * after two heartbeat intervals, its close frame sent when the socket
     * takes it, counted and logged), not a reset at 30 s. */
    if (state == BOTSPACE_CONNECTION_STATE_CLOSED) conn_close(c);
    else if (L->stopping && idle && !bytes_waiting(c->fd)) conn_close(c);
    else if (L->stopping && mono >= L->stop_deadline) conn_close(c);
    return c->fd < 0;
}

/* What epoll watches on a live connection: its input while the library
 * takes it; a parked poll's hang-up even when it does not (a client that
 * closes is gone at once, its poll cancelled, though its socket holds
 * bytes the connection does not read); the socket's room while output
 * waits. */
static void conn_watch(conn_t *c) {
    uint32_t ev = 0;
    if (!c->peer_eof && conn_wants_input(c)) ev |= EPOLLIN;
    if (!c->peer_eof && c->parked) ev |= EPOLLRDHUP;
    if (conn_unsent(c) > 0) ev |= EPOLLOUT;
    if (c->watched && ev == c->events) return;
    struct epoll_event e;
    memset(&e, 0, sizeof e);
    e.events = ev;
    e.data.ptr = c;
    if (epoll_ctl(epfd, c->watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &e) == 0) {
        c->watched = 1;
        c->events = ev;
    }
}

/* The connection's next deadline on the loop's clock: the library's (408,
 * idle, write timeout, linger; heartbeat, slow consumer, output it can
 * give again, the end of a close). The loop keeps no timer of its own. */
static uint64_t conn_deadline(const conn_t *c) {
    return c->st == ST_HTTP ? http_info(c).timeout_ms : link_info(c).timeout_ms;
}

/* Settles one connection: a link whose deadline came is run (heartbeat
 * timeouts, revocations, slow consumers, output held back that the socket
 * has room for again, the end of a closing link's time), then what is
 * pending is written and a finished connection freed; a live one is
 * watched anew, its deadline joins next_due, and one with a request to
 * take stays in the turn's list (the backlog). */
/* The settled connections left with a request to take (the backlog),
 * gathered during a sweep and given to the round again. */
static conn_t **held;
static size_t nheld, held_cap;

static void conn_settle(const loop_t *L, conn_t *c, uint64_t mono) {
    c->dirty = 0;
    if (c->st == ST_GATEWAY && c->link && link_info(c).timeout_ms <= mono) botspace_gateway_link_handle_timeout(c->link, mono);
    if (conn_done(c, L, mono)) {
        /* Out of conns (the last takes its place) and freed. */
        conn_t *last = conns[--nconns];
        last->idx = c->idx;
        conns[c->idx] = last;
        conn_free(c);
        return;
    }
    conn_watch(c);
    uint64_t d = conn_deadline(c);
    if (d < next_due) next_due = d;
    if (has_request(c)) {
        if (nheld == held_cap) {
            held_cap = held_cap ? held_cap * 2 : 64;
            held = xrealloc(held, held_cap * sizeof *held);
        }
        held[nheld++] = c;
    }
}

/* Settles the turn's connections, or every one when the earliest deadline
 * came (or at a stop); the turn's list then holds the backlog only. */
static void sweep_conns(loop_t *L, uint64_t mono) {
    size_t n = ndirty;
    ndirty = 0;
    if (L->stopping || mono >= next_due) {
        for (size_t i = 0; i < n; i++) dirty[i]->dirty = 0;
        next_due = BOTSPACE_NO_DEADLINE;
        /* From the end: a freed connection's place takes one already settled. */
        for (size_t i = nconns; i-- > 0;) {
            if (i >= nconns) continue;
            conn_settle(L, conns[i], mono);
        }
    } else {
        for (size_t i = 0; i < n; i++) conn_settle(L, dirty[i], mono);
    }
    /* The backlog goes to the round again (its requests were held back). */
    for (size_t i = 0; i < nheld; i++) mark_dirty(held[i]);
    nheld = 0;
    L->backlog = ndirty;
}

/* How long epoll_wait may sleep: the earliest connection deadline, the
 * library's next parked-poll deadline, the end of an accept pause and the
 * webhooks' timers, at most the policy's tick; 0 with a backlog. */
static int turn_timeout(loop_t *L, uint64_t mono, uint64_t now) {
    int64_t timeout = (int64_t)policy.tick_ms;
    if (L->backlog > 0) timeout = 0; /* held back by the turn's backlog cap, not its budget */
    if (!L->accepting && (L->lfd >= 0 || L->afd >= 0)) {
        int64_t left = L->accept_paused_until > mono ? (int64_t)(L->accept_paused_until - mono) : 0;
        if (left < timeout) timeout = left;
    }
    /* The library's next parked-poll deadline (0: an answer is ready). */
    uint64_t pd = BOTSPACE_NO_DEADLINE;
    if (botspace_service_parked_timeout(svc, &pd) == BOTSPACE_STATUS_OK && pd != BOTSPACE_NO_DEADLINE) {
        if (pd <= now) timeout = 0;
        else if ((int64_t)(pd - now) < timeout) timeout = (int64_t)(pd - now);
    }
    if (next_due != BOTSPACE_NO_DEADLINE) {
        if (next_due <= mono) timeout = 0;
        else if ((int64_t)(next_due - mono) < timeout) timeout = (int64_t)(next_due - mono);
    }
    return (int)webhook_poll_timeout(mono, now, timeout);
}

/* Puts the listeners in epoll, or takes them out during an accept pause
 * (level-triggered: a listener left in would report its waiting client at
 * every turn). */
static void watch_listeners(loop_t *L, int on) {
    if (on == L->accepting) return;
    int fds[2] = {L->lfd, L->afd};
    int tags[2] = {TAG_LISTENER, TAG_ADMIN_LISTENER};
    for (int i = 0; i < 2; i++) {
        if (fds[i] < 0) continue;
        if (on) {
            struct epoll_event e;
            memset(&e, 0, sizeof e);
            e.events = EPOLLIN;
            e.data.u64 = TAG_OF(tags[i], fds[i]);
            epoll_ctl(epfd, EPOLL_CTL_ADD, fds[i], &e);
        } else {
            epoll_ctl(epfd, EPOLL_CTL_DEL, fds[i], NULL);
        }
    }
    L->accepting = on;
}

static void drain_wake_pipe(void) {
    char drain[256];
    while (read(wake_pipe[0], drain, sizeof drain) > 0) {
    }
}

/* A descriptor held in reserve (libev's and libuv's trick): out of
 * descriptors, it is given up so that the waiting client can be accepted,
 * served in an evicted connection's room or refused with 503 instead of
 * left hanging. */
static int spare_fd = -1;

static void spare_reopen(void) {
    if (spare_fd < 0) spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void prepare_socket(int fd) {
    set_nonblocking(fd);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* An accept error (EMFILE and the like): the library's admission says
 * whom to evict, whether the spare lets the waiting client in, and when to
 * accept again (the listeners leave epoll until then); it says the error
 * in the log, at most once a second with how many. */
static void accept_failed(loop_t *L, int lfd, botspace_listener role, int err, uint64_t mono) {
    const char *text = strerror(err);
    botspace_accept_error kind =
        err == EMFILE || err == ENFILE ? BOTSPACE_ACCEPT_ERROR_OUT_OF_DESCRIPTORS : BOTSPACE_ACCEPT_ERROR_OTHER;
    botspace_accept_error_action act;
    if (botspace_admission_accept_failed(admission, svc, kind, (const uint8_t *)text, strlen(text), mono, &act) !=
        BOTSPACE_STATUS_OK) {
        L->accept_paused_until = mono + policy.accept_backoff_ms;
        return;
    }
    if (act.evict) {
        conn_close(conn_of(act.evict_id));
        mark_dirty(conn_of(act.evict_id)); /* freed at the next settle */
    }
    if (act.use_spare && spare_fd >= 0) {
        close(spare_fd);
        spare_fd = -1;
        int fd = accept(lfd, NULL, NULL);
        if (fd >= 0) {
            if (act.evict) {
                prepare_socket(fd);
                add_conn(fd, role, mono, 0);
            } else {
                refuse_now(fd); /* out of descriptors: no linger */
            }
        }
        spare_reopen();
    }
    L->accept_paused_until = act.resume_at_ms;
}

/* Accepts every pending connection of one listener; the library's
 * admission decides what each gets. */
static void accept_conns(loop_t *L, int lfd, botspace_listener role, uint64_t mono) {
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue; /* that one client gave up */
            if (errno != EAGAIN && errno != EWOULDBLOCK) accept_failed(L, lfd, role, errno, mono);
            return;
        }
        prepare_socket(fd);
        /* At the cap, the connection waiting longest for a request makes
         * room; only when every one is busy is the new one refused. */
        botspace_admit ad = {BOTSPACE_ADMIT_KIND_SERVE, 0};
        botspace_admission_admit(admission, svc, nlive, settings.max_connections, &ad);
        switch (ad.kind) {
        case BOTSPACE_ADMIT_KIND_SERVE_AFTER_EVICTING:
            conn_close(conn_of(ad.evict_id));
            mark_dirty(conn_of(ad.evict_id)); /* freed at the next settle */
            add_conn(fd, role, mono, 0);
            break;
        case BOTSPACE_ADMIT_KIND_REFUSE_LINGERING:
            add_conn(fd, role, mono, 1);
            break;
        case BOTSPACE_ADMIT_KIND_REFUSE_NOW:
            refuse_now(fd);
            break;
        default:
            add_conn(fd, role, mono, 0);
            break;
        }
    }
}

/* Writes and reads on a connection epoll reported. */
static void serve_ready(conn_t *c, uint32_t re, uint64_t mono) {
    if (c->fd < 0) return; /* closed earlier this turn (evicted) */
    mark_dirty(c);
    if ((re & EPOLLOUT) && conn_flush(c, mono) != 0) {
        conn_close(c);
        return;
    }
    if (re & (EPOLLIN | EPOLLHUP | EPOLLERR)) conn_read(c, mono);
    if (c->fd < 0 || c->peer_eof) return;
    /* A parked poll's client closed its side: it is gone (the library
     * closes the connection and this cancels its poll), read or not what
     * it sent behind the poll. */
    if ((re & (EPOLLRDHUP | EPOLLHUP)) && c->parked) {
        conn_peer_closed(c, mono);
        return;
    }
    /* Nothing can come of a socket in error or hung up on both sides that
     * the connection does not read: reported again at every turn, it would
     * keep the loop from sleeping. */
    if (re & EPOLLERR) conn_close(c);
    else if ((re & EPOLLHUP) && !conn_wants_input(c)) conn_peer_closed(c, mono);
}

/* One turn: timers and wake-ups, writes and clean-up, epoll_wait, reads,
 * then one group commit for every request that is ready. 0 to go on. */
static int loop_turn(loop_t *L) {
    uint64_t mono = mono_ms();
    uint64_t now = svc_now();
    if (stop_requested && !L->stopping) begin_stop(L, mono);
    run_woken_gateways();
    serve_parked(L->stopping ? UINT64_MAX : now);
    if (!L->stopping) webhook_turn(now);
    sweep_conns(L, mono);
    if (L->stopping && nconns == 0) return 1;
    watch_listeners(L, !L->stopping && mono >= L->accept_paused_until);
    int timeout = turn_timeout(L, mono, now);
    int n = epoll_wait(epfd, L->events, MAX_EVENTS, timeout);
    if (n < 0) {
        if (errno == EINTR) return 0;
        perror("epoll_wait");
        return 1;
    }
    mono = mono_ms();
    int curl_events = 0, accept_public = 0, accept_admin = 0;
    for (int i = 0; i < n; i++) {
        uint64_t tag = L->events[i].data.u64;
        uint32_t re = L->events[i].events;
        switch ((int)(tag & 7)) {
        case 0:
            serve_ready((conn_t *)L->events[i].data.ptr, re, mono);
            break;
        case TAG_WAKE:
            drain_wake_pipe();
            break;
        case TAG_LISTENER:
            accept_public = 1;
            break;
        case TAG_ADMIN_LISTENER:
            accept_admin = 1;
            break;
        case TAG_CURL: {
            int ev = ((re & EPOLLIN) ? CURL_CSELECT_IN : 0) | ((re & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                     ((re & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
            int running = 0;
            curl_multi_socket_action(wh_multi, (curl_socket_t)(tag >> 3), ev, &running);
            curl_events = 1;
            break;
        }
        case TAG_HOOK:
            wh_plain_event((int)(tag >> 3), re);
            curl_events = 1;
            break;
        default:
            break;
        }
    }
    /* Accepted after the connections' events: a connection evicted to make
     * room is one whose events of this turn were already handled. Without
     * --admin-addr, the one listener serves every path. */
    if (accept_public && L->lfd >= 0)
        accept_conns(L, L->lfd, L->afd >= 0 ? BOTSPACE_LISTENER_PUBLIC : BOTSPACE_LISTENER_ALL, mono);
    if (accept_admin && L->afd >= 0) accept_conns(L, L->afd, BOTSPACE_LISTENER_ADMIN, mono);
    if (curl_events) {
        wh_reap();
        /* A chat's next event goes out now, on the connection just freed. */
        if (!L->stopping) webhook_turn(svc_now());
    }
    serve_http_round();
    return 0;
}

/* ------------------------------------------------------------------------ */
/* main */

/* The wake-up self-pipe, non-blocking at both ends (see on_wake). */
static int open_wake_pipe(void) {
    if (pipe(wake_pipe) != 0) {
        perror("pipe");
        return -1;
    }
    set_nonblocking(wake_pipe[0]);
    set_nonblocking(wake_pipe[1]);
    return 0;
}

/* Opens `svc` as the options say; `secret` gets a generated admin secret
 * ({NULL, 0} when one was given). */
static int open_service(botspace_bytes *secret) {
    if (botspace_server_options_open_service(opts, &svc, secret) == BOTSPACE_STATUS_OK) {
        /* From the start: the demo's token rotation is a line too. */
        botspace_service_set_output_callback(svc, &output, on_library_line, NULL);
        return 0;
    }
    char msg[512];
    size_t n = 0;
    botspace_last_error_message(msg, sizeof msg, &n);
    log_at(LOG_ERROR, "%s", msg);
    return -1;
}

/* Prints the library's start-up lines (botspace_startup_new: from the
 * bound addresses, a generated secret, the manual clock); `base` and
 * `admin_base` get the demo's URLs (a wildcard address made reachable). */
static int announce(int lfd, int afd, const botspace_bytes *secret, botspace_bytes *base, botspace_bytes *admin_base) {
    struct sockaddr_storage pub, adm;
    socklen_t pl = sizeof pub, al = sizeof adm;
    botspace_startup *st = NULL;
    if (getsockname(lfd, (struct sockaddr *)&pub, &pl) != 0 ||
        (afd >= 0 && getsockname(afd, (struct sockaddr *)&adm, &al) != 0)) {
        log_at(LOG_ERROR, "cannot read the bound address: %s", strerror(errno));
        return -1;
    }
    if (botspace_startup_new(&pub, pl, afd >= 0 ? &adm : NULL, afd >= 0 ? al : 0, (const char *)secret->ptr,
                             secret->len, settings.manual_clock, &st) != BOTSPACE_STATUS_OK ||
        botspace_startup_base_urls(st, base, admin_base) != BOTSPACE_STATUS_OK) {
        char msg[512];
        size_t n = 0;
        botspace_last_error_message(msg, sizeof msg, &n);
        log_at(LOG_ERROR, "%s", msg);
        botspace_startup_free(&st);
        return -1;
    }
    botspace_stream stream;
    botspace_bytes line = {NULL, 0};
    while (botspace_startup_next_line(st, &output, wall_ms(), &stream, &line) == BOTSPACE_STATUS_OK && line.len > 0)
        write_line(stream, &line);
    botspace_startup_free(&st);
    return 0;
}

static void install_signal_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Frees everything; SQLite closes and checkpoints its WAL. */
static void shut_down(loop_t *L) {
    for (size_t i = 0; i < nconns; i++) conn_free(conns[i]);
    free(conns);
    botspace_admission_free(&admission);
    botspace_http_round_free(&http_round);
    free(round_conns);
    free(round_steps);
    free(read_buf);
    free(L->events);
    free(dirty);
    free(held);
    if (L->lfd >= 0) close(L->lfd);
    if (L->afd >= 0) close(L->afd);
    stop_notify_loop();
    webhook_shutdown();
    botspace_service_set_wake_callback(svc, NULL, NULL);
    botspace_service_set_output_callback(svc, NULL, NULL, NULL);
    botspace_service_free(&svc);
    size_t nw = 0;
    char **woken = take_wakes(&nw);
    for (size_t k = 0; k < nw; k++) free(woken[k]);
    free(woken);
    close(wake_pipe[0]);
    close(wake_pipe[1]);
    close(epfd);
    botspace_server_options_free(&opts);
}

int main(int argc, char **argv) {
    /* A closed stdout or stderr (the log reader went away) makes a write
     * fail with EPIPE instead of killing the server. */
    signal(SIGPIPE, SIG_IGN);
    botspace_host_policy_default(&policy);
    if (botspace_http_round_new(&http_round) != BOTSPACE_STATUS_OK) die_oom();
    if (botspace_admission_new(&admission) != BOTSPACE_STATUS_OK) die_oom();
    read_buf = xrealloc(NULL, policy.read_chunk_bytes);
    /* Before curl's sockets join it (webhook_init). */
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) {
        perror("epoll_create1");
        return 1;
    }
    /* Before any thread starts (curl_global_init is not thread-safe). */
    if (webhook_init() != 0) return 1;
    botspace_bytes text = {NULL, 0};
    int32_t code = 2;
    if (botspace_server_options_parse("botspace-server", (const char *const *)argv + 1, (size_t)(argc - 1), &opts,
                                      &text, &code) != BOTSPACE_STATUS_OK)
        return 2;
    if (!opts) { /* --help (stdout, 0) or a usage error (stderr, 2) */
        fwrite(text.ptr, 1, text.len, code == 0 ? stdout : stderr);
        botspace_bytes_free(&text);
        return code;
    }
    /* The soft file limit up to the hard one (as nginx and Go's runtime do);
     * the default cap follows the limit in force. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur < rl.rlim_max) {
            struct rlimit raised = {rl.rlim_max, rl.rlim_max};
            if (setrlimit(RLIMIT_NOFILE, &raised) == 0) rl.rlim_cur = rl.rlim_max;
        }
    } else {
        rl.rlim_cur = (rlim_t)policy.fallback_file_limit;
    }
    botspace_server_options_settings(opts, rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur, &settings);
    /* Outgoing webhook connections take the library's share of the same budget. */
    botspace_webhook_pump_set_connection_budget(wh_pump, settings.max_connections);
    /* The level's variables are the library's rule, the Rust server's too. */
    botspace_output_from_env(settings.log_json, &output);
    /* Before the service opens: a migration's lines are printed as ours. */
    botspace_output_set_records_callback(&output, on_library_line, NULL);
    spare_reopen();
    botspace_bytes secret = {NULL, 0};
    int opened = open_wake_pipe() == 0;
    /* From here a SIGINT or SIGTERM stops the server at its first turn,
     * even one sent while the database opens: a shell starts a background
     * job with SIGINT ignored, so until the handler is in place a stop
     * sent early would be lost. */
    if (opened) install_signal_handlers();
    if (!opened || open_service(&secret) != 0) {
        botspace_server_options_free(&opts);
        return 1;
    }
    loop_t L = {0};
    L.afd = -1;
    L.lfd = listen_on(settings.addr);
    if (L.lfd >= 0 && settings.admin_addr) L.afd = listen_on(settings.admin_addr);
    if (L.lfd < 0 || (settings.admin_addr && L.afd < 0)) {
        if (L.lfd >= 0) close(L.lfd);
        botspace_service_free(&svc);
        botspace_bytes_free(&secret);
        botspace_server_options_free(&opts);
        return 1;
    }
    botspace_bytes base = {NULL, 0}, admin_base = {NULL, 0};
    int started = announce(L.lfd, L.afd, &secret, &base, &admin_base) == 0 &&
                  (!settings.demo || demo(&base, &admin_base, settings.demo_token) == 0);
    botspace_bytes_free(&secret);
    botspace_bytes_free(&base);
    botspace_bytes_free(&admin_base);
    if (!started) {
        close(L.lfd);
        if (L.afd >= 0) close(L.afd);
        botspace_service_free(&svc);
        botspace_server_options_free(&opts);
        return 1;
    }
    L.events = xrealloc(NULL, MAX_EVENTS * sizeof *L.events);
    struct epoll_event we;
    memset(&we, 0, sizeof we);
    we.events = EPOLLIN;
    we.data.u64 = TAG_OF(TAG_WAKE, wake_pipe[0]);
    epoll_ctl(epfd, EPOLL_CTL_ADD, wake_pipe[0], &we);
    say_server_line(BOTSPACE_SERVER_LINE_READY);
    botspace_service_set_wake_callback(svc, on_wake, NULL);
    start_notify_loop();
    while (loop_turn(&L) == 0) {
    }
    shut_down(&L);
    say_server_line(BOTSPACE_SERVER_LINE_STOPPED);
    return 0;
}
