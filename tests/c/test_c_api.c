/*
 * Tests of the botspace C ABI (include/botspace.h):
 *
 *  1. the shared test vectors (every .json file in tests/vectors, format in
 *     tests/vectors/README.md) run through botspace_service_handle_request;
 *  2. every function with every NULL argument, zero lengths, invalid
 *     configurations, outputs untouched on failure, double frees guarded by
 *     the documented rules, per-thread error messages;
 *  3. framing, batches, the gateway (accept, feed, poll, deadlines, wake-ups,
 *     close codes 4004 and 4009) and a gateway outliving its service;
 *  4. 8 pthreads hammering one service.
 *
 *   test_c_api VECTORS_DIR
 *
 * Built with -Wall -Wextra -Wpedantic -Werror; run plain, under
 * AddressSanitizer+UBSan and under valgrind by scripts/test-c.sh. Prints
 * one line per check and a closing `N passed, M failed`.
 * BOTSPACE_TEST_ITERS sets the per-thread iterations of the hammer test.
 */
#define _POSIX_C_SOURCE 200809L

#include "botspace.h"
#include "json.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static int passed, failed;

static void check(int ok, const char *name, const char *fmt, ...) {
    if (ok) {
        passed++;
        printf("ok - %s\n", name);
    } else {
        failed++;
        printf("FAIL - %s", name);
        if (fmt) {
            va_list ap;
            va_start(ap, fmt);
            fputs(": ", stdout);
            vprintf(fmt, ap);
            va_end(ap);
        }
        putchar('\n');
    }
    fflush(stdout);
}

#define CHECK(cond, name) check((cond), (name), "%s (line %d)", #cond, __LINE__)

static const char ADMIN_SECRET[] = "vector-admin-secret-0001";
static const char BASE_CONFIG[] = "{\"database\":\":memory:\",\"admin_secret\":\"vector-admin-secret-0001\",\"clock\":\"manual\"}";
static const char UNLIMITED_CONFIG[] =
    "{\"database\":\":memory:\",\"admin_secret\":\"vector-admin-secret-0001\",\"clock\":\"manual\","
    "\"limits\":{\"free\":{},\"standard\":{},\"official\":{}}}";

static char *last_error(void) {
    static _Thread_local char buf[1024];
    size_t n = 0;
    buf[0] = 0;
    botspace_last_error_message(buf, sizeof buf, &n);
    return buf;
}

static botspace_service *open_service(const char *cfg) {
    botspace_service *s = NULL;
    botspace_status st = botspace_service_open((const uint8_t *)cfg, strlen(cfg), &s);
    if (st != BOTSPACE_STATUS_OK) {
        fprintf(stderr, "open failed: %s\n", last_error());
        abort();
    }
    return s;
}

/* ------------------------------------------------------------------------ */
/* HTTP responses */

typedef struct {
    int status;
    sbuf head; /* header lines, NUL-terminated */
    char *body;
    size_t body_len;
} response;

/* The last library line the log callback got. */
static struct {
    int calls, level;
    char text[256], json[512];
} last_line;

static void on_line(void *ud, int32_t level, const char *text, size_t text_len, const char *json, size_t json_len) {
    (void)ud;
    last_line.calls++;
    last_line.level = level;
    snprintf(last_line.text, sizeof last_line.text, "%.*s", (int)text_len, text);
    snprintf(last_line.json, sizeof last_line.json, "%.*s", (int)json_len, json);
}

static void response_free(response *r) {
    sb_free(&r->head);
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* Parses a whole response; 0 with a message in err on a malformed one. */
static int parse_response(const uint8_t *raw, size_t n, response *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    const uint8_t *end = NULL;
    for (size_t i = 0; i + 3 < n; i++)
        if (memcmp(raw + i, "\r\n\r\n", 4) == 0) {
            end = raw + i;
            break;
        }
    if (!end) {
        snprintf(err, errlen, "response has no end of headers");
        return 0;
    }
    if (n < 12 || memcmp(raw, "HTTP/1.1 ", 9) != 0) {
        snprintf(err, errlen, "bad status line");
        return 0;
    }
    r->status = (raw[9] - '0') * 100 + (raw[10] - '0') * 10 + (raw[11] - '0');
    sb_add(&r->head, raw, (size_t)(end - raw));
    r->body_len = n - (size_t)(end + 4 - raw);
    r->body = malloc(r->body_len + 1);
    memcpy(r->body, end + 4, r->body_len);
    r->body[r->body_len] = 0;
    return 1;
}

/* The value of a response header (case-insensitive name), copied into out. */
static int header_value(const response *r, const char *name, char *out, size_t outlen) {
    const char *p = strstr(r->head.p, "\r\n");
    size_t nl = strlen(name);
    while (p) {
        p += 2;
        const char *e = strstr(p, "\r\n");
        size_t ll = e ? (size_t)(e - p) : strlen(p);
        const char *colon = memchr(p, ':', ll);
        if (colon && (size_t)(colon - p) == nl && strncasecmp(p, name, nl) == 0) {
            const char *v = colon + 1;
            while (*v == ' ' || *v == '\t') v++;
            size_t vl = (size_t)(p + ll - v);
            while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t')) vl--;
            if (vl >= outlen) vl = outlen - 1;
            memcpy(out, v, vl);
            out[vl] = 0;
            return 1;
        }
        p = e;
    }
    return 0;
}

/* Handles a request given as a string; parses the response. */
static int request(botspace_service *s, const char *req, size_t len, response *r) {
    botspace_bytes out = {NULL, 0};
    memset(r, 0, sizeof *r);
    if (botspace_service_handle_request(s, (const uint8_t *)req, len, &out) != BOTSPACE_STATUS_OK) return 0;
    char err[128];
    int ok = parse_response(out.ptr, out.len, r, err, sizeof err);
    botspace_bytes_free(&out);
    return ok;
}

/* One request through botspace_service_handle: `*out` gets its answer and
 * `*id` 0, or `*out` {NULL, 0} and `*id` its parked poll. */
static botspace_status handle_one(botspace_service *s, const char *req, size_t len, const char *peer, size_t peer_len,
                                  uint32_t flags, uint64_t now, botspace_bytes *out, uint64_t *id) {
    botspace_incoming in = {(const uint8_t *)req, len, peer, peer_len, flags};
    botspace_handled h = {{NULL, 0}, 0};
    botspace_status st = botspace_service_handle(s, &in, 1, now, &h);
    if (st == BOTSPACE_STATUS_OK) {
        *out = h.response;
        *id = h.poll_id;
    }
    return st;
}

static void build_post(sbuf *b, const char *path, const char *auth, const char *body) {
    sb_fmt(b, "POST %s HTTP/1.1\r\nHost: botspace\r\n", path);
    if (auth) sb_fmt(b, "Authorization: %s\r\n", auth);
    if (body) sb_fmt(b, "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
    else sb_str(b, "\r\n");
}

/* POSTs and returns the parsed JSON body (NULL unless 200 and ok). */
static jval *post_json(botspace_service *s, const char *path, const char *auth, const char *body, int *status) {
    sbuf b = {0};
    build_post(&b, path, auth, body);
    response r;
    jval *v = NULL;
    if (request(s, b.p, b.len, &r)) {
        if (status) *status = r.status;
        char err[128];
        v = json_parse(r.body, r.body_len, err, sizeof err);
        response_free(&r);
    }
    sb_free(&b);
    return v;
}

static jval *admin(botspace_service *s, const char *method, const char *body) {
    char path[128];
    snprintf(path, sizeof path, "/admin/%s", method);
    int status = 0;
    jval *v = post_json(s, path, "Admin vector-admin-secret-0001", body, &status);
    if (!v || status != 200) {
        fprintf(stderr, "admin %s failed (%d)\n", method, status);
        abort();
    }
    return v;
}

static char *dup_str(const jval *v) {
    if (!v || v->t != J_STR) return NULL;
    char *s = malloc(v->slen + 1);
    memcpy(s, v->s, v->slen + 1);
    return s;
}

typedef struct {
    char *user, *bot, *token, *chat;
} world;

static void world_make(botspace_service *s, world *w, const char *tier) {
    jval *u = admin(s, "createUser", "{\"display_name\":\"Ann\"}");
    w->user = dup_str(json_get(json_get(u, "result"), "id"));
    json_free(u);
    char body[256];
    /* Handles are unique: each world's bot gets its own (worlds are made
     * on several threads at once). */
    static atomic_uint worlds;
    snprintf(body, sizeof body, "{\"display_name\":\"Echo\",\"handle\":\"echo_bot_%u\",\"quota_tier\":\"%s\"}",
             atomic_fetch_add(&worlds, 1u), tier);
    jval *b = admin(s, "createBot", body);
    w->bot = dup_str(json_get(json_get(json_get(b, "result"), "bot"), "id"));
    w->token = dup_str(json_get(json_get(b, "result"), "token"));
    json_free(b);
    snprintf(body, sizeof body, "{\"user_id\":\"%s\",\"bot_id\":\"%s\"}", w->user, w->bot);
    jval *c = admin(s, "startBot", body);
    w->chat = dup_str(json_get(json_get(c, "result"), "id"));
    json_free(c);
}

static void world_free(world *w) {
    free(w->user);
    free(w->bot);
    free(w->token);
    free(w->chat);
    memset(w, 0, sizeof *w);
}

/* ------------------------------------------------------------------------ */
/* 1. Test vectors */

typedef struct {
    char **names;
    jval **vals;
    size_t n;
} vars_t;

static void vars_set(vars_t *vs, const char *name, const jval *v) {
    for (size_t i = 0; i < vs->n; i++)
        if (strcmp(vs->names[i], name) == 0) {
            json_free(vs->vals[i]);
            vs->vals[i] = json_clone(v);
            return;
        }
    vs->names = realloc(vs->names, (vs->n + 1) * sizeof *vs->names);
    vs->vals = realloc(vs->vals, (vs->n + 1) * sizeof *vs->vals);
    vs->names[vs->n] = strdup(name);
    vs->vals[vs->n] = json_clone(v);
    vs->n++;
}

static const jval *vars_get(const vars_t *vs, const char *name, size_t nlen) {
    for (size_t i = 0; i < vs->n; i++)
        if (strlen(vs->names[i]) == nlen && memcmp(vs->names[i], name, nlen) == 0) return vs->vals[i];
    return NULL;
}

static void vars_free(vars_t *vs) {
    for (size_t i = 0; i < vs->n; i++) {
        free(vs->names[i]);
        json_free(vs->vals[i]);
    }
    free(vs->names);
    free(vs->vals);
    memset(vs, 0, sizeof *vs);
}

static const char *memfind(const char *h, size_t hn, const char *needle) {
    size_t nn = strlen(needle);
    if (nn > hn) return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (memcmp(h + i, needle, nn) == 0) return h + i;
    return NULL;
}

/* Replaces placeholders in every string of v (see tests/vectors/README.md). */
static jval *subst(const jval *v, const vars_t *vars, sbuf *err) {
    if (v->t == J_STR) {
        const char *s = v->s;
        size_t n = v->slen;
        if (n == 5 && memcmp(s, "{{*}}", 5) == 0) return json_clone(v);
        if (n >= 4 && memcmp(s, "{{", 2) == 0 && memcmp(s + n - 2, "}}", 2) == 0 && !memfind(s + 2, n - 4, "{{") &&
            !memfind(s + 2, n - 4, "}}")) {
            const jval *x = vars_get(vars, s + 2, n - 4);
            if (!x) {
                sb_fmt(err, "runner error: placeholder %s names no saved value", s);
                return NULL;
            }
            return json_clone(x);
        }
        sbuf out = {0};
        size_t i = 0;
        while (i < n) {
            const char *open = memfind(s + i, n - i, "{{");
            if (!open) break;
            const char *close = memfind(open + 2, (size_t)(s + n - open - 2), "}}");
            if (!close) break;
            sb_add(&out, s + i, (size_t)(open - s - i));
            const char *name = open + 2;
            size_t nl = (size_t)(close - name);
            if (nl == 1 && name[0] == '*') {
                sb_str(&out, "{{*}}");
            } else {
                const jval *x = vars_get(vars, name, nl);
                if (!x) {
                    sb_fmt(err, "runner error: placeholder {{%.*s}} names no saved value", (int)nl, name);
                    sb_free(&out);
                    return NULL;
                }
                if (x->t == J_STR) sb_add(&out, x->s, x->slen);
                else json_write(&out, x);
            }
            i = (size_t)(close + 2 - s);
        }
        sb_add(&out, s + i, n - i);
        jval *r = json_new_str(out.p ? out.p : "", out.len);
        sb_free(&out);
        return r;
    }
    if (v->t == J_ARR || v->t == J_OBJ) {
        jval *r = json_new(v->t);
        for (size_t i = 0; i < v->n; i++) {
            jval *x = subst(v->items[i], vars, err);
            if (!x) {
                json_free(r);
                return NULL;
            }
            if (v->t == J_OBJ) {
                json_set(r, v->keys[i], x);
            } else {
                r->items = realloc(r->items, (r->n + 1) * sizeof *r->items);
                r->items[r->n++] = x;
            }
        }
        return r;
    }
    return json_clone(v);
}

/* Indexes of an object's keys in bytewise order (serde_json's iteration). */
static size_t *sorted_keys(const jval *o) {
    size_t *ord = malloc((o->n + 1) * sizeof *ord);
    for (size_t i = 0; i < o->n; i++) ord[i] = i;
    for (size_t i = 1; i < o->n; i++) {
        size_t k = ord[i], j = i;
        while (j > 0 && strcmp(o->keys[ord[j - 1]], o->keys[k]) > 0) {
            ord[j] = ord[j - 1];
            j--;
        }
        ord[j] = k;
    }
    return ord;
}

/* The request bytes exactly as the README (and tests/vectors.rs) builds them. */
static int build_request(const jval *req, sbuf *out, sbuf *err) {
    const jval *m = json_get(req, "method");
    const jval *path = json_get(req, "path");
    if (!path || path->t != J_STR) {
        sb_str(err, "request has no path");
        return 0;
    }
    sb_fmt(out, "%s %s HTTP/1.1\r\nHost: botspace\r\n", m && m->t == J_STR ? m->s : "POST", path->s);
    int has_ct = 0;
    const jval *h = json_get(req, "headers");
    if (h) {
        if (h->t != J_OBJ) {
            sb_str(err, "headers is not an object");
            return 0;
        }
        size_t *ord = sorted_keys(h);
        for (size_t i = 0; i < h->n; i++) {
            const jval *v = h->items[ord[i]];
            if (v->t != J_STR) {
                sb_fmt(err, "header %s is not a string", h->keys[ord[i]]);
                free(ord);
                return 0;
            }
            if (strcasecmp(h->keys[ord[i]], "content-type") == 0) has_ct = 1;
            sb_str(out, h->keys[ord[i]]);
            sb_str(out, ": ");
            sb_add(out, v->s, v->slen);
            sb_str(out, "\r\n");
        }
        free(ord);
    }
    const jval *ct = json_get(req, "content_type");
    if (!has_ct && !(ct && ct->t == J_BOOL && !ct->b)) sb_str(out, "Content-Type: application/json\r\n");
    const jval *raw = json_get(req, "raw_body");
    const jval *body = json_get(req, "body");
    if (raw) {
        if (raw->t != J_STR) {
            sb_str(err, "raw_body is not a string");
            return 0;
        }
        sb_fmt(out, "Content-Length: %zu\r\n\r\n", raw->slen);
        sb_add(out, raw->s, raw->slen);
    } else if (body) {
        sbuf b = {0};
        json_write(&b, body);
        sb_fmt(out, "Content-Length: %zu\r\n\r\n", b.len);
        sb_add(out, b.p, b.len);
        sb_free(&b);
    } else {
        sb_str(out, "\r\n");
    }
    return 1;
}

/* Whether actual matches expected ("{{*}}" matches anything; objects must
 * have exactly the same keys). On mismatch, describes where. */
static int matches(const jval *e, const jval *a, sbuf *path, sbuf *why) {
    if (e->t == J_STR && e->slen == 5 && memcmp(e->s, "{{*}}", 5) == 0) return 1;
    size_t mark = path->len;
    if (e->t == J_OBJ && a->t == J_OBJ) {
        for (size_t i = 0; i < e->n; i++)
            if (!json_get(a, e->keys[i])) {
                sb_fmt(why, "%s.%s: missing", path->p, e->keys[i]);
                return 0;
            }
        for (size_t i = 0; i < a->n; i++)
            if (!json_get(e, a->keys[i])) {
                sb_fmt(why, "%s.%s: unexpected key", path->p, a->keys[i]);
                return 0;
            }
        for (size_t i = 0; i < e->n; i++) {
            sb_fmt(path, ".%s", e->keys[i]);
            int ok = matches(e->items[i], json_get(a, e->keys[i]), path, why);
            path->len = mark;
            path->p[mark] = 0;
            if (!ok) return 0;
        }
        return 1;
    }
    if (e->t == J_ARR && a->t == J_ARR) {
        if (e->n != a->n) {
            sb_fmt(why, "%s: array of %zu elements, expected %zu", path->p, a->n, e->n);
            return 0;
        }
        for (size_t i = 0; i < e->n; i++) {
            sb_fmt(path, ".%zu", i);
            int ok = matches(e->items[i], a->items[i], path, why);
            path->len = mark;
            path->p[mark] = 0;
            if (!ok) return 0;
        }
        return 1;
    }
    if (json_equal(e, a)) return 1;
    sbuf ex = {0}, ac = {0};
    json_write(&ex, e);
    json_write(&ac, a);
    sb_fmt(why, "%s: expected %.200s, got %.200s", path->p, ex.p, ac.p);
    sb_free(&ex);
    sb_free(&ac);
    return 0;
}

/* Follows `result.bot.id` / `result.0.update_id`. */
static const jval *at_path(const jval *v, const char *path) {
    char *copy = strdup(path);
    const jval *cur = v;
    char *save = NULL;
    for (char *seg = strtok_r(copy, ".", &save); seg && cur; seg = strtok_r(NULL, ".", &save)) {
        if (cur->t == J_ARR) {
            char *endp;
            unsigned long idx = strtoul(seg, &endp, 10);
            cur = (*endp == 0 && *seg && idx < cur->n) ? cur->items[idx] : NULL;
        } else if (cur->t == J_OBJ) {
            cur = json_get(cur, seg);
        } else {
            cur = NULL;
        }
    }
    free(copy);
    return cur;
}

/* Runs one case; 0 with a description in why on failure. */

static botspace_status gw_round(botspace_gateway *gw, uint64_t now, sbuf *into);

/* Gateway steps of the vectors (tests/vectors/README.md, "Gateway steps"),
 * through the byte-level connection: masked client frames in, server
 * frames decoded. */

typedef struct {
    char *name;
    botspace_gateway *gw;
} vconn;

typedef struct {
    vconn *v;
    size_t n;
} vconns;

static vconn *vconn_find(vconns *cs, const char *name) {
    for (size_t i = 0; i < cs->n; i++)
        if (strcmp(cs->v[i].name, name) == 0) return &cs->v[i];
    return NULL;
}

static void vconn_drop(vconns *cs, const char *name) {
    for (size_t i = 0; i < cs->n; i++)
        if (strcmp(cs->v[i].name, name) == 0) {
            botspace_gateway_free(&cs->v[i].gw);
            free(cs->v[i].name);
            cs->v[i] = cs->v[--cs->n];
            return;
        }
}

static void vconns_free(vconns *cs) {
    while (cs->n > 0) vconn_drop(cs, cs->v[0].name);
    free(cs->v);
    memset(cs, 0, sizeof *cs);
}

/* A masked client frame of any length. */
static void ws_client_frame(sbuf *out, int opcode, const char *payload, size_t n) {
    unsigned char hdr[14];
    size_t h = 0;
    hdr[h++] = (unsigned char)(0x80 | opcode);
    if (n < 126) {
        hdr[h++] = (unsigned char)(0x80 | n);
    } else if (n < 65536) {
        hdr[h++] = 0x80 | 126;
        hdr[h++] = (unsigned char)(n >> 8);
        hdr[h++] = (unsigned char)n;
    } else {
        hdr[h++] = 0x80 | 127;
        for (int k = 7; k >= 0; k--) hdr[h++] = (unsigned char)((uint64_t)n >> (8 * k));
    }
    const unsigned char mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    memcpy(hdr + h, mask, 4);
    h += 4;
    sb_add(out, hdr, h);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)payload[i] ^ mask[i % 4];
        sb_add(out, &c, 1);
    }
}

/* Runs one gateway step at the service's time; 0 with `why` on failure. */
static int gateway_step(botspace_service *svc, vconns *cs, const jval *raw_step, const vars_t *vars, size_t i, sbuf *why) {
    sbuf e = {0};
    jval *step = subst(raw_step, vars, &e);
    if (!step) {
        sb_fmt(why, "step %zu: %s", i, e.p ? e.p : "?");
        sb_free(&e);
        return 0;
    }
    sb_free(&e);
    const jval *kind = json_get(step, "gateway"), *connv = json_get(step, "conn");
    const char *k = kind && kind->t == J_STR ? kind->s : "?";
    const char *name = connv && connv->t == J_STR ? connv->s : "?";
    uint64_t now = 0;
    botspace_service_now_ms(svc, &now);
    int ok = 1;
    vconn *c = vconn_find(cs, name);
    if (strcmp(k, "open") == 0) {
        const jval *tok = json_get(step, "token"), *q = json_get(step, "query");
        const jval *ex = json_get(step, "expect");
        const jval *st = ex ? json_get(ex, "status") : NULL;
        sbuf req = {0};
        sb_fmt(&req,
               "GET /bot/gateway%s HTTP/1.1\r\nHost: botspace\r\nAuthorization: Bot %s\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
               q && q->t == J_STR ? q->s : "", tok && tok->t == J_STR ? tok->s : "");
        botspace_bytes resp = {NULL, 0};
        botspace_gateway *gw = NULL;
        if (c) {
            sb_fmt(why, "step %zu: runner error: %s is still open", i, name);
            ok = 0;
        } else if (botspace_gateway_accept(svc, (const uint8_t *)req.p, req.len, now, &resp, &gw) != BOTSPACE_STATUS_OK) {
            sb_fmt(why, "step %zu: gateway_accept failed: %s", i, last_error());
            ok = 0;
        } else if (gw) {
            if (!st || strcmp(st->s, "101") != 0) {
                sb_fmt(why, "step %zu: %s opened (expected %s)", i, name, st ? st->s : "?");
                botspace_gateway_free(&gw);
                ok = 0;
            } else {
                cs->v = realloc(cs->v, (cs->n + 1) * sizeof *cs->v);
                cs->v[cs->n].name = strdup(name);
                cs->v[cs->n].gw = gw;
                cs->n++;
            }
        } else {
            response r;
            char err[256];
            memset(&r, 0, sizeof r);
            char got[16] = "?";
            if (!parse_response(resp.ptr, resp.len, &r, err, sizeof err)) {
                sb_fmt(why, "step %zu: refusal: %s", i, err);
                ok = 0;
            } else {
                snprintf(got, sizeof got, "%d", r.status);
                if (!st || strcmp(st->s, got) != 0) {
                    sb_fmt(why, "step %zu: open answered %s (expected %s): %.300s", i, got, st ? st->s : "?", r.body ? r.body : "");
                    ok = 0;
                }
                const jval *eb = json_get(ex, "body");
                jval *body = r.body ? json_parse(r.body, r.body_len, err, sizeof err) : NULL;
                if (ok && eb) {
                    sbuf path = {0}, m = {0};
                    sb_str(&path, "body");
                    if (!body || !matches(eb, body, &path, &m)) {
                        sb_fmt(why, "step %zu: refusal body mismatch at %s: %.300s", i, m.p ? m.p : "(not JSON)", r.body);
                        ok = 0;
                    }
                    sb_free(&path);
                    sb_free(&m);
                }
                json_free(body);
                const jval *eh = json_get(ex, "headers");
                for (size_t h = 0; ok && eh && eh->t == J_OBJ && h < eh->n; h++) {
                    char v[512];
                    int have = header_value(&r, eh->keys[h], v, sizeof v);
                    if (eh->items[h]->t == J_NULL ? have
                                                  : (!have || eh->items[h]->t != J_STR || strcmp(v, eh->items[h]->s) != 0)) {
                        sb_fmt(why, "step %zu: refusal header %s", i, eh->keys[h]);
                        ok = 0;
                    }
                }
            }
            response_free(&r);
        }
        botspace_bytes_free(&resp);
        sb_free(&req);
    } else if (!c) {
        sb_fmt(why, "step %zu: runner error: no open connection named %s", i, name);
        ok = 0;
    } else if (strcmp(k, "text") == 0 || strcmp(k, "binary") == 0) {
        const jval *t = json_get(step, "text");
        sbuf f = {0};
        if (strcmp(k, "text") == 0) ws_client_frame(&f, 1, t && t->t == J_STR ? t->s : "", t && t->t == J_STR ? t->slen : 0);
        else ws_client_frame(&f, 2, "\x01\x02", 2);
        ok = botspace_gateway_handle_input(c->gw, (const uint8_t *)f.p, f.len, now) == BOTSPACE_STATUS_OK;
        if (!ok) sb_fmt(why, "step %zu: handle_input failed", i);
        sb_free(&f);
    } else if (strcmp(k, "drop") == 0) {
        vconn_drop(cs, name);
    } else if (strcmp(k, "poll") == 0) {
        sbuf got = {0};
        gw_round(c->gw, now, &got);
        const jval *ex = json_get(step, "expect");
        const jval *frames = ex ? json_get(ex, "frames") : NULL;
        const jval *eclose = ex ? json_get(ex, "close") : NULL;
        const jval *eev = ex ? json_get(ex, "closed_event") : NULL;
        size_t nf = 0, at = 0;
        int close_code = -1;
        char close_reason[128] = "";
        const uint8_t *p = (const uint8_t *)got.p;
        while (ok && at + 2 <= got.len) {
            int op = p[at] & 0x0f;
            size_t len = p[at + 1] & 0x7f, off = 2;
            if (len == 126) {
                len = ((size_t)p[at + 2] << 8) | p[at + 3];
                off = 4;
            } else if (len == 127) {
                len = 0;
                for (int b = 0; b < 8; b++) len = (len << 8) | p[at + 2 + b];
                off = 10;
            }
            if ((p[at] & 0x80) == 0 || (p[at + 1] & 0x80) != 0 || at + off + len > got.len) {
                sb_fmt(why, "step %zu: a malformed server frame", i);
                ok = 0;
                break;
            }
            const char *pl = (const char *)p + at + off;
            if (close_code >= 0) {
                sb_fmt(why, "step %zu: a frame after the close frame", i);
                ok = 0;
            } else if (op == 1) {
                char err[256];
                jval *v = json_parse(pl, len, err, sizeof err);
                const jval *want = frames && frames->t == J_ARR && nf < frames->n ? frames->items[nf] : NULL;
                sbuf path = {0}, m = {0};
                sb_fmt(&path, "frames[%zu]", nf);
                if (!v) {
                    sb_fmt(why, "step %zu: message %zu is not JSON: %s", i, nf, err);
                    ok = 0;
                } else if (!want) {
                    sb_fmt(why, "step %zu: unexpected message %zu: %.300s", i, nf, pl);
                    ok = 0;
                } else if (!matches(want, v, &path, &m)) {
                    sb_fmt(why, "step %zu: mismatch at %s: %.400s", i, m.p, pl);
                    ok = 0;
                }
                sb_free(&path);
                sb_free(&m);
                json_free(v);
                nf++;
            } else if (op == 8 && len >= 2) {
                close_code = ((unsigned char)pl[0] << 8) | (unsigned char)pl[1];
                size_t rl = len - 2 < sizeof close_reason - 1 ? len - 2 : sizeof close_reason - 1;
                memcpy(close_reason, pl + 2, rl);
                close_reason[rl] = 0;
            } else {
                sb_fmt(why, "step %zu: an unexpected frame (opcode %d)", i, op);
                ok = 0;
            }
            at += off + len;
        }
        size_t want_n = frames && frames->t == J_ARR ? frames->n : 0;
        if (ok && nf != want_n) {
            sb_fmt(why, "step %zu: %zu messages (expected %zu)", i, nf, want_n);
            ok = 0;
        }
        if (ok) {
            const jval *ec = eclose ? json_get(eclose, "code") : NULL, *er = eclose ? json_get(eclose, "reason") : NULL;
            char code[16];
            snprintf(code, sizeof code, "%d", close_code);
            if (eclose ? (close_code < 0 || !ec || strcmp(ec->s, code) != 0 || !er || strcmp(er->s, close_reason) != 0)
                       : close_code >= 0) {
                sb_fmt(why, "step %zu: close %d %s (expected %s %s)", i, close_code, close_reason, ec ? ec->s : "none",
                       er ? er->s : "");
                ok = 0;
            }
        }
        if (ok) {
            botspace_gateway_event ev;
            botspace_gateway_poll_event(c->gw, &ev);
            const jval *ec = eev ? json_get(eev, "code") : NULL, *er = eev ? json_get(eev, "reason") : NULL;
            char code[16];
            snprintf(code, sizeof code, "%u", (unsigned)ev.close_code);
            int have = ev.kind == BOTSPACE_GATEWAY_EVENT_KIND_CLOSED;
            if (eev ? (!have || !ec || strcmp(ec->s, code) != 0 || !er || strcmp(er->s, ev.reason) != 0) : have) {
                sb_fmt(why, "step %zu: closed_event %s %s (expected %s %s)", i, have ? code : "none", have ? ev.reason : "",
                       ec ? ec->s : "none", er ? er->s : "");
                ok = 0;
            }
        }
        sb_free(&got);
    } else {
        sb_fmt(why, "step %zu: runner error: unknown gateway step %s", i, k);
        ok = 0;
    }
    json_free(step);
    return ok;
}

static int run_case(const jval *c, sbuf *why) {
    char err[256];
    jval *cfg = json_parse(BASE_CONFIG, strlen(BASE_CONFIG), err, sizeof err);
    const jval *extra = json_get(c, "config");
    if (extra) {
        if (extra->t != J_OBJ) {
            sb_str(why, "config is not an object");
            json_free(cfg);
            return 0;
        }
        for (size_t i = 0; i < extra->n; i++) json_set(cfg, extra->keys[i], json_clone(extra->items[i]));
    }
    sbuf cfgtext = {0};
    json_write(&cfgtext, cfg);
    json_free(cfg);
    botspace_service *svc = NULL;
    botspace_status st = botspace_service_open((const uint8_t *)cfgtext.p, cfgtext.len, &svc);
    sb_free(&cfgtext);
    if (st != BOTSPACE_STATUS_OK) {
        sb_fmt(why, "runner error: service did not open: %s", last_error());
        return 0;
    }
    vars_t vars = {0};
    vconns conns = {0};
    jval *secret = json_new_str(ADMIN_SECRET, strlen(ADMIN_SECRET));
    vars_set(&vars, "admin_secret", secret);
    json_free(secret);
    const jval *steps = json_get(c, "steps");
    int ok = 1;
    if (!steps || steps->t != J_ARR) {
        sb_str(why, "case has no steps");
        ok = 0;
    }
    for (size_t i = 0; ok && i < steps->n; i++) {
        const jval *step = steps->items[i];
        sbuf e = {0}, reqb = {0};
        jval *req = NULL, *expect = NULL, *body = NULL;
        response r;
        memset(&r, 0, sizeof r);
        if (json_get(step, "gateway")) {
            ok = gateway_step(svc, &conns, step, &vars, i, why);
            continue;
        }
        const jval *rq = json_get(step, "request");
        if (!rq) {
            sb_fmt(why, "step %zu: no request", i);
            ok = 0;
            goto next;
        }
        req = subst(rq, &vars, &e);
        if (!req || !build_request(req, &reqb, &e)) {
            sb_fmt(why, "step %zu: %s", i, e.p ? e.p : "?");
            ok = 0;
            goto next;
        }
        botspace_bytes raw = {NULL, 0};
        uint64_t no_poll = 0;
        /* "peer": the client the host names (the login throttle is per client). */
        const jval *peer = json_get(req, "peer");
        botspace_status hst = peer && peer->t == J_STR
                                  ? handle_one(svc, reqb.p, reqb.len, peer->s, peer->slen, BOTSPACE_INCOMING_AT_ONCE, 0, &raw,
                                               &no_poll)
                                  : botspace_service_handle_request(svc, (const uint8_t *)reqb.p, reqb.len, &raw);
        if (hst != BOTSPACE_STATUS_OK) {
            sb_fmt(why, "step %zu: handle_request failed: %s", i, last_error());
            ok = 0;
            goto next;
        }
        int parsed = parse_response(raw.ptr, raw.len, &r, err, sizeof err);
        botspace_bytes_free(&raw);
        if (!parsed) {
            sb_fmt(why, "step %zu: %s", i, err);
            ok = 0;
            goto next;
        }
        char cl[32];
        if (!header_value(&r, "content-length", cl, sizeof cl) || strtoul(cl, NULL, 10) != r.body_len) {
            sb_fmt(why, "step %zu: Content-Length does not match the body of %zu bytes", i, r.body_len);
            ok = 0;
            goto next;
        }
        const jval *ex = json_get(step, "expect");
        if (ex) {
            expect = subst(ex, &vars, &e);
            if (!expect) {
                sb_fmt(why, "step %zu: %s", i, e.p);
                ok = 0;
                goto next;
            }
        }
        body = json_parse(r.body, r.body_len, err, sizeof err);
        const jval *st_exp = expect ? json_get(expect, "status") : NULL;
        if (st_exp) {
            char got[16];
            snprintf(got, sizeof got, "%d", r.status);
            if (st_exp->t != J_NUM || strcmp(st_exp->s, got) != 0) {
                sb_fmt(why, "step %zu: status %d (expected %s)", i, r.status, st_exp->t == J_NUM ? st_exp->s : "?");
                ok = 0;
                goto next;
            }
        }
        const jval *eb = expect ? json_get(expect, "body") : NULL;
        if (eb) {
            if (!body) {
                sb_fmt(why, "step %zu: response body is not JSON: %s", i, err);
                ok = 0;
                goto next;
            }
            sbuf path = {0}, m = {0};
            sb_str(&path, "body");
            if (!matches(eb, body, &path, &m)) {
                sb_fmt(why, "step %zu: body mismatch at %s", i, m.p);
                ok = 0;
            }
            sb_free(&path);
            sb_free(&m);
            if (!ok) goto next;
        }
        const jval *eh = expect ? json_get(expect, "headers") : NULL;
        if (eh && eh->t == J_OBJ) {
            for (size_t k = 0; k < eh->n; k++) {
                char got[512];
                int have = header_value(&r, eh->keys[k], got, sizeof got);
                const jval *want = eh->items[k];
                /* null: the header must be absent */
                if (want->t == J_NULL) {
                    if (have) {
                        sb_fmt(why, "step %zu: header %s: expected none, got %s", i, eh->keys[k], got);
                        ok = 0;
                        goto next;
                    }
                    continue;
                }
                if (!have || want->t != J_STR || strcmp(want->s, got) != 0) {
                    sb_fmt(why, "step %zu: header %s: expected %s, got %s", i, eh->keys[k], want->t == J_STR ? want->s : "?",
                           have ? got : "(none)");
                    ok = 0;
                    goto next;
                }
            }
        }
        const jval *save = json_get(step, "save");
        if (save && save->t == J_OBJ) {
            if (!body) {
                sb_fmt(why, "step %zu: cannot save from a non-JSON body", i);
                ok = 0;
                goto next;
            }
            for (size_t k = 0; k < save->n; k++) {
                const jval *p = save->items[k];
                const jval *found = p->t == J_STR ? at_path(body, p->s) : NULL;
                if (!found) {
                    sb_fmt(why, "step %zu: save %s: nothing at %s", i, save->keys[k], p->t == J_STR ? p->s : "?");
                    ok = 0;
                    goto next;
                }
                vars_set(&vars, save->keys[k], found);
            }
        }
    next:
        if (!ok) sb_fmt(why, "\n      request: %.600s\n      response: %.600s", reqb.p ? reqb.p : "", r.body ? r.body : "");
        json_free(req);
        json_free(expect);
        json_free(body);
        response_free(&r);
        sb_free(&e);
        sb_free(&reqb);
    }
    vconns_free(&conns);
    vars_free(&vars);
    botspace_service_free(&svc);
    return ok;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    sbuf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) sb_add(&b, chunk, n);
    fclose(f);
    *len = b.len;
    if (!b.p) sb_add(&b, "", 0);
    return b.p;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void test_vectors(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        check(0, "vectors: directory readable", "%s", dir);
        return;
    }
    char **files = NULL;
    size_t nf = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l > 5 && strcmp(de->d_name + l - 5, ".json") == 0) {
            files = realloc(files, (nf + 1) * sizeof *files);
            files[nf++] = strdup(de->d_name);
        }
    }
    closedir(d);
    qsort(files, nf, sizeof *files, cmp_str);
    size_t total_cases = 0;
    for (size_t f = 0; f < nf; f++) {
        char path[4096], name[512], err[256];
        snprintf(path, sizeof path, "%s/%s", dir, files[f]);
        size_t len = 0;
        char *text = read_file(path, &len);
        jval *doc = text ? json_parse(text, len, err, sizeof err) : NULL;
        free(text);
        const jval *ver = json_get(doc, "version");
        const jval *cases = json_get(doc, "cases");
        snprintf(name, sizeof name, "vectors %s: a version 1 file with cases", files[f]);
        check(doc && ver && ver->t == J_NUM && strcmp(ver->s, "1") == 0 && cases && cases->t == J_ARR && cases->n > 0, name,
              "%s", doc ? "bad version or no cases" : err);
        if (!cases || cases->t != J_ARR) {
            json_free(doc);
            free(files[f]);
            continue;
        }
        size_t bad = 0;
        for (size_t i = 0; i < cases->n; i++) {
            const jval *cname = json_get(cases->items[i], "name");
            sbuf why = {0};
            if (!run_case(cases->items[i], &why)) {
                bad++;
                printf("  FAIL %s\n    %s\n", cname && cname->t == J_STR ? cname->s : "<unnamed>", why.p ? why.p : "");
            }
            sb_free(&why);
        }
        total_cases += cases->n;
        snprintf(name, sizeof name, "vectors %s: %zu cases", files[f], cases->n);
        check(bad == 0, name, "%zu of %zu cases failed", bad, cases->n);
        json_free(doc);
        free(files[f]);
    }
    free(files);
    printf("# %zu vector files, %zu cases\n", nf, total_cases);
}

/* ------------------------------------------------------------------------ */
/* 2. The API surface: NULLs, zero lengths, configurations, frees */

static void test_basics(void) {
    const char *v = botspace_version();
    CHECK(v && v[0] >= '0' && v[0] <= '9' && strchr(v, '.'), "version is a dotted number");
    CHECK(strcmp(botspace_status_message(BOTSPACE_STATUS_OK), "ok") == 0, "status message of OK");
    for (uint32_t s = 1; s <= 5; s++) CHECK(strlen(botspace_status_message(s)) > 5, "status message of every status");
    CHECK(strcmp(botspace_status_message(999), "unknown status") == 0, "status message of an unknown value");

    /* last_error_message rules */
    botspace_service *s = NULL;
    CHECK(botspace_service_open(NULL, 5, &s) == BOTSPACE_STATUS_NULL_ARGUMENT, "open: NULL config with a length");
    size_t n = 0;
    CHECK(botspace_last_error_message(NULL, 0, &n) == BOTSPACE_STATUS_OK && n > 0, "last error: size query");
    char small[4] = {'x', 'x', 'x', 'x'};
    size_t n2 = 0;
    CHECK(botspace_last_error_message(small, sizeof small, &n2) == BOTSPACE_STATUS_OK && n2 == n && small[3] == 0 &&
              strlen(small) == 3,
          "last error: truncated and NUL-terminated");
    CHECK(strstr(last_error(), "config_json") != NULL, "last error names the NULL argument");
    CHECK(botspace_last_error_message(small, sizeof small, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "last error: NULL out_len");
    CHECK(botspace_last_error_message(NULL, 8, &n2) == BOTSPACE_STATUS_NULL_ARGUMENT, "last error: NULL buf with a length");
}

static void test_open(void) {
    botspace_service *sentinel = (botspace_service *)(uintptr_t)0x1;
    botspace_service *s = sentinel;
    struct {
        const char *cfg, *name, *msg;
        botspace_status want;
    } bad[] = {
        {"", "empty configuration", "JSON", BOTSPACE_STATUS_INVALID_CONFIG},
        {"{", "malformed JSON", "JSON", BOTSPACE_STATUS_INVALID_CONFIG},
        {"[]", "an array", "", BOTSPACE_STATUS_INVALID_CONFIG},
        {"\"x\"", "a string", "JSON", BOTSPACE_STATUS_INVALID_CONFIG},
        {"{}", "no admin_secret", "admin_secret", BOTSPACE_STATUS_INVALID_CONFIG},
        {"{\"admin_secret\":\"short\"}", "short admin_secret", "admin_secret", BOTSPACE_STATUS_INVALID_CONFIG},
        {"{\"admin_secret\":\"long-enough-secret-0001\",\"typo\":1}", "unknown field", "typo", BOTSPACE_STATUS_INVALID_CONFIG},
        {"{\"admin_secret\":\"long-enough-secret-0001\",\"max_body_bytes\":0}", "max_body_bytes 0", "max_body_bytes",
         BOTSPACE_STATUS_INVALID_CONFIG},
        {"{\"admin_secret\":\"long-enough-secret-0001\",\"heartbeat_interval_ms\":5}", "heartbeat interval too small",
         "heartbeat_interval_ms", BOTSPACE_STATUS_INVALID_CONFIG},
        {"{\"admin_secret\":\"long-enough-secret-0001\",\"operational_key\":\"abc\"}", "operational_key not 64 hex digits",
         "operational_key", BOTSPACE_STATUS_INVALID_CONFIG},
        {"{\"admin_secret\":\"long-enough-secret-0001\",\"clock\":\"sundial\"}", "unknown clock", "sundial",
         BOTSPACE_STATUS_INVALID_CONFIG},
        {"{\"admin_secret\":\"long-enough-secret-0001\",\"database\":\"/nonexistent-dir/x/botspace.db\"}",
         "database in a missing directory", "", BOTSPACE_STATUS_STORAGE_ERROR},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[160];
        snprintf(name, sizeof name, "open refuses: %s", bad[i].name);
        botspace_status st = botspace_service_open((const uint8_t *)bad[i].cfg, strlen(bad[i].cfg), &s);
        const char *msg = last_error();
        check(st == bad[i].want && s == sentinel && strstr(msg, bad[i].msg) != NULL && msg[0], name, "status %d, message %s",
              (int)st, msg);
    }
    CHECK(botspace_service_open(NULL, 0, &s) == BOTSPACE_STATUS_INVALID_CONFIG && s == sentinel,
          "open: NULL with length 0 is an empty (invalid) configuration");
    CHECK(botspace_service_open((const uint8_t *)BASE_CONFIG, strlen(BASE_CONFIG), NULL) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "open: NULL out_service");
    s = NULL;
    CHECK(botspace_service_open((const uint8_t *)BASE_CONFIG, strlen(BASE_CONFIG), &s) == BOTSPACE_STATUS_OK && s,
          "open: a valid configuration");
    uint64_t now = 0;
    CHECK(botspace_service_now_ms(s, &now) == BOTSPACE_STATUS_OK && now == 1767225600000ull, "now_ms: the manual clock's start");
    CHECK(botspace_service_now_ms(NULL, &now) == BOTSPACE_STATUS_NULL_ARGUMENT, "now_ms: NULL service");
    CHECK(botspace_service_now_ms(s, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "now_ms: NULL out");
    CHECK(botspace_service_set_wake_callback(NULL, NULL, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "set_wake_callback: NULL service");
    CHECK(botspace_service_set_wake_callback(s, NULL, NULL) == BOTSPACE_STATUS_OK, "set_wake_callback: NULL callback removes");

    /* the operations paths, the graceful stop and what hosts report */
    static const char readyz[] = "GET /readyz HTTP/1.1\r\nHost: botspace\r\n\r\n";
    static const char healthz[] = "GET /healthz HTTP/1.1\r\nHost: botspace\r\n\r\n";
    response r;
    CHECK(request(s, readyz, sizeof readyz - 1, &r) && r.status == 200 && strcmp(r.body, "{\"ok\":true}") == 0,
          "readyz: 200 before a stop");
    response_free(&r);
    CHECK(botspace_service_begin_shutdown(NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "begin_shutdown: NULL service");
    CHECK(botspace_service_note_connection_evicted(NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "note_connection_evicted: NULL");
    CHECK(botspace_service_note_request_timeout(NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "note_request_timeout: NULL");
    CHECK(botspace_service_set_log_callback(NULL, on_line, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "set_log_callback: NULL service");
    CHECK(botspace_service_set_log_callback(s, on_line, NULL) == BOTSPACE_STATUS_OK, "set_log_callback");
    CHECK(botspace_service_note_connection_evicted(s) == BOTSPACE_STATUS_OK, "note_connection_evicted");
    CHECK(last_line.calls == 1 && last_line.level == 1 &&
              strcmp(last_line.text, "connection evicted: the oldest waiting connection was closed to admit a new one "
                                     "at the connection limit event=connection_evicted") == 0 &&
              strstr(last_line.json, "\"level\":\"warn\",\"msg\":\"connection evicted: ") != NULL &&
              strstr(last_line.json, ",\"event\":\"connection_evicted\"}") != NULL,
          "note_connection_evicted: a warn line through the log callback");
    CHECK(botspace_service_note_request_timeout(s) == BOTSPACE_STATUS_OK, "note_request_timeout");
    CHECK(last_line.calls == 2 && last_line.level == 2 &&
              strcmp(last_line.text, "request timed out: answered 408, it did not arrive whole in time event=request_timeout") == 0,
          "note_request_timeout: an info line through the log callback");
    CHECK(botspace_service_set_log_callback(s, NULL, NULL) == BOTSPACE_STATUS_OK, "set_log_callback: NULL removes");
    CHECK(botspace_service_note_request_timeout(s) == BOTSPACE_STATUS_OK && last_line.calls == 2,
          "no callback: no line");
    CHECK(botspace_service_begin_shutdown(s) == BOTSPACE_STATUS_OK, "begin_shutdown");
    CHECK(request(s, readyz, sizeof readyz - 1, &r) && r.status == 503 && strstr(r.body, "\"error\":\"shutting_down\"") != NULL,
          "readyz: 503 shutting_down once the stop began");
    response_free(&r);
    CHECK(request(s, healthz, sizeof healthz - 1, &r) && r.status == 200, "healthz: 200 during the stop");
    response_free(&r);

    /* double frees guarded by the documented rules */
    botspace_service_free(&s);
    CHECK(s == NULL, "service_free sets the handle to NULL");
    botspace_service_free(&s);
    botspace_service_free(NULL);
    CHECK(1, "service_free twice on the same variable, and with NULL, is harmless");
}

/* The resuming framer answers as frame_request at every byte. */
static void test_request_framer(void) {
    botspace_service *s = open_service(BASE_CONFIG);
    botspace_request_framer *fr = NULL;
    CHECK(botspace_request_framer_new(NULL, &fr) == BOTSPACE_STATUS_NULL_ARGUMENT, "request_framer_new: NULL service");
    CHECK(botspace_request_framer_new(s, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "request_framer_new: NULL out");
    CHECK(botspace_request_framer_new(s, &fr) == BOTSPACE_STATUS_OK && fr != NULL, "request_framer_new");
    sbuf req = {0};
    sb_str(&req, "POST /bot/getMe HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 40; i++) sb_str(&req, "1\r\n \r\n");
    sb_str(&req, "0\r\n\r\nPOST /bot/getMe HTTP/1.1\n\n");
    size_t start = 0, completes = 0;
    int agree = 1;
    for (size_t end = start + 1; end <= req.len; end++) {
        botspace_framing a_, b_;
        botspace_request_framer_frame(fr, (const uint8_t *)req.p + start, end - start, &a_);
        botspace_service_frame_request(s, (const uint8_t *)req.p + start, end - start, &b_);
        agree &= a_.kind == b_.kind && a_.length == b_.length;
        if (a_.kind == BOTSPACE_FRAMING_KIND_COMPLETE) {
            start += a_.length;
            completes++;
        }
        botspace_bytes_free(&a_.error_response);
        botspace_bytes_free(&b_.error_response);
    }
    CHECK(agree && completes == 2 && start == req.len,
          "request_framer_frame: the same answer as frame_request at every byte of two pipelined requests");
    botspace_framing f;
    CHECK(botspace_request_framer_frame(NULL, NULL, 0, &f) == BOTSPACE_STATUS_NULL_ARGUMENT, "request_framer_frame: NULL framer");
    botspace_request_framer_free(&fr);
    CHECK(fr == NULL, "request_framer_free sets the handle to NULL");
    botspace_request_framer_free(&fr);
    botspace_request_framer_free(NULL);
    sb_free(&req);
    botspace_service_free(&s);
}

/* Frames `req` whole with `fr` and reads the head it carries. */
static botspace_request_head framed_head(botspace_request_framer *fr, const char *req, int *ok) {
    botspace_framing f;
    botspace_request_head h;
    bool present = false;
    memset(&h, 0xAB, sizeof h);
    *ok = botspace_request_framer_frame(fr, (const uint8_t *)req, strlen(req), &f) == BOTSPACE_STATUS_OK &&
          f.kind == BOTSPACE_FRAMING_KIND_COMPLETE && f.length == strlen(req) &&
          botspace_request_framer_head(fr, &h, &present) == BOTSPACE_STATUS_OK && present;
    botspace_bytes_free(&f.error_response);
    return h;
}

/* A complete frame carries its parsed head: the host parses nothing again. */
static void test_request_head(void) {
    botspace_service *s = open_service(BASE_CONFIG);
    botspace_request_framer *fr = NULL;
    CHECK(botspace_request_framer_new(s, &fr) == BOTSPACE_STATUS_OK, "request_head: framer");
    botspace_request_head h;
    bool present = true;
    CHECK(botspace_request_framer_head(fr, &h, &present) == BOTSPACE_STATUS_OK && !present && h.head_len == 0 &&
              !h.keep_alive,
          "request_head: none before any request (zeroed)");
    int ok;
    const char *post = "POST /bot/sendMessage?x=1 HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}";
    h = framed_head(fr, post, &ok);
    CHECK(ok && h.head_len == strlen(post) - 2 && h.request_line_end == 36, "request_head: head length, request line end");
    CHECK(h.method_start == 0 && h.method_len == 4 && h.path_start == 5 && h.path_len == 16 &&
              memcmp(post + h.path_start, "/bot/sendMessage", 16) == 0,
          "request_head: method and path (without the query)");
    CHECK(h.http_minor == 1 && h.keep_alive && !h.close_token && !h.upgrade, "request_head: HTTP/1.1 keeps the connection");
    CHECK(h.expect_continue && h.has_expect && h.expect_offset == 45 && memcmp(post + 45, "Expect", 6) == 0,
          "request_head: expect-continue and where its header is");
    const char *gw = "GET /bot/gateway HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
    h = framed_head(fr, gw, &ok);
    CHECK(ok && h.upgrade && h.keep_alive && !h.expect_continue && !h.has_expect && h.method_len == 3 && h.path_len == 12,
          "request_head: a WebSocket upgrade");
    h = framed_head(fr, "GET /bot/getMe HTTP/1.0\r\n\r\n", &ok);
    CHECK(ok && h.http_minor == 0 && !h.keep_alive && !h.close_token, "request_head: HTTP/1.0 closes by default");
    h = framed_head(fr, "GET /bot/getMe HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &ok);
    CHECK(ok && h.http_minor == 0 && h.keep_alive, "request_head: HTTP/1.0 with keep-alive");
    h = framed_head(fr, "GET /bot/getMe HTTP/1.1\r\nConnection: close\r\n\r\n", &ok);
    CHECK(ok && !h.keep_alive && h.close_token, "request_head: Connection: close");
    /* While only the body is missing, the head is there (for 100 Continue). */
    botspace_framing f;
    size_t head_only = strlen(post) - 2;
    CHECK(botspace_request_framer_frame(fr, (const uint8_t *)post, head_only, &f) == BOTSPACE_STATUS_OK &&
              f.kind == BOTSPACE_FRAMING_KIND_INCOMPLETE &&
              botspace_request_framer_head(fr, &h, &present) == BOTSPACE_STATUS_OK && present && h.expect_continue &&
              h.head_len == head_only,
          "request_head: the pending head while the body is missing");
    botspace_bytes_free(&f.error_response);
    botspace_request_framer_free(&fr);
    CHECK(botspace_request_framer_new(s, &fr) == BOTSPACE_STATUS_OK, "request_head: a new framer");
    const char *bad = "POST /bot/getMe HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n";
    CHECK(botspace_request_framer_frame(fr, (const uint8_t *)bad, strlen(bad), &f) == BOTSPACE_STATUS_OK &&
              f.kind == BOTSPACE_FRAMING_KIND_INVALID &&
              botspace_request_framer_head(fr, &h, &present) == BOTSPACE_STATUS_OK && !present,
          "request_head: none after INVALID");
    botspace_bytes_free(&f.error_response);
    CHECK(botspace_request_framer_head(NULL, &h, &present) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_request_framer_head(fr, NULL, &present) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_request_framer_head(fr, &h, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "request_head: NULL arguments");
    botspace_request_framer_free(&fr);
    botspace_service_free(&s);
}

/* The per-connection budgets a host applies: answers unsent, bytes buffered. */
static void test_connection_budgets(void) {
    CHECK(BOTSPACE_MAX_UNSENT_BYTES_PER_CONNECTION == 65536, "budget: 64 KiB of unsent answers");
    CHECK(botspace_should_read(0) && botspace_should_read(BOTSPACE_MAX_UNSENT_BYTES_PER_CONNECTION - 1) &&
              !botspace_should_read(BOTSPACE_MAX_UNSENT_BYTES_PER_CONNECTION) && !botspace_should_read(SIZE_MAX),
          "budget: should_read below the budget only");
    botspace_service *s = open_service(BASE_CONFIG);
    botspace_request_framer *fr = NULL;
    CHECK(botspace_request_framer_new(s, &fr) == BOTSPACE_STATUS_OK, "budget: framer");
    size_t max = 0;
    CHECK(botspace_request_framer_max_request_bytes(fr, &max) == BOTSPACE_STATUS_OK && max == 229636,
          "budget: max_request_bytes under the default body limit");
    /* That many bytes of an endless head frame as INVALID, not INCOMPLETE. */
    unsigned char *endless = malloc(max);
    CHECK(endless != NULL, "budget: malloc");
    if (endless) {
        memset(endless, 'a', max);
        memcpy(endless, "POST /bot/getMe HTTP/1.1\r\nX: ", 30);
        botspace_framing f;
        CHECK(botspace_request_framer_frame(fr, endless, max, &f) == BOTSPACE_STATUS_OK &&
                  f.kind == BOTSPACE_FRAMING_KIND_INVALID,
              "budget: max_request_bytes of a head are never incomplete");
        botspace_bytes_free(&f.error_response);
        free(endless);
    }
    CHECK(botspace_request_framer_max_request_bytes(NULL, &max) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_request_framer_max_request_bytes(fr, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "budget: NULL arguments");
    botspace_request_framer_free(&fr);
    botspace_service_free(&s);
}

/* Takes what a connection has to send, as a host writing its socket. */
static size_t conn_take_output(botspace_http_connection *c, char *out, size_t cap, uint64_t now) {
    const uint8_t *p = NULL;
    size_t n = 0;
    if (botspace_http_connection_poll_transmit(c, &p, &n) != BOTSPACE_STATUS_OK || n >= cap) return (size_t)-1;
    if (n) memcpy(out, p, n);
    out[n] = 0;
    botspace_http_connection_sent(c, n, now);
    return n;
}

static botspace_http_connection_info conn_info(const botspace_http_connection *c) {
    botspace_http_connection_info i;
    memset(&i, 0xff, sizeof i);
    botspace_http_connection_get_info(c, &i);
    return i;
}

/* One HTTP connection's rules, driven as a host drives them: pipelining in
 * order, the Connection header, 100 Continue, refusal and linger, 408,
 * idle close, half close, upgrade, NULL arguments. */
static void test_http_connection(void) {
    botspace_service *s = open_service(BASE_CONFIG);
    botspace_http_connection *c = NULL;
    CHECK(botspace_http_connection_new(NULL, BOTSPACE_LISTENER_ALL, 1000, 5000, 0, &c) ==
                  BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_http_connection_new(s, BOTSPACE_LISTENER_ALL, 1000, 5000, 0, NULL) ==
                  BOTSPACE_STATUS_NULL_ARGUMENT,
          "http_connection: NULL arguments to new");
    CHECK(botspace_http_connection_new(s, BOTSPACE_LISTENER_ALL, 1000, 5000, 0, &c) == BOTSPACE_STATUS_OK && c,
          "http_connection: new");
    botspace_http_connection_info i = conn_info(c);
    CHECK(i.state == BOTSPACE_CONNECTION_STATE_OPEN && i.wants_read && i.read_limit == 229636 && !i.has_request && i.idle &&
              i.unsent == 0 && i.timeout_ms == 5001 && i.waiting_since_ms == 0,
          "http_connection: a fresh connection reads, idles until 5001");
    static const char two[] = "POST /bot/sendMessage HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"
                              "GET /healthz HTTP/1.0\r\n\r\nGET /x";
    CHECK(botspace_http_connection_handle_input(c, (const uint8_t *)two, sizeof two - 1, 10) == BOTSPACE_STATUS_OK,
          "http_connection: input");
    i = conn_info(c);
    CHECK(i.has_request && !i.wants_read && i.read_limit == 229636 - 86 && !i.idle,
          "http_connection: a whole request waits: no poll for input, the buffer bounded");
    botspace_http_request a, b, none;
    CHECK(botspace_http_connection_poll_request(c, 10, &a) == BOTSPACE_STATUS_OK && a.present &&
              a.route == BOTSPACE_ROUTE_BATCH && a.len == 55 && memcmp(a.ptr, two, 55) == 0 &&
              a.head.keep_alive && a.head.http_minor == 1,
          "http_connection: the first request");
    CHECK(botspace_http_connection_poll_request(c, 10, &b) == BOTSPACE_STATUS_OK && b.present &&
              b.route == BOTSPACE_ROUTE_ALONE && b.len == 25 && !b.head.keep_alive && b.head.http_minor == 0,
          "http_connection: the pipelined second, before the first is answered");
    CHECK(botspace_http_connection_poll_request(c, 10, &none) == BOTSPACE_STATUS_OK && !none.present &&
              none.ptr == NULL && none.len == 0,
          "http_connection: nothing after a closing request");
    static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    botspace_http_connection_answer(c, (const uint8_t *)ok, sizeof ok - 1, 20);
    CHECK(botspace_http_connection_answer(c, (const uint8_t *)ok, sizeof ok - 1, 20) == BOTSPACE_STATUS_OK &&
              conn_info(c).state == BOTSPACE_CONNECTION_STATE_CLOSING && conn_info(c).unsent == 2 * 38 + 19,
          "http_connection: answers queued, closing after the last");
    char out[1024];
    size_t n = conn_take_output(c, out, sizeof out, 30);
    CHECK(n == 95 && strcmp(out, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
                                 "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n") == 0 &&
              conn_info(c).state == BOTSPACE_CONNECTION_STATE_CLOSED,
          "http_connection: in order, Connection: close on the last, then CLOSED");
    botspace_http_connection_free(&c);
    CHECK(c == NULL, "http_connection: free resets the handle");

    /* An empty answer (the host's call failed) is the library's 500
     * answer_failed, in the request's turn, and the connection goes on. */
    botspace_http_connection_new(s, BOTSPACE_LISTENER_ALL, 1000, 5000, 0, &c);
    static const char get2[] = "GET /healthz HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n";
    botspace_http_connection_handle_input(c, (const uint8_t *)get2, sizeof get2 - 1, 0);
    botspace_http_connection_poll_request(c, 0, &a);
    botspace_http_connection_poll_request(c, 0, &b);
    static const char failed[] =
        "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: 190\r\n\r\n"
        "{\"ok\":false,\"error_code\":500,\"error\":\"answer_failed\",\"description\":\"the server failed while "
        "answering: the request may or may not have been carried out; retry with the same Idempotency-Key\"}";
    CHECK(botspace_http_connection_answer(c, NULL, 0, 1) == BOTSPACE_STATUS_OK &&
              botspace_http_connection_answer(c, (const uint8_t *)ok, sizeof ok - 1, 1) == BOTSPACE_STATUS_OK,
          "http_connection: an empty answer, then a real one");
    n = conn_take_output(c, out, sizeof out, 2);
    CHECK(n == sizeof failed - 1 + sizeof ok - 1 && strncmp(out, failed, sizeof failed - 1) == 0 &&
              strcmp(out + sizeof failed - 1, ok) == 0 && conn_info(c).state == BOTSPACE_CONNECTION_STATE_OPEN,
          "http_connection: the failed call's request gets 500 answer_failed in its turn, the next its own");
    botspace_http_connection_free(&c);
    botspace_http_connection_free(&c);
    botspace_http_connection_free(NULL);

    /* 100 Continue once, then a refusal that lingers. */
    botspace_http_connection_new(s, BOTSPACE_LISTENER_ALL, 1000, 5000, 0, &c);
    static const char expect[] = "POST /bot/sendMessage HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
    botspace_http_connection_handle_input(c, (const uint8_t *)expect, sizeof expect - 1, 0);
    CHECK(botspace_http_connection_poll_request(c, 0, &none) == BOTSPACE_STATUS_OK && !none.present &&
              conn_take_output(c, out, sizeof out, 0) == 25 && strcmp(out, "HTTP/1.1 100 Continue\r\n\r\n") == 0,
          "http_connection: 100 Continue for a whole head");
    botspace_http_connection_handle_input(c, (const uint8_t *)"{", 1, 1);
    CHECK(botspace_http_connection_poll_request(c, 1, &none) == BOTSPACE_STATUS_OK && !none.present &&
              conn_info(c).unsent == 0 && conn_info(c).timeout_ms == 1001,
          "http_connection: once per request; the request deadline runs from its first byte");
    botspace_expired e = BOTSPACE_EXPIRED_IDLE;
    CHECK(botspace_http_connection_handle_timeout(c, s, 1000, &e) == BOTSPACE_STATUS_OK &&
              e == BOTSPACE_EXPIRED_NOTHING,
          "http_connection: not before the deadline");
    CHECK(botspace_http_connection_handle_timeout(c, s, 1001, &e) == BOTSPACE_STATUS_OK &&
              e == BOTSPACE_EXPIRED_REQUEST && conn_info(c).state == BOTSPACE_CONNECTION_STATE_CLOSING,
          "http_connection: 408 at the deadline");
    response r;
    char perr[64];
    n = conn_take_output(c, out, sizeof out, 1002);
    CHECK(parse_response((const uint8_t *)out, n, &r, perr, sizeof perr) && r.status == 408 &&
              strstr(r.head.p, "Connection: close") != NULL &&
              strcmp(r.body, "{\"ok\":false,\"error_code\":408,\"error\":\"request_timeout\",\"description\":\"the "
                             "request did not arrive in time\"}") == 0 &&
              conn_info(c).state == BOTSPACE_CONNECTION_STATE_CLOSED,
          "http_connection: the 408 is the library's, then CLOSED");
    response_free(&r);
    botspace_http_connection_free(&c);

    botspace_http_connection_new(s, BOTSPACE_LISTENER_ALL, 1000, 5000, 0, &c);
    static const char big[] = "POST /bot/sendMessage HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n";
    botspace_http_connection_handle_input(c, (const uint8_t *)big, sizeof big - 1, 0);
    botspace_http_connection_poll_request(c, 0, &none);
    n = conn_take_output(c, out, sizeof out, 50);
    CHECK(!none.present && parse_response((const uint8_t *)out, n, &r, perr, sizeof perr) && r.status == 413 &&
              strncmp(out, "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\n", 51) == 0 &&
              conn_info(c).state == BOTSPACE_CONNECTION_STATE_LINGERING && conn_info(c).timeout_ms == 2050,
          "http_connection: a refusal with Connection: close, then a 2 s linger");
    response_free(&r);
    botspace_http_connection_handle_input(c, (const uint8_t *)"xxxx", 4, 60);
    CHECK(botspace_http_connection_handle_timeout(c, NULL, 2050, &e) == BOTSPACE_STATUS_OK &&
              e == BOTSPACE_EXPIRED_LINGER && conn_info(c).state == BOTSPACE_CONNECTION_STATE_CLOSED,
          "http_connection: the linger ends");
    botspace_http_connection_free(&c);

    /* The busy refusal: the 503 server_busy, no request, then a 500 ms
     * linger (not the 2 s of a refused request), never waiting. */
    CHECK(botspace_http_connection_refusing_busy(0, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "http_connection: NULL argument to refusing_busy");
    CHECK(botspace_http_connection_refusing_busy(100, &c) == BOTSPACE_STATUS_OK && c, "http_connection: refusing_busy");
    botspace_bytes busy = {NULL, 0};
    botspace_server_busy_response(&busy);
    i = conn_info(c);
    CHECK(i.state == BOTSPACE_CONNECTION_STATE_CLOSING && i.wants_read && !i.has_request && !i.idle &&
              i.unsent == busy.len && busy.len == 225 && i.timeout_ms == 100 + 30000 + 1 &&
              i.waiting_since_ms == BOTSPACE_NO_DEADLINE,
          "http_connection: a busy refusal sends (its one deadline: the write timeout), reads, is never waiting");
    botspace_http_connection_handle_input(c, (const uint8_t *)expect, sizeof expect - 1, 101);
    CHECK(botspace_http_connection_poll_request(c, 101, &none) == BOTSPACE_STATUS_OK && !none.present &&
              conn_info(c).unsent == busy.len,
          "http_connection: a busy refusal discards input and takes no request");
    n = conn_take_output(c, out, sizeof out, 110);
    i = conn_info(c);
    CHECK(n == busy.len && memcmp(out, busy.ptr, busy.len) == 0 &&
              strncmp(out, "HTTP/1.1 503 Service Unavailable\r\n", 34) == 0 &&
              i.state == BOTSPACE_CONNECTION_STATE_LINGERING && i.timeout_ms == 610,
          "http_connection: the 503 server_busy, byte for byte, then a 500 ms linger");
    CHECK(botspace_http_connection_handle_timeout(c, s, 609, &e) == BOTSPACE_STATUS_OK &&
              e == BOTSPACE_EXPIRED_NOTHING && conn_info(c).state == BOTSPACE_CONNECTION_STATE_LINGERING &&
              botspace_http_connection_handle_timeout(c, s, 610, &e) == BOTSPACE_STATUS_OK &&
              e == BOTSPACE_EXPIRED_LINGER && conn_info(c).state == BOTSPACE_CONNECTION_STATE_CLOSED,
          "http_connection: the refusal's linger ends at its deadline");
    botspace_http_connection_free(&c);
    size_t busy_len = busy.len;
    botspace_bytes_free(&busy);
    CHECK(botspace_http_connection_refusing_busy(0, &c) == BOTSPACE_STATUS_OK, "http_connection: refusing_busy again");
    conn_take_output(c, out, sizeof out, 0);
    static char lots[65535];
    botspace_http_connection_handle_input(c, (const uint8_t *)lots, sizeof lots, 1);
    CHECK(conn_info(c).state == BOTSPACE_CONNECTION_STATE_LINGERING, "http_connection: a refusal lingers under 64 KiB");
    botspace_http_connection_handle_input(c, (const uint8_t *)"x", 1, 2);
    CHECK(conn_info(c).state == BOTSPACE_CONNECTION_STATE_CLOSED, "http_connection: a refusal's linger ends at 64 KiB");
    botspace_http_connection_free(&c);
    /* The write timeout is the library's: a peer that takes nothing of
     * what waits for it for 30 s is dropped, and a write that takes some
     * starts it again. */
    botspace_http_connection_refusing_busy(0, &c);
    CHECK(botspace_http_connection_sent(c, 1, 20) == BOTSPACE_STATUS_OK && conn_info(c).timeout_ms == 20 + 30000 + 1,
          "http_connection: a write that takes some moves the write deadline");
    CHECK(botspace_http_connection_handle_timeout(c, s, 30020, &e) == BOTSPACE_STATUS_OK && e == BOTSPACE_EXPIRED_NOTHING &&
              conn_info(c).state == BOTSPACE_CONNECTION_STATE_CLOSING,
          "http_connection: not before the write deadline");
    i = conn_info(c);
    CHECK(botspace_http_connection_handle_timeout(c, s, 30021, &e) == BOTSPACE_STATUS_OK && e == BOTSPACE_EXPIRED_WRITE &&
              conn_info(c).state == BOTSPACE_CONNECTION_STATE_CLOSED && conn_info(c).unsent == 0 &&
              conn_info(c).timeout_ms == BOTSPACE_NO_DEADLINE && i.unsent == busy_len - 1,
          "http_connection: a peer that took nothing for the write timeout: CLOSED, its output dropped");
    botspace_http_connection_free(&c);
    CHECK(botspace_refusal_may_linger(0) && botspace_refusal_may_linger(255) && !botspace_refusal_may_linger(256) &&
              !botspace_refusal_may_linger(SIZE_MAX),
          "policy: at most 256 busy refusals linger at once");

    /* Idle close; half close; the gateway takes the rest. */
    botspace_http_connection_new(s, BOTSPACE_LISTENER_PUBLIC, 1000, 5000, 7, &c);
    CHECK(botspace_http_connection_handle_timeout(c, NULL, 5008, &e) == BOTSPACE_STATUS_OK &&
              e == BOTSPACE_EXPIRED_IDLE && conn_info(c).state == BOTSPACE_CONNECTION_STATE_CLOSED,
          "http_connection: an idle connection closes");
    botspace_http_connection_free(&c);
    botspace_http_connection_new(s, BOTSPACE_LISTENER_PUBLIC, 1000, 5000, 0, &c);
    static const char gw[] = "GET /admin/x HTTP/1.1\r\n\r\nGET /bot/gateway HTTP/1.1\r\n\r\n\x81";
    botspace_http_connection_handle_input(c, (const uint8_t *)gw, sizeof gw - 1, 0);
    botspace_http_connection_handle_eof(c, 0);
    CHECK(botspace_http_connection_poll_request(c, 0, &a) == BOTSPACE_STATUS_OK && a.present &&
              a.route == BOTSPACE_ROUTE_NOT_HERE && a.head.path_len == 8 &&
              memcmp(a.ptr + a.head.path_start, "/admin/x", 8) == 0 &&
              botspace_http_connection_poll_request(c, 0, &none) == BOTSPACE_STATUS_OK && !none.present,
          "http_connection: the listener's route; the next waits for its answer");
    botspace_http_connection_answer(c, (const uint8_t *)ok, sizeof ok - 1, 0);
    CHECK(botspace_http_connection_poll_request(c, 0, &b) == BOTSPACE_STATUS_OK && b.present &&
              b.route == BOTSPACE_ROUTE_GATEWAY,
          "http_connection: half closed, what was sent whole is still given");
    botspace_bytes in = {NULL, 0}, pending = {NULL, 0};
    CHECK(botspace_http_connection_upgrade(c, &in, &pending) == BOTSPACE_STATUS_OK && in.len == 1 &&
              in.ptr[0] == 0x81 && pending.len == 38 && memcmp(pending.ptr, ok, 38) == 0 &&
              conn_info(c).state == BOTSPACE_CONNECTION_STATE_CLOSED,
          "http_connection: upgrade hands over the rest of the input and the unsent answers");
    botspace_bytes_free(&in);
    botspace_bytes_free(&pending);
    CHECK(botspace_http_connection_get_info(NULL, &i) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_http_connection_get_info(c, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_http_connection_handle_input(NULL, NULL, 0, 0) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_http_connection_handle_input(c, NULL, 3, 0) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_http_connection_poll_request(c, 0, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_http_connection_answer(NULL, NULL, 0, 0) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_http_connection_poll_transmit(c, NULL, &n) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_http_connection_upgrade(c, NULL, &pending) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_http_connection_handle_timeout(c, NULL, 0, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_http_connection_handle_eof(NULL, 0) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_http_connection_sent(NULL, 0, 0) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_http_connection_close(NULL, 0) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "http_connection: NULL arguments");
    botspace_http_connection_free(&c);
    botspace_service_free(&s);
}

/* How often `needle` occurs in the first n bytes of h. */
static int count_in(const char *h, size_t n, const char *needle) {
    int k = 0;
    size_t nl = strlen(needle);
    for (const char *p = h; (p = memfind(p, (size_t)(h + n - p), needle)) != NULL; p += nl) k++;
    return k;
}

/* Where `needle` first occurs in h (n bytes), or n when it does not. */
static size_t pos_in(const char *h, size_t n, const char *needle) {
    const char *p = memfind(h, n, needle);
    return p ? (size_t)(p - h) : n;
}

/* One round of the library's group commit across connections, as the C
 * server drives it: the plain requests of every connection in one batch,
 * each answer on its connection in order; the host API alone after the
 * batch, its connection's next request in the next batch; another
 * listener's path answered; a gateway upgrade and a parked poll left to
 * the host; an entry without a connection skipped; NULL arguments. */
static void test_http_round(void) {
    botspace_service *s = open_service(BASE_CONFIG);
    world w;
    world_make(s, &w, "official");
    uint64_t now = 0;
    botspace_service_now_ms(s, &now);
    char auth[128], send_body[256];
    snprintf(auth, sizeof auth, "Bot %s", w.token);
    snprintf(send_body, sizeof send_body, "{\"chat_id\":\"%s\",\"text\":\"hi\"}", w.chat);
    sbuf a_in = {0}, b_in = {0}, g_in = {0}, p_in = {0};
    build_post(&a_in, "/bot/sendMessage", auth, send_body);
    build_post(&a_in, "/admin/createUser", "Admin vector-admin-secret-0001", "{\"display_name\":\"Bo\"}");
    build_post(&a_in, "/bot/sendMessage", auth, send_body);
    build_post(&b_in, "/bot/sendMessage", auth, send_body);
    build_post(&b_in, "/admin/x", NULL, NULL);
    sb_fmt(&g_in, "GET /bot/gateway HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\nUpgrade: websocket\r\n"
                  "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
           auth);
    build_post(&p_in, "/bot/getUpdates", auth, "{\"offset\":2,\"timeout\":5}");
    botspace_http_connection *a = NULL, *b = NULL, *g = NULL, *p = NULL;
    botspace_http_connection_new(s, BOTSPACE_LISTENER_ALL, 1000, 5000, 0, &a);
    botspace_http_connection_new(s, BOTSPACE_LISTENER_PUBLIC, 1000, 5000, 0, &b);
    botspace_http_connection_new(s, BOTSPACE_LISTENER_ALL, 1000, 5000, 0, &g);
    botspace_http_connection_new(s, BOTSPACE_LISTENER_ALL, 1000, 5000, 0, &p);
    botspace_http_connection_handle_input(a, (const uint8_t *)a_in.p, a_in.len, 1);
    botspace_http_connection_handle_input(b, (const uint8_t *)b_in.p, b_in.len, 1);
    botspace_http_connection_handle_input(g, (const uint8_t *)g_in.p, g_in.len, 1);
    botspace_http_connection_handle_input(p, (const uint8_t *)p_in.p, p_in.len, 1);
    botspace_http_round *round = NULL;
    CHECK(botspace_http_round_new(NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "http_round: NULL out_round");
    CHECK(botspace_http_round_new(&round) == BOTSPACE_STATUS_OK && round, "http_round: new");
    static const char peer[] = "192.0.2.7";
    botspace_round_connection conns[5] = {
        {a, true, peer, sizeof peer - 1}, {NULL, true, NULL, 0}, {b, false, peer, sizeof peer - 1},
        {g, true, NULL, 0},           {p, true, NULL, 0},
    };
    botspace_round_step steps[5];
    size_t nsteps = 99;
    CHECK(botspace_http_round_serve(NULL, s, conns, 5, 2, steps, &nsteps) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_http_round_serve(round, NULL, conns, 5, 2, steps, &nsteps) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_http_round_serve(round, s, NULL, 5, 2, steps, &nsteps) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_http_round_serve(round, s, conns, 5, 2, NULL, &nsteps) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_http_round_serve(round, s, conns, 5, 2, steps, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              nsteps == 99 && conn_info(a).has_request,
          "http_round: NULL arguments, nothing taken");
    CHECK(botspace_http_round_serve(round, s, NULL, 0, 2, NULL, &nsteps) == BOTSPACE_STATUS_OK && nsteps == 0,
          "http_round: no connection");
    CHECK(botspace_http_round_serve(round, s, conns, 5, 2, steps, &nsteps) == BOTSPACE_STATUS_OK && nsteps == 2,
          "http_round: serve, two steps left to the host");
    CHECK(steps[0].connection == 3 && steps[0].kind == BOTSPACE_ROUND_STEP_KIND_GATEWAY && steps[0].request.present &&
              steps[0].request.route == BOTSPACE_ROUTE_GATEWAY && steps[0].request.len == g_in.len &&
              memcmp(steps[0].request.ptr, g_in.p, g_in.len) == 0 && steps[0].poll_id == 0,
          "http_round: the gateway's request, inside its connection");
    uint64_t d = 0;
    CHECK(steps[1].connection == 4 && steps[1].kind == BOTSPACE_ROUND_STEP_KIND_PARKED && steps[1].poll_id != 0 &&
              !steps[1].request.present && conn_info(p).unsent == 0 &&
              botspace_service_parked_timeout(s, &d) == BOTSPACE_STATUS_OK && d == now + 5000,
          "http_round: the poll is parked with its deadline");
    char out[8192];
    size_t n = conn_take_output(a, out, sizeof out, 3);
    size_t m1 = pos_in(out, n, "\"message_id\":\"1\""), bo = pos_in(out, n, "\"display_name\":\"Bo\"");
    size_t m3 = pos_in(out, n, "\"message_id\":\"3\"");
    CHECK(n != (size_t)-1 && count_in(out, n, "HTTP/1.1 200 OK\r\n") == 3 && m1 < bo && bo < m3 && m3 < n &&
              !conn_info(a).has_request,
          "http_round: a's answers in order; its request after the host call went to the next batch");
    botspace_bytes not_here = {NULL, 0};
    botspace_not_here_response((const uint8_t *)"/admin/x", 8, &not_here);
    n = conn_take_output(b, out, sizeof out, 3);
    size_t m2 = pos_in(out, n, "\"message_id\":\"2\"");
    CHECK(n != (size_t)-1 && count_in(out, n, "HTTP/1.1 200 OK\r\n") == 1 && m2 < n && n > not_here.len &&
              memcmp(out + n - not_here.len, not_here.ptr, not_here.len) == 0,
          "http_round: b's send in the first batch, then the other listener's 404");
    botspace_bytes_free(&not_here);
    CHECK(conn_info(g).unsent == 0 && !conn_info(g).has_request, "http_round: the gateway's connection waits for the host");
    botspace_http_round_free(&round);
    CHECK(round == NULL, "http_round: free resets the handle");
    botspace_http_round_free(&round);
    botspace_http_round_free(NULL);
    botspace_service_cancel_parked(s, steps[1].poll_id);
    botspace_http_connection_free(&a);
    botspace_http_connection_free(&b);
    botspace_http_connection_free(&g);
    botspace_http_connection_free(&p);
    sb_free(&a_in);
    sb_free(&b_in);
    sb_free(&g_in);
    sb_free(&p_in);
    world_free(&w);
    botspace_service_free(&s);
}

/* The host policy is the library's: routes, the answers a host gives on
 * its own, the numbers, the options. */
static void test_host_policy(void) {
    static const char admin[] = "/admin/createUser", poll[] = "/bot/getUpdates", gw[] = "/bot/gateway",
                      send[] = "/bot/sendMessage", me[] = "/bot/getMe";
#define ROUTE(l, p) botspace_route_request(BOTSPACE_LISTENER_##l, (const uint8_t *)(p), sizeof(p) - 1)
    CHECK(ROUTE(ALL, admin) == BOTSPACE_ROUTE_ADMIN && ROUTE(PUBLIC, admin) == BOTSPACE_ROUTE_NOT_HERE &&
              ROUTE(ADMIN, send) == BOTSPACE_ROUTE_NOT_HERE && ROUTE(ALL, poll) == BOTSPACE_ROUTE_POLL &&
              ROUTE(PUBLIC, gw) == BOTSPACE_ROUTE_GATEWAY && ROUTE(ALL, send) == BOTSPACE_ROUTE_BATCH &&
              ROUTE(ALL, me) == BOTSPACE_ROUTE_ALONE,
          "policy: routes by listener and path");
#undef ROUTE
    botspace_bytes out = {NULL, 0};
    uint16_t status = 0;
    const char *error = NULL;
    CHECK(botspace_server_busy_response(&out) == BOTSPACE_STATUS_OK &&
              botspace_response_error(out.ptr, out.len, &status, &error) == BOTSPACE_STATUS_OK && status == 503 &&
              error && strcmp(error, "server_busy") == 0,
          "policy: 503 server_busy, read back");
    botspace_bytes_free(&out);
    CHECK(botspace_not_here_response((const uint8_t *)admin, sizeof admin - 1, &out) == BOTSPACE_STATUS_OK &&
              botspace_response_error(out.ptr, out.len, &status, &error) == BOTSPACE_STATUS_OK && status == 404 &&
              error && strcmp(error, "method_not_found") == 0,
          "policy: not here is 404 method_not_found");
    botspace_bytes_free(&out);
    CHECK(botspace_continue_response(&out) == BOTSPACE_STATUS_OK && out.len == 25 &&
              memcmp(out.ptr, "HTTP/1.1 100 Continue\r\n\r\n", 25) == 0,
          "policy: 100 Continue");
    botspace_bytes_free(&out);
    CHECK(botspace_response_error((const uint8_t *)"junk", 4, &status, &error) == BOTSPACE_STATUS_INVALID_ARGUMENT &&
              botspace_response_error(NULL, 0, NULL, &error) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "policy: response_error refuses what is not a response");
    /* A host's 408 comes from the connection's timeout, handed the service:
     * the library's envelope, counted and said once (one log line), and
     * nothing more on a later timeout. */
    botspace_service *s = open_service(BASE_CONFIG);
    botspace_http_connection *c = NULL;
    botspace_http_connection_new(s, BOTSPACE_LISTENER_ALL, 1000, 5000, 0, &c);
    static const char half[] = "POST /bot/sendMessage HTTP/1.1\r\nHo";
    botspace_http_connection_handle_input(c, (const uint8_t *)half, sizeof half - 1, 10);
    botspace_http_request none;
    CHECK(botspace_http_connection_poll_request(c, 10, &none) == BOTSPACE_STATUS_OK && !none.present &&
              conn_info(c).timeout_ms == 1011,
          "policy: half a head waits for its request deadline");
    botspace_service_set_log_callback(s, on_line, NULL);
    int lines = last_line.calls;
    botspace_expired e = BOTSPACE_EXPIRED_NOTHING;
    CHECK(botspace_http_connection_handle_timeout(c, s, 1011, &e) == BOTSPACE_STATUS_OK && e == BOTSPACE_EXPIRED_REQUEST &&
              last_line.calls == lines + 1 &&
              strcmp(last_line.text, "request timed out: answered 408, it did not arrive whole in time event=request_timeout") == 0,
          "policy: the connection's 408 is said once");
    response r;
    memset(&r, 0, sizeof r); /* freed below even if the output is not a response */
    char perr[64], sent[1024];
    size_t n = conn_take_output(c, sent, sizeof sent, 1011);
    CHECK(n != (size_t)-1 && strncmp(sent, "HTTP/1.1 408 Request Timeout\r\n", 30) == 0 &&
              parse_response((const uint8_t *)sent, n, &r, perr, sizeof perr) && r.status == 408 &&
              strstr(r.head.p, "Connection: close") != NULL &&
              strcmp(r.body, "{\"ok\":false,\"error_code\":408,\"error\":\"request_timeout\",\"description\":\"the "
                             "request did not arrive in time\"}") == 0,
          "policy: 408 request_timeout through the connection's timeout");
    response_free(&r);
    CHECK(botspace_http_connection_handle_timeout(c, s, 99999, &e) == BOTSPACE_STATUS_OK && e == BOTSPACE_EXPIRED_NOTHING &&
              last_line.calls == lines + 1,
          "policy: a closed connection's later timeout says nothing more");
    botspace_service_set_log_callback(s, NULL, NULL);
    botspace_http_connection_free(&c);
    botspace_service_free(&s);
    botspace_host_policy p;
    CHECK(botspace_host_policy_default(&p) == BOTSPACE_STATUS_OK && p.request_timeout_ms == 30000 &&
              p.idle_timeout_ms == 120000 && p.max_batch == 64 && p.linger_bytes == (4u << 20),
          "policy: the host numbers");
    CHECK(p.notify_retry_step_ms == 50 && p.read_chunk_bytes == 64u * 1024u && p.read_per_turn_bytes == 256u * 1024u &&
              p.webhook_spare_transfers == 128 && p.fallback_file_limit == 1024 && p.accept_backoff_ms == 50 &&
              botspace_default_max_connections(p.fallback_file_limit) == 960,
          "policy: the C server's I/O numbers are the library's");
    CHECK(botspace_default_max_connections(1024) == 960 && botspace_default_max_connections(0) == 1,
          "policy: the default connection cap");
    const char *const bad[] = {"--request-timeout", "0"};
#define REFUSED                                                                                                     \
    "botspace: invalid value '0' for '--request-timeout <SECS>' (BOTSPACE_REQUEST_TIMEOUT): expected seconds above 0 " \
    "and below 86400 (decimals allowed); see --help\n"
    botspace_server_options *o = NULL;
    int32_t code = -1;
    CHECK(botspace_server_options_parse("srv", bad, 2, &o, &out, &code) == BOTSPACE_STATUS_OK && !o && code == 2 &&
              out.len == strlen(REFUSED) && memcmp(out.ptr, REFUSED, out.len) == 0,
          "options: a bad value is one line naming the option, the value and its form, exit 2");
    botspace_bytes_free(&out);
    const char *const good[] = {"--db", ":memory:", "--admin-secret", "vector-admin-secret-0001", "--admin-addr=127.0.0.1:0"};
    CHECK(botspace_server_options_parse("srv", good, 5, &o, &out, &code) == BOTSPACE_STATUS_OK && o && out.len == 0,
          "options: parsed");
    botspace_server_settings st;
    CHECK(botspace_server_options_settings(o, 1024, &st) == BOTSPACE_STATUS_OK && strcmp(st.addr, "127.0.0.1:8080") == 0 &&
              st.admin_addr && strcmp(st.admin_addr, "127.0.0.1:0") == 0 && st.max_connections == 960 &&
              st.request_timeout_ms == 30000 && !st.demo_token,
          "options: settings with the defaults");
    CHECK(botspace_server_options_open_service(o, &s, &out) == BOTSPACE_STATUS_OK && s && out.len == 0,
          "options: the service opens with the secret given, none generated");
    botspace_service_free(&s);
    botspace_server_options_free(&o);
    botspace_server_options_free(&o);
    CHECK(o == NULL, "options: freed twice safely");
}

/* Failed admin authentication is throttled per peer. */
static void test_admin_throttle(void) {
    botspace_service *s = open_service(BASE_CONFIG);
    const char *wrong = "POST /admin/getStats HTTP/1.1\r\nAuthorization: Admin wrong-secret-000000\r\n\r\n";
    sbuf right = {0};
    sb_fmt(&right, "POST /admin/getStats HTTP/1.1\r\nAuthorization: Admin %s\r\n\r\n", ADMIN_SECRET);
    const char *peer = "203.0.113.7";
    botspace_bytes out = {NULL, 0};
    uint64_t id = 0;
    const uint32_t at_once = BOTSPACE_INCOMING_AT_ONCE;
    CHECK(handle_one(s, wrong, strlen(wrong), NULL, 3, at_once, 0, &out, &id) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              strstr(last_error(), "requests[0].peer") != NULL,
          "handle: NULL peer with a length");
    int all401 = 1;
    for (int i = 0; i < 10; i++) {
        handle_one(s, wrong, strlen(wrong), peer, strlen(peer), at_once, 0, &out, &id);
        all401 &= out.len > 12 && memcmp(out.ptr, "HTTP/1.1 401", 12) == 0;
        botspace_bytes_free(&out);
    }
    CHECK(all401, "handle with a peer: ten wrong secrets are 401");
    handle_one(s, right.p, right.len, peer, strlen(peer), at_once, 0, &out, &id);
    CHECK(out.len > 12 && memcmp(out.ptr, "HTTP/1.1 429", 12) == 0 && memfind((const char *)out.ptr, out.len, "admin_auth"),
          "handle with a peer: then even the right secret is 429 admin_auth");
    botspace_bytes_free(&out);
    handle_one(s, right.p, right.len, "198.51.100.1", 12, at_once, 0, &out, &id);
    CHECK(out.len > 12 && memcmp(out.ptr, "HTTP/1.1 200", 12) == 0, "handle with a peer: another peer is served");
    botspace_bytes_free(&out);
    sb_free(&right);
    botspace_service_free(&s);
}

/* Long polling through the C ABI: a getUpdates with a timeout and nothing to
 * return parks (an id, no bytes); a commit makes its answer ready for
 * poll_parked; a deadline answers []; a cancelled poll is never answered;
 * every other request and the bytes entry point answer at once. */
static int ends_with_body(const botspace_bytes *b, const char *body) {
    size_t n = strlen(body);
    return b->len >= n && memcmp(b->ptr + b->len - n, body, n) == 0;
}

static void test_long_polling(void) {
    botspace_service *s = open_service(BASE_CONFIG);
    world w;
    world_make(s, &w, "free");
    uint64_t now = 0;
    botspace_service_now_ms(s, &now);
    sbuf poll = {0};
    char auth[128];
    snprintf(auth, sizeof auth, "Bot %s", w.token);
    build_post(&poll, "/bot/getUpdates", auth, "{\"offset\":2,\"timeout\":5}");
    botspace_bytes out = {NULL, 0};
    uint64_t id = 77, d = 0;
    botspace_incoming in = {(const uint8_t *)poll.p, poll.len, NULL, 0, 0};
    botspace_handled h = {{NULL, 0}, 77};
    CHECK(botspace_service_handle(NULL, &in, 1, now, &h) == BOTSPACE_STATUS_NULL_ARGUMENT && h.poll_id == 77,
          "handle: NULL service");
    CHECK(botspace_service_handle(s, &in, 1, now, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "handle: NULL out_handled");
    CHECK(botspace_service_handle(s, NULL, 1, now, &h) == BOTSPACE_STATUS_NULL_ARGUMENT, "handle: NULL requests");
    CHECK(handle_one(s, NULL, 3, NULL, 0, 0, now, &out, &id) == BOTSPACE_STATUS_NULL_ARGUMENT && id == 77 &&
              strstr(last_error(), "requests[0].request") != NULL,
          "handle: NULL request with a length");
    CHECK(handle_one(s, poll.p, poll.len, NULL, 0, 4, now, &out, &id) == BOTSPACE_STATUS_INVALID_ARGUMENT && id == 77 &&
              strstr(last_error(), "requests[0].flags") != NULL,
          "handle: unknown flags are refused");
    CHECK(botspace_service_poll_parked(NULL, now, &id, &out) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_service_poll_parked(s, now, NULL, &out) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_service_poll_parked(s, now, &id, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "poll_parked: NULL arguments");
    CHECK(botspace_service_parked_timeout(NULL, &d) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_service_parked_timeout(s, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              botspace_service_cancel_parked(NULL, 1) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "parked_timeout, cancel_parked: NULL arguments");
    CHECK(botspace_service_parked_timeout(s, &d) == BOTSPACE_STATUS_OK && d == BOTSPACE_NO_DEADLINE,
          "parked_timeout: nothing parked");

    /* Parked, then answered by the commit of a human message. */
    CHECK(handle_one(s, poll.p, poll.len, NULL, 0, 0, now, &out, &id) == BOTSPACE_STATUS_OK && id != 0 && out.ptr == NULL &&
              out.len == 0,
          "handle: getUpdates with a timeout and nothing to return parks");
    uint64_t parked = id;
    CHECK(botspace_service_parked_timeout(s, &d) == BOTSPACE_STATUS_OK && d == now + 5000,
          "parked_timeout: the poll's deadline");
    CHECK(botspace_service_poll_parked(s, now, &id, &out) == BOTSPACE_STATUS_OK && id == 0 && out.ptr == NULL,
          "poll_parked: nothing ready before a commit");
    char body[256];
    snprintf(body, sizeof body, "{\"user_id\":\"%s\",\"chat_id\":\"%s\",\"text\":\"hi\"}", w.user, w.chat);
    json_free(admin(s, "sendUserMessage", body));
    CHECK(botspace_service_parked_timeout(s, &d) == BOTSPACE_STATUS_OK && d == 0, "parked_timeout: 0 once a commit made it due");
    CHECK(botspace_service_poll_parked(s, now, &id, &out) == BOTSPACE_STATUS_OK && id == parked && out.len > 12 &&
              memcmp(out.ptr, "HTTP/1.1 200", 12) == 0 &&
              memfind((const char *)out.ptr, out.len, "{\"ok\":true,\"result\":[{\"update_id\":2,\"type\":\"message_created\","),
          "poll_parked: the woken poll's answer holds the event");
    botspace_bytes_free(&out);
    CHECK(botspace_service_poll_parked(s, now, &id, &out) == BOTSPACE_STATUS_OK && id == 0, "poll_parked: one answer per poll");

    /* Past its deadline: []. */
    sb_free(&poll);
    build_post(&poll, "/bot/getUpdates", auth, "{\"offset\":3,\"timeout\":2}");
    handle_one(s, poll.p, poll.len, "10.0.0.1", 8, 0, now, &out, &id);
    parked = id;
    CHECK(parked != 0, "handle: parked again after the offset");
    CHECK(botspace_service_poll_parked(s, now + 1999, &id, &out) == BOTSPACE_STATUS_OK && id == 0,
          "poll_parked: not before the deadline");
    CHECK(botspace_service_poll_parked(s, now + 2000, &id, &out) == BOTSPACE_STATUS_OK && id == parked &&
              ends_with_body(&out, "{\"ok\":true,\"result\":[]}"),
          "poll_parked: [] at the deadline");
    botspace_bytes_free(&out);

    /* Cancelled: never answered. */
    handle_one(s, poll.p, poll.len, NULL, 0, 0, now, &out, &id);
    CHECK(id != 0 && botspace_service_cancel_parked(s, id) == BOTSPACE_STATUS_OK &&
              botspace_service_cancel_parked(s, id) == BOTSPACE_STATUS_OK,
          "cancel_parked: twice is harmless");
    CHECK(botspace_service_poll_parked(s, UINT64_MAX, &id, &out) == BOTSPACE_STATUS_OK && id == 0 &&
              botspace_service_parked_timeout(s, &d) == BOTSPACE_STATUS_OK && d == BOTSPACE_NO_DEADLINE,
          "cancel_parked: the poll is gone");

    /* The bytes entry point answers at once, as with timeout 0. */
    CHECK(botspace_service_handle_request(s, (const uint8_t *)poll.p, poll.len, &out) == BOTSPACE_STATUS_OK &&
              ends_with_body(&out, "{\"ok\":true,\"result\":[]}"),
          "handle_request: getUpdates with a timeout answers at once");
    botspace_bytes_free(&out);
    CHECK(handle_one(s, poll.p, poll.len, NULL, 0, BOTSPACE_INCOMING_AT_ONCE, now, &out, &id) == BOTSPACE_STATUS_OK && id == 0 &&
              ends_with_body(&out, "{\"ok\":true,\"result\":[]}") && botspace_service_parked_timeout(s, &d) == BOTSPACE_STATUS_OK &&
              d == BOTSPACE_NO_DEADLINE,
          "handle: getUpdates with a timeout, at once, answers []");
    botspace_bytes_free(&out);
    /* Anything else through handle is answered now. */
    sb_free(&poll);
    build_post(&poll, "/bot/getMe", auth, NULL);
    CHECK(handle_one(s, poll.p, poll.len, NULL, 0, 0, now, &out, &id) == BOTSPACE_STATUS_OK && id == 0 && out.len > 12 &&
              memcmp(out.ptr, "HTTP/1.1 200", 12) == 0,
          "handle: getMe is answered now");
    botspace_bytes_free(&out);
    sb_free(&poll);
    world_free(&w);
    botspace_service_free(&s);
}

static void test_requests(void) {
    botspace_service *s = open_service(BASE_CONFIG);
    const char *getme = "POST /bot/getMe HTTP/1.1\r\nHost: x\r\n\r\n";
    botspace_bytes sentinel = {(uint8_t *)(uintptr_t)0x1, 77};
    botspace_bytes out = sentinel;

    CHECK(botspace_service_handle_request(NULL, (const uint8_t *)getme, strlen(getme), &out) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              out.ptr == sentinel.ptr && out.len == 77,
          "handle_request: NULL service, output untouched");
    CHECK(botspace_service_handle_request(s, (const uint8_t *)getme, strlen(getme), NULL) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "handle_request: NULL out");
    CHECK(botspace_service_handle_request(s, NULL, 10, &out) == BOTSPACE_STATUS_NULL_ARGUMENT && out.ptr == sentinel.ptr,
          "handle_request: NULL request with a length");
    CHECK(strstr(last_error(), "request") != NULL, "handle_request: the error names the argument");
    CHECK(botspace_service_handle_request(s, NULL, 0, &out) == BOTSPACE_STATUS_OK && out.len > 12 &&
              memcmp(out.ptr, "HTTP/1.1 400", 12) == 0,
          "handle_request: NULL with length 0 is an empty request (400)");
    botspace_bytes_free(&out);
    CHECK(out.ptr == NULL && out.len == 0, "bytes_free resets the value");
    botspace_bytes_free(&out);
    botspace_bytes_free(NULL);
    CHECK(1, "bytes_free twice on the same variable, and with NULL, is harmless");
    CHECK(botspace_service_handle_request(s, (const uint8_t *)getme, strlen(getme), &out) == BOTSPACE_STATUS_OK &&
              memcmp(out.ptr, "HTTP/1.1 401", 12) == 0,
          "handle_request: getMe without a token is 401");
    botspace_bytes_free(&out);

    /* framing */
    botspace_framing f;
    memset(&f, 0x5a, sizeof f);
    CHECK(botspace_service_frame_request(NULL, (const uint8_t *)getme, 4, &f) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "frame_request: NULL service");
    CHECK(botspace_service_frame_request(s, NULL, 4, &f) == BOTSPACE_STATUS_NULL_ARGUMENT, "frame_request: NULL buf with a length");
    CHECK(botspace_service_frame_request(s, (const uint8_t *)getme, 4, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "frame_request: NULL out");
    CHECK(botspace_service_frame_request(s, NULL, 0, &f) == BOTSPACE_STATUS_OK && f.kind == BOTSPACE_FRAMING_KIND_INCOMPLETE &&
              f.error_response.ptr == NULL,
          "frame_request: empty input is incomplete");
    botspace_bytes_free(&f.error_response);
    sbuf two = {0};
    sb_str(&two, getme);
    sb_str(&two, "POST /bot/sendMessage HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
    CHECK(botspace_service_frame_request(s, (const uint8_t *)two.p, two.len, &f) == BOTSPACE_STATUS_OK &&
              f.kind == BOTSPACE_FRAMING_KIND_COMPLETE && f.length == strlen(getme),
          "frame_request: the first of two pipelined requests");
    CHECK(botspace_service_frame_request(s, (const uint8_t *)two.p + strlen(getme), two.len - strlen(getme) - 1, &f) ==
                  BOTSPACE_STATUS_OK &&
              f.kind == BOTSPACE_FRAMING_KIND_INCOMPLETE,
          "frame_request: a body one byte short is incomplete");
    CHECK(botspace_service_frame_request(s, (const uint8_t *)two.p + strlen(getme), two.len - strlen(getme), &f) ==
                  BOTSPACE_STATUS_OK &&
              f.kind == BOTSPACE_FRAMING_KIND_COMPLETE && f.length == two.len - strlen(getme),
          "frame_request: the second request");
    sb_free(&two);
    const char *huge = "POST /bot/sendMessage HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n";
    CHECK(botspace_service_frame_request(s, (const uint8_t *)huge, strlen(huge), &f) == BOTSPACE_STATUS_OK &&
              f.kind == BOTSPACE_FRAMING_KIND_INVALID && f.error_response.len > 12 &&
              memcmp(f.error_response.ptr, "HTTP/1.1 413", 12) == 0,
          "frame_request: an oversized body is invalid with a 413 response");
    botspace_bytes_free(&f.error_response);
    const char *garbage = "\x01\x02 not http\r\n\r\n";
    CHECK(botspace_service_frame_request(s, (const uint8_t *)garbage, strlen(garbage), &f) == BOTSPACE_STATUS_OK &&
              f.kind == BOTSPACE_FRAMING_KIND_INVALID && memcmp(f.error_response.ptr, "HTTP/1.1 400", 12) == 0,
          "frame_request: garbage is invalid with a 400 response");
    botspace_bytes_free(&f.error_response);

    /* many at once */
    const uint32_t at_once = BOTSPACE_INCOMING_AT_ONCE | BOTSPACE_INCOMING_UNORDERED;
    botspace_handled outs[3] = {{sentinel, 9}, {sentinel, 9}, {sentinel, 9}};
    CHECK(botspace_service_handle(s, NULL, 0, 0, NULL) == BOTSPACE_STATUS_OK, "handle: count 0 with NULL arrays");
    CHECK(botspace_service_handle(NULL, NULL, 0, 0, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "handle: NULL service");
    botspace_incoming reqs[3] = {{(const uint8_t *)getme, strlen(getme), NULL, 0, at_once},
                                 {NULL, 0, NULL, 0, at_once},
                                 {(const uint8_t *)getme, strlen(getme), NULL, 0, at_once}};
    CHECK(botspace_service_handle(s, NULL, 3, 0, outs) == BOTSPACE_STATUS_NULL_ARGUMENT && outs[0].response.ptr == sentinel.ptr,
          "handle: NULL requests, outputs untouched");
    CHECK(botspace_service_handle(s, reqs, 3, 0, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "handle: NULL out");
    botspace_incoming badreqs[2] = {{(const uint8_t *)getme, strlen(getme), NULL, 0, 0}, {NULL, 3, NULL, 0, 0}};
    CHECK(botspace_service_handle(s, badreqs, 2, 0, outs) == BOTSPACE_STATUS_NULL_ARGUMENT && outs[0].response.ptr == sentinel.ptr &&
              strstr(last_error(), "requests[1]") != NULL,
          "handle: a NULL request with a length, outputs untouched");
    CHECK(botspace_service_handle(s, reqs, 3, 0, outs) == BOTSPACE_STATUS_OK && memcmp(outs[0].response.ptr, "HTTP/1.1 401", 12) == 0 &&
              memcmp(outs[1].response.ptr, "HTTP/1.1 400", 12) == 0 && memcmp(outs[2].response.ptr, "HTTP/1.1 401", 12) == 0 &&
              outs[0].poll_id == 0 && outs[1].poll_id == 0 && outs[2].poll_id == 0,
          "handle: three answers in order (an empty one is 400)");
    for (int i = 0; i < 3; i++) botspace_bytes_free(&outs[i].response);

    botspace_service_free(&s);
}

/* ------------------------------------------------------------------------ */
/* 3. Gateway */

typedef struct {
    pthread_mutex_t mu;
    int calls;
    char last[128];
} wake_log;

static void on_wake(void *user_data, const char *bot_id, size_t len) {
    wake_log *w = user_data;
    pthread_mutex_lock(&w->mu);
    w->calls++;
    if (len < sizeof w->last && strlen(bot_id) == len) memcpy(w->last, bot_id, len + 1);
    pthread_mutex_unlock(&w->mu);
}

/* A masked client text frame (payload < 126 bytes). */
static void ws_text(sbuf *out, const char *text) {
    size_t n = strlen(text);
    unsigned char hdr[6] = {0x81, (unsigned char)(0x80 | n), 0x12, 0x34, 0x56, 0x78};
    sb_add(out, hdr, 6);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i] ^ hdr[2 + i % 4];
        sb_add(out, &c, 1);
    }
}

/* Splits server frames: returns the count; texts[i] gets text payloads,
 * close_code the code of a close frame (0 if none). */
/* One host round at `now`: handle_timeout, then poll_transmit until it gives
 * nothing; the bytes replace `into`'s content. */
static botspace_status gw_round(botspace_gateway *gw, uint64_t now, sbuf *into) {
    into->len = 0;
    botspace_status st = botspace_gateway_handle_timeout(gw, now);
    while (st == BOTSPACE_STATUS_OK) {
        botspace_bytes b = {NULL, 0};
        st = botspace_gateway_poll_transmit(gw, &b);
        size_t n = b.len;
        if (st == BOTSPACE_STATUS_OK && n > 0) sb_add(into, b.ptr, n);
        botspace_bytes_free(&b);
        if (n == 0) break;
    }
    return st;
}

static int ws_frames(const uint8_t *p, size_t n, char texts[][2048], int max, int *close_code) {
    int count = 0;
    size_t i = 0;
    *close_code = 0;
    while (i + 2 <= n && count < max) {
        int op = p[i] & 0x0f;
        size_t len = p[i + 1] & 0x7f, off = 2;
        if (len == 126) {
            len = ((size_t)p[i + 2] << 8) | p[i + 3];
            off = 4;
        } else if (len == 127) {
            len = 0;
            for (int k = 0; k < 8; k++) len = (len << 8) | p[i + 2 + k];
            off = 10;
        }
        if (i + off + len > n) break;
        const uint8_t *pl = p + i + off;
        if (op == 1) {
            size_t m = len < 2047 ? len : 2047;
            memcpy(texts[count], pl, m);
            texts[count][m] = 0;
        } else {
            texts[count][0] = 0;
            if (op == 8 && len >= 2) *close_code = (pl[0] << 8) | pl[1];
        }
        count++;
        i += off + len;
    }
    return count;
}

static void test_gateway(void) {
    botspace_service *s = open_service(BASE_CONFIG);
    wake_log wl = {PTHREAD_MUTEX_INITIALIZER, 0, ""};
    CHECK(botspace_service_set_wake_callback(s, on_wake, &wl) == BOTSPACE_STATUS_OK, "set_wake_callback");
    world w;
    world_make(s, &w, "free");
    CHECK(wl.calls >= 1 && strcmp(wl.last, w.bot) == 0, "wake-up with the bot id after startBot");

    sbuf up = {0};
    sb_fmt(&up,
           "GET /bot/gateway HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bot %s\r\n\r\n",
           w.token);
    uint64_t t0 = 0;
    botspace_service_now_ms(s, &t0);
    botspace_bytes resp = {NULL, 0};
    botspace_gateway *gw = (botspace_gateway *)(uintptr_t)0x1;
    CHECK(botspace_gateway_accept(NULL, (const uint8_t *)up.p, up.len, t0, &resp, &gw) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "gateway_accept: NULL service");
    CHECK(botspace_gateway_accept(s, NULL, 5, t0, &resp, &gw) == BOTSPACE_STATUS_NULL_ARGUMENT, "gateway_accept: NULL request");
    CHECK(botspace_gateway_accept(s, (const uint8_t *)up.p, up.len, t0, NULL, &gw) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "gateway_accept: NULL out_response");
    CHECK(botspace_gateway_accept(s, (const uint8_t *)up.p, up.len, t0, &resp, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              resp.ptr == NULL,
          "gateway_accept: NULL out_gateway, nothing written");
    CHECK(botspace_gateway_accept(s, NULL, 0, t0, &resp, &gw) == BOTSPACE_STATUS_OK && gw == NULL && resp.len > 12 &&
              memcmp(resp.ptr, "HTTP/1.1 400", 12) == 0,
          "gateway_accept: an empty request is refused with 400");
    botspace_bytes_free(&resp);
    const char *noauth = "GET /bot/gateway HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                         "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    CHECK(botspace_gateway_accept(s, (const uint8_t *)noauth, strlen(noauth), t0, &resp, &gw) == BOTSPACE_STATUS_OK && gw == NULL &&
              memcmp(resp.ptr, "HTTP/1.1 401", 12) == 0,
          "gateway_accept: no token is 401");
    botspace_bytes_free(&resp);
    sbuf plain = {0};
    sb_fmt(&plain, "GET /bot/gateway HTTP/1.1\r\nHost: x\r\nAuthorization: Bot %s\r\n\r\n", w.token);
    CHECK(botspace_gateway_accept(s, (const uint8_t *)plain.p, plain.len, t0, &resp, &gw) == BOTSPACE_STATUS_OK && gw == NULL &&
              memcmp(resp.ptr, "HTTP/1.1 426", 12) == 0,
          "gateway_accept: no upgrade is 426");
    botspace_bytes_free(&resp);
    sb_free(&plain);

    CHECK(botspace_gateway_accept(s, (const uint8_t *)up.p, up.len, t0, &resp, &gw) == BOTSPACE_STATUS_OK && gw != NULL &&
              memcmp(resp.ptr, "HTTP/1.1 101", 12) == 0 &&
              strstr((const char *)resp.ptr, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") != NULL,
          "gateway_accept: 101 with the RFC 6455 accept key");
    botspace_bytes_free(&resp);
    botspace_gateway *second = NULL;
    CHECK(botspace_gateway_accept(s, (const uint8_t *)up.p, up.len, t0, &resp, &second) == BOTSPACE_STATUS_OK && second == NULL &&
              memcmp(resp.ptr, "HTTP/1.1 429", 12) == 0,
          "gateway_accept: a free bot's second connection is 429");
    botspace_bytes_free(&resp);

    const char *id = NULL;
    CHECK(botspace_gateway_bot_id(gw, &id) == BOTSPACE_STATUS_OK && id && strcmp(id, w.bot) == 0, "gateway_bot_id");
    CHECK(botspace_gateway_bot_id(NULL, &id) == BOTSPACE_STATUS_NULL_ARGUMENT, "gateway_bot_id: NULL gateway");
    CHECK(botspace_gateway_bot_id(gw, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "gateway_bot_id: NULL out");

    uint64_t now = 0, deadline = 1;
    botspace_service_now_ms(s, &now);
    CHECK(botspace_gateway_poll_timeout(gw, &deadline) == BOTSPACE_STATUS_OK && deadline == now + 2 * 41250 + 1,
          "poll_timeout: the first instant past two heartbeat intervals");
    CHECK(botspace_gateway_poll_timeout(NULL, &deadline) == BOTSPACE_STATUS_NULL_ARGUMENT, "poll_timeout: NULL gateway");
    CHECK(botspace_gateway_poll_timeout(gw, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "poll_timeout: NULL out");
    botspace_bytes out = {NULL, 0};
    CHECK(botspace_gateway_poll_transmit(NULL, &out) == BOTSPACE_STATUS_NULL_ARGUMENT, "poll_transmit: NULL gateway");
    CHECK(botspace_gateway_poll_transmit(gw, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "poll_transmit: NULL out");
    CHECK(botspace_gateway_handle_timeout(NULL, now) == BOTSPACE_STATUS_NULL_ARGUMENT, "handle_timeout: NULL gateway");
    botspace_gateway_event ev;
    CHECK(botspace_gateway_poll_event(NULL, &ev) == BOTSPACE_STATUS_NULL_ARGUMENT, "poll_event: NULL gateway");
    CHECK(botspace_gateway_poll_event(gw, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "poll_event: NULL out");
    CHECK(botspace_gateway_poll_event(gw, &ev) == BOTSPACE_STATUS_OK && ev.kind == BOTSPACE_GATEWAY_EVENT_KIND_NONE &&
              ev.reason == NULL,
          "poll_event: nothing while open");
    static char texts[8][2048];
    int code = 0;
    sbuf got = {0};
    CHECK(gw_round(gw, now, &got) == BOTSPACE_STATUS_OK, "a round: handle_timeout, then poll_transmit until empty");
    int nf = ws_frames((const uint8_t *)got.p, got.len, texts, 8, &code);
    CHECK(nf == 2 && strncmp(texts[0], "{\"op\":\"hello\"", 13) == 0 && strstr(texts[1], "\"seq\":1") &&
              strstr(texts[1], "bot_started"),
          "hello, then the replayed bot_started event");
    CHECK(botspace_gateway_poll_transmit(gw, &out) == BOTSPACE_STATUS_OK && out.ptr == NULL && out.len == 0,
          "poll_transmit with nothing to send gives {NULL, 0}");

    /* heartbeat, given in two pieces (a partial frame waits) */
    sbuf hb = {0};
    ws_text(&hb, "{\"op\":\"heartbeat\"}");
    CHECK(botspace_gateway_handle_input(NULL, (const uint8_t *)hb.p, hb.len, now) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "handle_input: NULL gateway");
    CHECK(botspace_gateway_handle_input(gw, NULL, 3, now) == BOTSPACE_STATUS_NULL_ARGUMENT, "handle_input: NULL bytes with a length");
    CHECK(botspace_gateway_handle_input(gw, NULL, 0, now) == BOTSPACE_STATUS_OK, "handle_input: NULL with length 0");
    CHECK(botspace_gateway_handle_input(gw, (const uint8_t *)hb.p, 5, now) == BOTSPACE_STATUS_OK, "handle_input: a partial frame");
    CHECK(gw_round(gw, now, &got) == BOTSPACE_STATUS_OK && got.len == 0, "nothing for a partial frame");
    CHECK(botspace_gateway_handle_input(gw, (const uint8_t *)hb.p + 5, hb.len - 5, now) == BOTSPACE_STATUS_OK,
          "handle_input: the rest");
    CHECK(gw_round(gw, now, &got) == BOTSPACE_STATUS_OK, "a round after a heartbeat");
    nf = ws_frames((const uint8_t *)got.p, got.len, texts, 8, &code);
    CHECK(nf == 1 && strcmp(texts[0], "{\"op\":\"heartbeat_ack\"}") == 0, "heartbeat_ack");
    sb_free(&hb);

    /* a human message wakes the bot up; the next transmit delivers it */
    int before = wl.calls;
    char body[512];
    snprintf(body, sizeof body, "{\"user_id\":\"%s\",\"chat_id\":\"%s\",\"text\":\"hello bot\"}", w.user, w.chat);
    json_free(admin(s, "sendUserMessage", body));
    CHECK(wl.calls == before + 1 && strcmp(wl.last, w.bot) == 0, "wake-up with the bot id after sendUserMessage");
    CHECK(gw_round(gw, now, &got) == BOTSPACE_STATUS_OK, "a round after the wake-up");
    nf = ws_frames((const uint8_t *)got.p, got.len, texts, 8, &code);
    CHECK(nf == 1 && strstr(texts[0], "\"seq\":2") && strstr(texts[0], "message_created") && strstr(texts[0], "hello bot"),
          "the message_created event");

    bool closed = true;
    CHECK(botspace_gateway_is_closed(gw, &closed) == BOTSPACE_STATUS_OK && !closed, "is_closed: open");
    CHECK(botspace_gateway_is_closed(NULL, &closed) == BOTSPACE_STATUS_NULL_ARGUMENT, "is_closed: NULL gateway");
    CHECK(botspace_gateway_is_closed(gw, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "is_closed: NULL out");

    /* token rotation: wake-up, then close 4004, reported once as an event */
    before = wl.calls;
    snprintf(body, sizeof body, "{\"bot_id\":\"%s\"}", w.bot);
    jval *rot = admin(s, "rotateBotToken", body);
    char *new_token = dup_str(json_get(json_get(rot, "result"), "token"));
    json_free(rot);
    CHECK(wl.calls == before + 1 && strcmp(wl.last, w.bot) == 0, "wake-up after rotateBotToken");
    CHECK(gw_round(gw, now, &got) == BOTSPACE_STATUS_OK, "a round after the rotation");
    nf = ws_frames((const uint8_t *)got.p, got.len, texts, 8, &code);
    CHECK(nf == 1 && code == 4004, "close 4004 after a token rotation");
    CHECK(botspace_gateway_poll_event(gw, &ev) == BOTSPACE_STATUS_OK && ev.kind == BOTSPACE_GATEWAY_EVENT_KIND_CLOSED &&
              ev.close_code == 4004 && strcmp(ev.reason, "authentication_failed") == 0,
          "poll_event: closed 4004 authentication_failed");
    CHECK(botspace_gateway_poll_event(gw, &ev) == BOTSPACE_STATUS_OK && ev.kind == BOTSPACE_GATEWAY_EVENT_KIND_NONE,
          "poll_event: the close is reported once");
    CHECK(botspace_gateway_is_closed(gw, &closed) == BOTSPACE_STATUS_OK && closed, "is_closed after the close frame");
    CHECK(botspace_gateway_poll_timeout(gw, &deadline) == BOTSPACE_STATUS_OK && deadline == BOTSPACE_NO_DEADLINE,
          "poll_timeout: none once closed");
    botspace_gateway_free(&gw);
    CHECK(gw == NULL, "gateway_free sets the handle to NULL");
    botspace_gateway_free(&gw);
    botspace_gateway_free(NULL);
    CHECK(1, "gateway_free twice on the same variable, and with NULL, is harmless");

    /* heartbeat timeout (4009) with the manual clock; then a gateway that
     * outlives its service handle */
    sb_free(&up);
    sb_fmt(&up,
           "GET /bot/gateway HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bot %s\r\n\r\n",
           new_token);
    CHECK(botspace_gateway_accept(s, (const uint8_t *)up.p, up.len, now, &resp, &gw) == BOTSPACE_STATUS_OK && gw != NULL,
          "the slot is free again after gateway_free; reconnect with the new token");
    botspace_bytes_free(&resp);
    gw_round(gw, now, &got);
    json_free(admin(s, "advanceClock", "{\"seconds\":83}"));
    botspace_service_now_ms(s, &now);
    CHECK(botspace_gateway_poll_timeout(gw, &deadline) == BOTSPACE_STATUS_OK && deadline < now, "the timeout has passed");
    CHECK(gw_round(gw, now, &got) == BOTSPACE_STATUS_OK, "a round after the timeout");
    nf = ws_frames((const uint8_t *)got.p, got.len, texts, 8, &code);
    CHECK(nf == 1 && code == 4009, "close 4009 after two heartbeat intervals without a heartbeat");
    CHECK(botspace_gateway_poll_event(gw, &ev) == BOTSPACE_STATUS_OK && ev.close_code == 4009 &&
              strcmp(ev.reason, "session_timeout") == 0,
          "poll_event: closed 4009 session_timeout");
    botspace_gateway_free(&gw);

    /* the host ends a connection with 4008 slow_consumer: the library
     * encodes the close frame */
    CHECK(botspace_gateway_accept(s, (const uint8_t *)up.p, up.len, now, &resp, &gw) == BOTSPACE_STATUS_OK && gw != NULL,
          "a connection for the host's close");
    botspace_bytes_free(&resp);
    gw_round(gw, now, &got);
    CHECK(botspace_gateway_close(NULL, BOTSPACE_CLOSE_SLOW_CONSUMER) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "gateway_close: NULL gateway");
    CHECK(botspace_gateway_close(gw, 4001) == BOTSPACE_STATUS_INVALID_ARGUMENT &&
              strstr(last_error(), "close code 4001 is not one a host may send") != NULL,
          "gateway_close: one of the library's own codes is refused");
    CHECK(botspace_gateway_is_closed(gw, &closed) == BOTSPACE_STATUS_OK && !closed &&
              botspace_gateway_poll_event(gw, &ev) == BOTSPACE_STATUS_OK && ev.kind == BOTSPACE_GATEWAY_EVENT_KIND_NONE,
          "gateway_close: a refused code changes nothing");
    CHECK(botspace_gateway_close(gw, BOTSPACE_CLOSE_SLOW_CONSUMER) == BOTSPACE_STATUS_OK, "gateway_close 4008");
    CHECK(gw_round(gw, now, &got) == BOTSPACE_STATUS_OK, "a round after the host's close");
    nf = ws_frames((const uint8_t *)got.p, got.len, texts, 8, &code);
    CHECK(nf == 1 && code == 4008 && got.len == 2 + 2 + strlen("slow_consumer") && (unsigned char)got.p[0] == 0x88 &&
              memcmp(got.p + 4, "slow_consumer", strlen("slow_consumer")) == 0,
          "the one frame is close 4008 slow_consumer");
    CHECK(botspace_gateway_poll_event(gw, &ev) == BOTSPACE_STATUS_OK && ev.kind == BOTSPACE_GATEWAY_EVENT_KIND_CLOSED &&
              ev.close_code == 4008 && strcmp(ev.reason, "slow_consumer") == 0,
          "poll_event: closed 4008 slow_consumer");
    CHECK(botspace_gateway_is_closed(gw, &closed) == BOTSPACE_STATUS_OK && closed, "is_closed after the host's close");
    CHECK(botspace_gateway_close(gw, BOTSPACE_CLOSE_SERVER_SHUTDOWN) == BOTSPACE_STATUS_OK &&
              gw_round(gw, now, &got) == BOTSPACE_STATUS_OK && got.len == 0,
          "gateway_close on an ended connection sends nothing more");
    botspace_gateway_free(&gw);

    /* the output budget, for a host that reports what it holds: pings are
     * taken until their pongs fill the reply budget, then input waits */
    CHECK(botspace_gateway_accept(s, (const uint8_t *)up.p, up.len, now, &resp, &gw) == BOTSPACE_STATUS_OK && gw != NULL,
          "a connection for the output budget");
    botspace_bytes_free(&resp);
    gw_round(gw, now, &got);
    bool yes = true;
    CHECK(botspace_gateway_handle_unsent(NULL, 0, now) == BOTSPACE_STATUS_NULL_ARGUMENT, "handle_unsent: NULL gateway");
    CHECK(botspace_gateway_wants_input(gw, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "wants_input: NULL out");
    CHECK(botspace_gateway_wants_transmit(NULL, &yes) == BOTSPACE_STATUS_NULL_ARGUMENT, "wants_transmit: NULL gateway");
    CHECK(botspace_gateway_handle_unsent(gw, BOTSPACE_GATEWAY_OUTPUT_BUDGET, now) == BOTSPACE_STATUS_OK,
          "handle_unsent: the host holds its budget");
    sbuf ping = {0};
    char payload[125];
    memset(payload, 'p', sizeof payload);
    ws_client_frame(&ping, 0x9, payload, sizeof payload);
    size_t fed = 0;
    while (fed < 1000 && botspace_gateway_wants_input(gw, &yes) == BOTSPACE_STATUS_OK && yes) {
        botspace_gateway_handle_input(gw, (const uint8_t *)ping.p, ping.len, now);
        fed++;
    }
    /* 64 KiB of 127-byte pongs: 516, and the one that crossed it */
    CHECK(fed >= BOTSPACE_GATEWAY_REPLY_BUDGET / 127 && fed <= BOTSPACE_GATEWAY_REPLY_BUDGET / 127 + 3,
          "input stops at the reply budget");
    botspace_bytes b = {NULL, 0};
    CHECK(botspace_gateway_poll_transmit(gw, &b) == BOTSPACE_STATUS_OK && b.len == 0,
          "nothing more while the host holds its budget");
    CHECK(botspace_gateway_wants_transmit(gw, &yes) == BOTSPACE_STATUS_OK && !yes, "wants_transmit: no room");
    botspace_gateway_handle_unsent(gw, 0, now);
    CHECK(botspace_gateway_wants_transmit(gw, &yes) == BOTSPACE_STATUS_OK && yes, "wants_transmit: room again");
    CHECK(botspace_gateway_poll_transmit(gw, &b) == BOTSPACE_STATUS_OK && b.len == fed * 127,
          "the pongs held come out once the bot reads");
    botspace_bytes_free(&b);
    sb_free(&ping);
    botspace_gateway_free(&gw);

    /* held at the budget for two heartbeat intervals: 4008 from the library */
    CHECK(botspace_gateway_accept(s, (const uint8_t *)up.p, up.len, now, &resp, &gw) == BOTSPACE_STATUS_OK && gw != NULL,
          "a connection for the slow-consumer time");
    botspace_bytes_free(&resp);
    gw_round(gw, now, &got);
    sbuf beat = {0};
    ws_text(&beat, "{\"op\":\"heartbeat\"}");
    botspace_gateway_handle_input(gw, (const uint8_t *)beat.p, beat.len, now);
    sb_free(&beat);
    botspace_gateway_handle_unsent(gw, BOTSPACE_GATEWAY_OUTPUT_BUDGET, now);
    CHECK(botspace_gateway_poll_timeout(gw, &deadline) == BOTSPACE_STATUS_OK && deadline == now + 2 * 41250 + 1,
          "poll_timeout: the slow-consumer deadline");
    botspace_gateway_handle_timeout(gw, now + 2 * 41250);
    CHECK(botspace_gateway_poll_event(gw, &ev) == BOTSPACE_STATUS_OK && ev.kind == BOTSPACE_GATEWAY_EVENT_KIND_NONE,
          "not closed at two intervals exactly");
    botspace_gateway_handle_timeout(gw, now + 2 * 41250 + 1);
    CHECK(botspace_gateway_poll_event(gw, &ev) == BOTSPACE_STATUS_OK && ev.kind == BOTSPACE_GATEWAY_EVENT_KIND_CLOSED &&
              ev.close_code == 4008 && strcmp(ev.reason, "slow_consumer") == 0,
          "poll_event: closed 4008 slow_consumer by the library");
    botspace_gateway_free(&gw);

    CHECK(botspace_gateway_accept(s, (const uint8_t *)up.p, up.len, now, &resp, &gw) == BOTSPACE_STATUS_OK && gw != NULL,
          "a third connection");
    botspace_bytes_free(&resp);
    botspace_service_free(&s);
    CHECK(gw_round(gw, now, &got) == BOTSPACE_STATUS_OK && got.len > 0, "a gateway outlives its service handle");
    botspace_gateway_free(&gw);
    sb_free(&got);

    free(new_token);
    sb_free(&up);
    world_free(&w);
}

/* The gateway link: the session with its unsent output and its closing
 * rules, as the C server drives it. */
static size_t link_transmit(botspace_gateway_link *l, const uint8_t **p) {
    size_t n = 0;
    *p = NULL;
    botspace_gateway_link_poll_transmit(l, p, &n);
    return n;
}

static botspace_gateway_link_info link_info(const botspace_gateway_link *l) {
    botspace_gateway_link_info i;
    memset(&i, 0xff, sizeof i);
    botspace_gateway_link_get_info(l, &i);
    return i;
}

static void test_gateway_link(void) {
    botspace_service *s = open_service(BASE_CONFIG);
    world w;
    world_make(s, &w, "free");
    sbuf up = {0};
    sb_fmt(&up,
           "GET /bot/gateway HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bot %s\r\n\r\n",
           w.token);
    uint64_t now = 0;
    botspace_service_now_ms(s, &now);
    botspace_bytes resp = {NULL, 0};
    botspace_gateway *gw = NULL;
    CHECK(botspace_gateway_accept(s, (const uint8_t *)up.p, up.len, now, &resp, &gw) == BOTSPACE_STATUS_OK && gw != NULL,
          "link: a gateway to make it from");
    botspace_gateway_link *l = NULL;
    botspace_gateway *none = NULL;
    CHECK(botspace_gateway_link_new(&none, resp.ptr, resp.len, &l) == BOTSPACE_STATUS_NULL_ARGUMENT && l == NULL,
          "link_new: a NULL gateway");
    CHECK(botspace_gateway_link_new(&gw, resp.ptr, resp.len, &l) == BOTSPACE_STATUS_OK && l != NULL && gw == NULL,
          "link_new takes the gateway (set to NULL)");
    size_t head = resp.len;
    const char *id = NULL;
    CHECK(botspace_gateway_link_bot_id(l, &id) == BOTSPACE_STATUS_OK && id && strcmp(id, w.bot) == 0, "link_bot_id");

    uint64_t mono = 5000;
    botspace_gateway_link_info i = link_info(l);
    CHECK(i.state == BOTSPACE_CONNECTION_STATE_OPEN && i.wants_read && i.unsent == head && i.close_code == 0 &&
              i.timeout_ms == 250,
          "link: open, the 101 to send, looked at every tick under the manual clock");
    CHECK(botspace_gateway_link_handle_timeout(l, mono) == BOTSPACE_STATUS_OK, "link_handle_timeout");
    const uint8_t *p = NULL;
    size_t n = link_transmit(l, &p);
    static char texts[8][2048];
    int code = 0;
    CHECK(n > head && memcmp(p, resp.ptr, head) == 0 && ws_frames(p + head, n - head, texts, 8, &code) == 2 &&
              strncmp(texts[0], "{\"op\":\"hello\"", 13) == 0 && strstr(texts[1], "bot_started"),
          "link_poll_transmit: the 101, then hello and bot_started");
    CHECK(link_info(l).timeout_ms == mono + 250, "link: the next look is a tick after the last call");
    CHECK(botspace_gateway_link_sent(l, n + 1, mono) == BOTSPACE_STATUS_INVALID_ARGUMENT,
          "link_sent: more than poll_transmit holds is refused");
    /* The socket takes the 101 and 3 bytes of hello; then a stop. */
    CHECK(botspace_gateway_link_sent(l, head + 3, mono) == BOTSPACE_STATUS_OK, "link_sent");
    bool closed = false;
    CHECK(botspace_gateway_link_close(l, 4001, mono, &closed) == BOTSPACE_STATUS_INVALID_ARGUMENT,
          "link_close: a code of the library's own is refused");
    CHECK(botspace_gateway_link_close(l, BOTSPACE_CLOSE_SERVER_SHUTDOWN, mono + 10, &closed) == BOTSPACE_STATUS_OK && closed,
          "link_close 1001");
    CHECK(botspace_gateway_link_close(l, BOTSPACE_CLOSE_SERVER_SHUTDOWN, mono + 10, &closed) == BOTSPACE_STATUS_OK && !closed,
          "link_close: once");
    i = link_info(l);
    CHECK(i.state == BOTSPACE_CONNECTION_STATE_CLOSING && i.close_code == 1001 && i.timeout_ms == mono + 10 + 1000 && i.wants_read,
          "link: closing, 1001, a second for its last bytes, input discarded");
    botspace_gateway *again = NULL;
    botspace_bytes resp2 = {NULL, 0};
    CHECK(botspace_gateway_accept(s, (const uint8_t *)up.p, up.len, now, &resp2, &again) == BOTSPACE_STATUS_OK && again != NULL,
          "link: the free bot's slot is given back at the close");
    botspace_gateway_free(&again);
    botspace_bytes_free(&resp2);
    n = link_transmit(l, &p);
    /* The rest of hello, then the close frame: bot_started, not begun, is dropped. */
    size_t hello = strlen(texts[0]) + 2 + (strlen(texts[0]) > 125 ? 2 : 0);
    CHECK(n == hello - 3 + 2 + 2 + 15 && ws_frames(p + hello - 3, n - (hello - 3), texts, 8, &code) == 1 && code == 1001 &&
              memcmp(p + hello - 3 + 4, "server_shutdown", 15) == 0,
          "link_poll_transmit: the rest of the frame being written, then the close");
    CHECK(botspace_gateway_link_handle_input(l, (const uint8_t *)"xyz", 3, mono + 20) == BOTSPACE_STATUS_OK &&
              link_info(l).state == BOTSPACE_CONNECTION_STATE_CLOSING,
          "link: input while closing is discarded");
    CHECK(botspace_gateway_link_sent(l, n, mono + 30) == BOTSPACE_STATUS_OK &&
              link_info(l).state == BOTSPACE_CONNECTION_STATE_LINGERING && link_transmit(l, &p) == 0,
          "link: all sent, lingering");
    CHECK(botspace_gateway_link_handle_timeout(l, mono + 10 + 999) == BOTSPACE_STATUS_OK &&
              link_info(l).state == BOTSPACE_CONNECTION_STATE_LINGERING,
          "link: lingering until its time");
    CHECK(botspace_gateway_link_handle_eof(l, mono + 1100) == BOTSPACE_STATUS_OK, "link_handle_eof");
    i = link_info(l);
    CHECK(i.state == BOTSPACE_CONNECTION_STATE_CLOSED && !i.wants_read && i.timeout_ms == BOTSPACE_NO_DEADLINE && i.unsent == 0,
          "link: the bot's EOF ends the linger");
    CHECK(botspace_gateway_link_handle_timeout(NULL, mono) == BOTSPACE_STATUS_NULL_ARGUMENT, "link_handle_timeout: NULL link");
    CHECK(botspace_gateway_link_get_info(l, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "link_get_info: NULL out");
    botspace_gateway_link_free(&l);
    CHECK(l == NULL, "link_free sets NULL");
    botspace_gateway_link_free(&l);
    botspace_gateway_link_free(NULL);
    botspace_bytes_free(&resp);
    sb_free(&up);
    world_free(&w);
    botspace_service_free(&s);
}

/* ------------------------------------------------------------------------ */
/* 4. Threads */

#define THREADS 8

typedef struct {
    botspace_service *svc;
    int index, iters;
    int errors;
    char detail[256];
    world w;
} worker;

static pthread_mutex_t wake_mu = PTHREAD_MUTEX_INITIALIZER;
static long wake_total;

static void count_wake(void *user_data, const char *bot_id, size_t len) {
    (void)user_data;
    if (strncmp(bot_id, "bot_", 4) != 0 || strlen(bot_id) != len) abort();
    pthread_mutex_lock(&wake_mu);
    wake_total++;
    pthread_mutex_unlock(&wake_mu);
}

static void *hammer(void *arg) {
    worker *k = arg;
    world_make(k->svc, &k->w, "free");
    char auth[128], send_body[256];
    snprintf(auth, sizeof auth, "Bot %s", k->w.token);
    sbuf getme = {0}, send = {0};
    build_post(&getme, "/bot/getMe", auth, NULL);
    snprintf(send_body, sizeof send_body, "{\"chat_id\":\"%s\",\"text\":\"from thread %d\"}", k->w.chat, k->index);
    build_post(&send, "/bot/sendMessage", auth, send_body);
    long expect_id = 1;
    for (int i = 0; i < k->iters && k->errors == 0; i++) {
        response r;
        if (!request(k->svc, getme.p, getme.len, &r) || r.status != 200 || !strstr(r.body, k->w.bot)) {
            k->errors++;
            snprintf(k->detail, sizeof k->detail, "getMe: %d", r.status);
        }
        response_free(&r);
        if (i % 8 == 7) {
            botspace_incoming reqs[4];
            botspace_handled outs[4];
            for (int j = 0; j < 4; j++) {
                botspace_incoming one = {(const uint8_t *)send.p, send.len, NULL, 0, BOTSPACE_INCOMING_AT_ONCE};
                reqs[j] = one;
            }
            if (botspace_service_handle(k->svc, reqs, 4, 0, outs) != BOTSPACE_STATUS_OK) {
                k->errors++;
                snprintf(k->detail, sizeof k->detail, "batch: %s", last_error());
                continue;
            }
            for (int j = 0; j < 4; j++) {
                char want[64];
                snprintf(want, sizeof want, "\"message_id\":\"%ld\"", expect_id++);
                char err[64];
                memset(&r, 0, sizeof r);
                if (!parse_response(outs[j].response.ptr, outs[j].response.len, &r, err, sizeof err) || r.status != 200 ||
                    !strstr(r.body, want)) {
                    k->errors++;
                    snprintf(k->detail, sizeof k->detail, "batch send %d: %.200s", j, r.body ? r.body : err);
                }
                response_free(&r);
                botspace_bytes_free(&outs[j].response);
            }
        } else {
            char want[64];
            snprintf(want, sizeof want, "\"message_id\":\"%ld\"", expect_id++);
            if (!request(k->svc, send.p, send.len, &r) || r.status != 200 || !strstr(r.body, want)) {
                k->errors++;
                snprintf(k->detail, sizeof k->detail, "sendMessage: %.200s", r.body ? r.body : "");
            }
            response_free(&r);
        }
        /* per-thread error messages */
        if (i % 16 == 0) {
            if (botspace_service_handle_request(k->svc, (const uint8_t *)getme.p, getme.len, NULL) != BOTSPACE_STATUS_NULL_ARGUMENT ||
                strcmp(last_error(), "argument `out_response` is NULL") != 0) {
                k->errors++;
                snprintf(k->detail, sizeof k->detail, "last error: %s", last_error());
            }
        }
    }
    sb_free(&getme);
    sb_free(&send);
    return NULL;
}

static void test_threads(int iters) {
    botspace_service *s = open_service(UNLIMITED_CONFIG);
    botspace_service_set_wake_callback(s, count_wake, NULL);
    pthread_t th[THREADS];
    worker ws[THREADS];
    for (int i = 0; i < THREADS; i++) {
        memset(&ws[i], 0, sizeof ws[i]);
        ws[i].svc = s;
        ws[i].index = i;
        ws[i].iters = iters;
        if (pthread_create(&th[i], NULL, hammer, &ws[i]) != 0) {
            check(0, "pthread_create", NULL);
            return;
        }
    }
    int errors = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        if (ws[i].errors) {
            errors += ws[i].errors;
            printf("  thread %d: %s\n", i, ws[i].detail);
        }
    }
    check(errors == 0, "8 threads: getMe, sendMessage and batches on one service, message ids in order", "%d errors", errors);
    /* every message is stored: each chat's history ends at the expected id */
    int history_ok = 1;
    long expected = iters + 3L * (iters / 8);
    for (int i = 0; i < THREADS; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"chat_id\":\"%s\",\"after_message_id\":\"%ld\"}", ws[i].w.chat, expected - 1);
        jval *h = admin(s, "getChatHistory", body);
        const jval *res = json_get(h, "result");
        const jval *last = res && res->t == J_ARR && res->n == 1 ? json_get(res->items[0], "message_id") : NULL;
        char want[32];
        snprintf(want, sizeof want, "%ld", expected);
        if (!last || last->t != J_STR || strcmp(last->s, want) != 0) history_ok = 0;
        json_free(h);
    }
    CHECK(history_ok, "8 threads: every chat holds exactly the messages sent");
    /* each started chat woke its bot once; messages from bots wake nobody
     * (a bot gets no events for its own messages) */
    CHECK(wake_total >= THREADS, "8 threads: wake-ups counted on the committing threads");
    botspace_service_free(&s);
    for (int i = 0; i < THREADS; i++) world_free(&ws[i].w);
}

/* ------------------------------------------------------------------------ */
/* Webhook deliveries: the host's side, on a manual clock */

static const char WEBHOOK_CONFIG[] =
    "{\"database\":\":memory:\",\"admin_secret\":\"vector-admin-secret-0001\",\"clock\":\"manual\","
    "\"webhook_allow_http\":true,\"webhook_allow_private_addresses\":true}";

/* getWebhookInfo's result. */
static jval *webhook_info(botspace_service *s, const world *w) {
    char auth[256];
    snprintf(auth, sizeof auth, "Bot %s", w->token);
    int status = 0;
    jval *v = post_json(s, "/bot/getWebhookInfo", auth, "{}", &status);
    CHECK(status == 200 && v, "getWebhookInfo answers 200");
    return v;
}

static int info_is(const jval *v, const char *key, const char *num_or_str) {
    const jval *x = json_get(json_get(v, "result"), key);
    if (!x) return 0;
    if (!num_or_str) return x->t == J_NULL;
    return (x->t == J_NUM || x->t == J_STR) && strcmp(x->s, num_or_str) == 0;
}

/* When the next attempt is due: what an outcome changed is read by a poll
 * first (until then the timeout says "now"), which finds nothing due yet. */
static uint64_t next_due(botspace_service *s, uint64_t now) {
    botspace_webhook_request *req = NULL;
    /* 50 ms on: what outcomes changed is written at most every 50 ms, so a
     * poll then writes it (getWebhookInfo reads the store). */
    CHECK(botspace_service_poll_webhook(s, now + 50, &req) == BOTSPACE_STATUS_OK && req == NULL,
          "poll_webhook: nothing due yet");
    botspace_webhook_request_free(&req);
    uint64_t t = 0;
    CHECK(botspace_service_webhook_timeout(s, &t) == BOTSPACE_STATUS_OK, "webhook_timeout");
    return t;
}

/* Polls one request and reads its parts; NULL when none is due. */
static botspace_webhook_request *poll_one(botspace_service *s, uint64_t now, botspace_webhook_request_parts *p) {
    botspace_webhook_request *req = NULL;
    if (botspace_service_poll_webhook(s, now, &req) != BOTSPACE_STATUS_OK) return NULL;
    if (req) botspace_webhook_request_parts_get(req, p);
    return req;
}

static void test_webhooks(void) {
    botspace_service *s = open_service(WEBHOOK_CONFIG);
    uint64_t now = 0, t = 0;
    botspace_service_now_ms(s, &now);
    botspace_webhook_request *req = NULL;
    botspace_webhook_request_parts p;
    const char *refusal = "unset";

    /* NULL arguments */
    CHECK(botspace_service_poll_webhook(NULL, now, &req) == BOTSPACE_STATUS_NULL_ARGUMENT, "poll_webhook: NULL service");
    CHECK(botspace_service_poll_webhook(s, now, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "poll_webhook: NULL out");
    bool needs_store = false, wanted = false;
    botspace_webhook_request *p_none = NULL;
    CHECK(botspace_service_poll_webhook_in_memory(NULL, now, &req, &needs_store) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "poll_webhook_in_memory: NULL service");
    CHECK(botspace_service_poll_webhook_in_memory(s, now, NULL, &needs_store) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "poll_webhook_in_memory: NULL out_request");
    CHECK(botspace_service_poll_webhook_in_memory(s, now, &req, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "poll_webhook_in_memory: NULL out_needs_store");
    CHECK(botspace_service_webhook_report(NULL, 1, 200, NULL, NULL, false, now, &wanted) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "webhook_report: NULL service");
    wanted = true;
    CHECK(botspace_service_webhook_report(s, 1, 42, NULL, NULL, false, now, &wanted) == BOTSPACE_STATUS_INVALID_ARGUMENT &&
              strstr(last_error(), "status_code 42") != NULL && wanted,
          "webhook_report: a status that is not HTTP (output untouched)");
    CHECK(botspace_webhook_request_parts_get(NULL, &p) == BOTSPACE_STATUS_NULL_ARGUMENT, "request_parts_get: NULL request");
    CHECK(botspace_service_webhook_outcome(NULL, 1, 200, NULL, NULL, false, now) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "webhook_outcome: NULL service");
    CHECK(botspace_service_webhook_outcome(s, 1, 0, NULL, NULL, false, now) == BOTSPACE_STATUS_NULL_ARGUMENT &&
              strstr(last_error(), "failure_message") != NULL,
          "webhook_outcome: no answer and no message");
    CHECK(botspace_service_webhook_outcome(s, 1, 42, NULL, NULL, false, now) == BOTSPACE_STATUS_INVALID_ARGUMENT &&
              strstr(last_error(), "status_code 42") != NULL,
          "webhook_outcome: a status that is not HTTP");
    CHECK(botspace_service_webhook_timeout(NULL, &t) == BOTSPACE_STATUS_NULL_ARGUMENT, "webhook_timeout: NULL service");
    CHECK(botspace_service_webhook_timeout(s, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "webhook_timeout: NULL out");
    CHECK(botspace_service_webhook_address_allowed(NULL, "127.0.0.1", &refusal) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "address_allowed: NULL service");
    CHECK(botspace_service_webhook_address_allowed(s, NULL, &refusal) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "address_allowed: NULL ip");
    CHECK(botspace_service_webhook_address_allowed(s, "127.0.0.1", NULL) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "address_allowed: NULL out");
    CHECK(botspace_service_webhook_address_allowed(s, "localhost", &refusal) == BOTSPACE_STATUS_INVALID_ARGUMENT &&
              strcmp(refusal, "unset") == 0,
          "address_allowed: a name is not an address (output untouched)");
    botspace_webhook_request_free(NULL);
    botspace_webhook_request_free(&req);
    CHECK(req == NULL, "webhook_request_free: NULL and a pointer to NULL are harmless");

    /* Before the first poll the webhooks are not loaded: due now; after
     * it, with no webhook, nothing waits. */
    /* The first load is the store's: an event loop hands it over. */
    needs_store = false;
    CHECK(botspace_service_poll_webhook_in_memory(s, now, &req, &needs_store) == BOTSPACE_STATUS_OK && req == NULL &&
              needs_store,
          "poll_webhook_in_memory: the first load needs the store");
    CHECK(botspace_service_webhook_timeout(s, &t) == BOTSPACE_STATUS_OK && t == now, "webhook_timeout: due before loading");
    CHECK(poll_one(s, now, &p) == NULL, "poll_webhook: nothing without a webhook");
    CHECK(botspace_service_webhook_timeout(s, &t) == BOTSPACE_STATUS_OK && t == BOTSPACE_NO_DEADLINE,
          "webhook_timeout: no deadline without a webhook");

    world w;
    world_make(s, &w, "standard");
    char auth[256], body[512];
    snprintf(auth, sizeof auth, "Bot %s", w.token);
    int status = 0;
    jval *set = post_json(s, "/bot/setWebhook", auth, "{\"url\":\"http://127.0.0.1:9/hook?x=1\"}", &status);
    CHECK(status == 200 && set && json_get(json_get(set, "result"), "secret"), "setWebhook with an http URL");
    json_free(set);
    snprintf(body, sizeof body, "{\"user_id\":\"%s\",\"chat_id\":\"%s\",\"text\":\"hello hook\"}", w.user, w.chat);
    json_free(admin(s, "sendUserMessage", body));

    /* New events: the bot's log is the store's to read. */
    needs_store = false;
    CHECK(botspace_service_poll_webhook_in_memory(s, now, &req, &needs_store) == BOTSPACE_STATUS_OK && req == NULL &&
              needs_store,
          "poll_webhook_in_memory: a bot's new events need the store");
    /* The first event (bot_started) is due; the message waits behind it
     * (one chat, in order). */
    req = poll_one(s, now, &p);
    CHECK(req != NULL, "poll_webhook: the first event is due");
    if (!req) {
        world_free(&w);
        botspace_service_free(&s);
        return;
    }
    CHECK(p.id != 0 && !p.https && p.port == 9 && p.attempt == 1 && p.deadline_ms == now + 10000,
          "request: id, scheme, port, attempt, a 10 s deadline");
    CHECK(strcmp(p.host, "127.0.0.1") == 0 && strcmp(p.path_and_query, "/hook?x=1") == 0 &&
              strcmp(p.host_header, "127.0.0.1:9") == 0 && strcmp(p.url, "http://127.0.0.1:9/hook?x=1") == 0,
          "request: host, path and query, Host header, URL");
    char want_id[128];
    snprintf(want_id, sizeof want_id, "webhook-id: msg_%s_1", w.bot);
    CHECK(p.header_count == 5 && strcmp(p.headers[0], "User-Agent: botspace-webhooks") == 0 &&
              strcmp(p.headers[1], "content-type: application/json") == 0 && strcmp(p.headers[2], want_id) == 0 &&
              strcmp(p.headers[3], "webhook-timestamp: 1767225600") == 0 &&
              strncmp(p.headers[4], "webhook-signature: v1,", 22) == 0 && strlen(p.headers[4]) == 22 + 44,
          "request: the headers, in order");
    char want_body[512];
    snprintf(want_body, sizeof want_body,
             "{\"update_id\":1,\"type\":\"bot_started\",\"data\":{\"chat\":{\"id\":\"%s\",\"type\":\"private\"},", w.chat);
    CHECK(p.body_len > strlen(want_body) && memcmp(p.body, want_body, strlen(want_body)) == 0 &&
              p.body[p.body_len - 1] == '}',
          "request: the body is the update");
    char head[256];
    snprintf(head, sizeof head, "POST /hook?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nContent-Length: %zu\r\n", p.body_len);
    CHECK(p.http_bytes_len > strlen(head) + p.body_len && memcmp(p.http_bytes, head, strlen(head)) == 0 &&
              memcmp(p.http_bytes + p.http_bytes_len - p.body_len, p.body, p.body_len) == 0,
          "request: the ready HTTP bytes");
    botspace_webhook_request_parts p2;
    CHECK(poll_one(s, now, &p2) == NULL, "poll_webhook: the next event of the chat waits");

    needs_store = true;
    CHECK(botspace_service_poll_webhook_in_memory(s, now, &p_none, &needs_store) == BOTSPACE_STATUS_OK &&
              p_none == NULL && !needs_store,
          "poll_webhook_in_memory: nothing due, nothing for the store");
    /* 500: retried within 0.5..1 s, recorded for getWebhookInfo. */
    uint64_t id = p.id;
    botspace_webhook_request_free(&req);
    CHECK(req == NULL, "webhook_request_free sets the handle to NULL");
    CHECK(botspace_service_webhook_outcome(s, id, 500, NULL, NULL, false, now) == BOTSPACE_STATUS_OK, "outcome: 500");
    t = next_due(s, now);
    CHECK(t >= now + 500 && t <= now + 1000, "webhook_timeout: the retry, 0.5..1 s later");
    jval *info = webhook_info(s, &w);
    CHECK(info_is(info, "last_error_message", "the receiver answered 500") && info_is(info, "pending_update_count", "2") &&
              info_is(info, "last_error_date", "1767225600"),
          "getWebhookInfo: the 500 recorded, 2 pending");
    json_free(info);
    CHECK(poll_one(s, t - 1, &p) == NULL, "poll_webhook: nothing before the retry");
    req = poll_one(s, t, &p);
    CHECK(req && p.attempt == 2 && p.id != id && strcmp(p.headers[2], want_id) == 0,
          "poll_webhook: the retry, with the same webhook-id");
    now = t;
    if (req) {
        /* 200: the cursor moves over event 1; the message is due. */
        /* The 500 was written 50 ms after it; this cursor move is due for
         * writing at once. */
        wanted = false;
        CHECK(botspace_service_webhook_report(s, p.id, 200, NULL, NULL, false, now, &wanted) == BOTSPACE_STATUS_OK &&
                  wanted,
              "webhook_report: 200, the store has work");
        botspace_webhook_request_free(&req);
    }
    CHECK(botspace_service_webhook_outcome(s, 999999, 200, NULL, NULL, false, now) == BOTSPACE_STATUS_OK,
          "outcome: an unknown id is ignored");
    /* The message is held in memory: handed out without the store, which
     * still has the cursor move to write. */
    needs_store = true;
    CHECK(botspace_service_poll_webhook_in_memory(s, now, &req, &needs_store) == BOTSPACE_STATUS_OK && req &&
              !needs_store,
          "poll_webhook_in_memory: the message is due");
    if (req) botspace_webhook_request_parts_get(req, &p);
    CHECK(req && p.attempt == 1 && memcmp(p.body, "{\"update_id\":2,\"type\":\"message_created\",", 40) == 0,
          "poll_webhook_in_memory: the message, attempt 1");
    info = webhook_info(s, &w);
    CHECK(info_is(info, "pending_update_count", "2"), "getWebhookInfo: the 200 not written by the in-memory poll");
    json_free(info);
    needs_store = false;
    CHECK(botspace_service_poll_webhook_in_memory(s, now, &p_none, &needs_store) == BOTSPACE_STATUS_OK &&
              p_none == NULL && needs_store,
          "poll_webhook_in_memory: then only the store has work");
    CHECK(poll_one(s, now, &p2) == NULL, "poll_webhook: writes the cursor move, hands out nothing more");
    /* That poll wrote the 200's cursor move. */
    info = webhook_info(s, &w);
    CHECK(info_is(info, "pending_update_count", "1"), "getWebhookInfo: 1 pending after the 200");
    json_free(info);
    if (req) {
        /* 429 with a raw Retry-After: the library parses it. */
        CHECK(botspace_service_webhook_outcome(s, p.id, 429, " 5 ", NULL, false, now) == BOTSPACE_STATUS_OK,
              "outcome: 429 with Retry-After");
        botspace_webhook_request_free(&req);
        t = next_due(s, now);
        CHECK(t >= now + 5000 && t <= now + 5000 + 2000, "webhook_timeout: at least the Retry-After");
        now = t;
    }
    /* A connection that failed: the host's message is recorded. */
    req = poll_one(s, now, &p);
    CHECK(req && p.attempt == 2, "poll_webhook: the message again after the Retry-After");
    if (req) {
        CHECK(botspace_service_webhook_outcome(s, p.id, 0, NULL, "could not connect: refused", false, now) ==
                  BOTSPACE_STATUS_OK,
              "outcome: a failure");
        botspace_webhook_request_free(&req);
    }
    now = next_due(s, now);
    info = webhook_info(s, &w);
    CHECK(info_is(info, "last_error_message", "could not connect: refused"), "getWebhookInfo: the host's failure message");
    json_free(info);
    req = poll_one(s, now, &p);
    CHECK(req && p.attempt == 3, "poll_webhook: the third attempt");
    if (req) {
        /* A failure of a kind: the library words it. */
        wanted = true;
        CHECK(botspace_service_webhook_report_failure(NULL, p.id, BOTSPACE_WEBHOOK_FAILURE_TLS, "x", now, &wanted) ==
                      BOTSPACE_STATUS_NULL_ARGUMENT &&
                  wanted,
              "report_failure: NULL service (output untouched)");
        CHECK(botspace_service_webhook_report_failure(s, p.id, 11, "x", now, &wanted) == BOTSPACE_STATUS_INVALID_ARGUMENT &&
                  strcmp(last_error(), "kind 11 is not a botspace_webhook_failure (0..=10)") == 0 && wanted,
              "report_failure: an unknown kind (output untouched)");
        CHECK(botspace_service_webhook_report_failure(s, p.id, BOTSPACE_WEBHOOK_FAILURE_TLS, "certificate expired", now,
                                                      NULL) == BOTSPACE_STATUS_OK,
              "report_failure: TLS");
        botspace_webhook_request_free(&req);
        now = next_due(s, now);
        info = webhook_info(s, &w);
        CHECK(info_is(info, "last_error_message", "TLS failed: certificate expired"),
              "getWebhookInfo: the kind's words, then the detail");
        json_free(info);
        req = poll_one(s, now, &p);
        CHECK(req && p.attempt == 4, "poll_webhook: the fourth attempt");
    }
    if (req) {
        /* No detail: the words alone. */
        CHECK(botspace_service_webhook_report_failure(s, p.id, BOTSPACE_WEBHOOK_FAILURE_BUILD, NULL, now, NULL) ==
                  BOTSPACE_STATUS_OK,
              "report_failure: no detail");
        botspace_webhook_request_free(&req);
        now = next_due(s, now);
        info = webhook_info(s, &w);
        CHECK(info_is(info, "last_error_message", "could not build the request"), "getWebhookInfo: the words alone");
        json_free(info);
        req = poll_one(s, now, &p);
        CHECK(req && p.attempt == 5, "poll_webhook: the fifth attempt");
    }
    if (req) {
        /* No answer in time, then 204: delivered, nothing waits. */
        CHECK(botspace_service_webhook_outcome(s, p.id, 0, NULL, NULL, true, now) == BOTSPACE_STATUS_OK, "outcome: timed out");
        botspace_webhook_request_free(&req);
        now = next_due(s, now);
        info = webhook_info(s, &w);
        CHECK(info_is(info, "last_error_message", "no answer within 10 s"), "getWebhookInfo: the time-out");
        json_free(info);
        req = poll_one(s, now, &p);
        CHECK(req && p.attempt == 6, "poll_webhook: the sixth attempt");
        if (req) CHECK(botspace_service_webhook_outcome(s, p.id, 204, NULL, NULL, false, now) == BOTSPACE_STATUS_OK, "outcome: 204");
        botspace_webhook_request_free(&req);
    }
    CHECK(next_due(s, now) == BOTSPACE_NO_DEADLINE, "nothing waits once delivered");
    info = webhook_info(s, &w);
    CHECK(info_is(info, "pending_update_count", "0") && info_is(info, "next_attempt_date", NULL),
          "getWebhookInfo: the cursor moved over everything");
    json_free(info);

    /* The address policy: allowed here; refused by default, in the words
     * a delivery records. */
    CHECK(botspace_service_webhook_address_allowed(s, "127.0.0.1", &refusal) == BOTSPACE_STATUS_OK && refusal == NULL,
          "address_allowed: loopback with webhook_allow_private_addresses");
    world_free(&w);
    botspace_service_free(&s);
    s = open_service(BASE_CONFIG);
    CHECK(botspace_service_webhook_address_allowed(s, "127.0.0.1", &refusal) == BOTSPACE_STATUS_OK && refusal &&
              strcmp(refusal, "the host name resolves to a loopback address, which this server does not deliver to") == 0,
          "address_allowed: loopback refused by default");
    CHECK(botspace_service_webhook_address_allowed(s, "fe80::1", &refusal) == BOTSPACE_STATUS_OK && refusal &&
              strcmp(refusal, "the host name resolves to a link-local address, which this server does not deliver to") == 0,
          "address_allowed: IPv6 link-local refused by default");
    CHECK(botspace_service_webhook_address_allowed(s, "93.184.216.34", &refusal) == BOTSPACE_STATUS_OK && refusal == NULL,
          "address_allowed: a public address");
    CHECK(botspace_service_webhook_address_allowed(s, "64:ff9b::7f00:1", &refusal) == BOTSPACE_STATUS_OK && refusal &&
              strcmp(refusal, "the host name resolves to a loopback address, which this server does not deliver to") == 0,
          "address_allowed: NAT64 of loopback refused by default");
    CHECK(botspace_service_webhook_address_allowed(s, "2002:a9fe:a9fe::1", &refusal) == BOTSPACE_STATUS_OK && refusal &&
              strcmp(refusal, "the host name resolves to a link-local address, which this server does not deliver to") == 0,
          "address_allowed: 6to4 of the metadata address refused by default");
    CHECK(botspace_service_webhook_address_allowed(s, "64:ff9b::5db8:d822", &refusal) == BOTSPACE_STATUS_OK && refusal == NULL,
          "address_allowed: NAT64 of a public address");
    botspace_service_free(&s);
}

/* The webhook pump: the core's schedule between a loop and a store thread. */

/* Takes one request through the pump and reads its parts; NULL when the
 * round ends. */
static botspace_webhook_request *pump_take_one(botspace_webhook_pump *pump, botspace_service *s, uint64_t now,
                                               botspace_webhook_request_parts *p) {
    botspace_webhook_request *req = NULL;
    if (botspace_webhook_pump_take(pump, s, now, &req) != BOTSPACE_STATUS_OK) return NULL;
    if (req) botspace_webhook_request_parts_get(req, p);
    return req;
}

static bool pump_wanted(botspace_webhook_pump *pump) {
    bool wanted = false;
    CHECK(botspace_webhook_pump_store_turn_wanted(pump, &wanted) == BOTSPACE_STATUS_OK, "pump: store_turn_wanted");
    return wanted;
}

static uint64_t pump_timeout(botspace_webhook_pump *pump, botspace_service *s, uint64_t now) {
    uint64_t t = 0;
    CHECK(botspace_webhook_pump_timeout(pump, s, now, &t) == BOTSPACE_STATUS_OK, "pump: timeout");
    return t;
}

typedef struct {
    botspace_service *s;
    botspace_webhook_pump *pump;
    atomic_int turns;
    atomic_int ended; /* the thread's last wait_turn wrote false */
} pump_thread;

/* A host's store thread: every turn the pump gives it, until it stops. */
static void *pump_store_loop(void *arg) {
    pump_thread *t = arg;
    bool turn = false;
    while (botspace_webhook_pump_wait_turn(t->pump, &turn) == BOTSPACE_STATUS_OK && turn) {
        uint64_t now = 0;
        botspace_service_now_ms(t->s, &now);
        botspace_webhook_pump_store_turn(t->pump, t->s, now, NULL);
        atomic_fetch_add(&t->turns, 1);
    }
    atomic_store(&t->ended, !turn);
    return NULL;
}

static void test_webhook_pump(void) {
    botspace_service *s = open_service(WEBHOOK_CONFIG);
    uint64_t now = 0, t = 0;
    botspace_service_now_ms(s, &now);
    botspace_webhook_pump *pump = NULL;
    botspace_webhook_request *req = NULL;
    botspace_webhook_request_parts p;
    bool b = false, wanted = false;
    size_t handed = 99;

    /* NULL arguments */
    CHECK(botspace_webhook_pump_new(NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "pump_new: NULL out");
    botspace_webhook_pump_free(NULL);
    botspace_webhook_pump_free(&pump);
    CHECK(pump == NULL, "pump_free: NULL and a pointer to NULL are harmless");
    CHECK(botspace_webhook_pump_new(&pump) == BOTSPACE_STATUS_OK && pump, "pump_new");
    if (!pump) {
        botspace_service_free(&s);
        return;
    }
    CHECK(botspace_webhook_pump_take(NULL, s, now, &req) == BOTSPACE_STATUS_NULL_ARGUMENT, "pump_take: NULL pump");
    CHECK(botspace_webhook_pump_take(pump, NULL, now, &req) == BOTSPACE_STATUS_NULL_ARGUMENT, "pump_take: NULL service");
    CHECK(botspace_webhook_pump_take(pump, s, now, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "pump_take: NULL out");
    CHECK(botspace_webhook_pump_timeout(NULL, s, now, &t) == BOTSPACE_STATUS_NULL_ARGUMENT, "pump_timeout: NULL pump");
    CHECK(botspace_webhook_pump_timeout(pump, NULL, now, &t) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "pump_timeout: NULL service");
    CHECK(botspace_webhook_pump_timeout(pump, s, now, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "pump_timeout: NULL out");
    wanted = true;
    CHECK(botspace_webhook_pump_report(NULL, s, 1, 200, NULL, NULL, false, now, &wanted) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "pump_report: NULL pump");
    CHECK(botspace_webhook_pump_report(pump, NULL, 1, 200, NULL, NULL, false, now, &wanted) ==
                  BOTSPACE_STATUS_NULL_ARGUMENT &&
              strcmp(last_error(), "argument `service` is NULL") == 0 && wanted,
          "pump_report: NULL service (output untouched)");
    CHECK(botspace_webhook_pump_report(pump, s, 1, 42, NULL, NULL, false, now, &wanted) == BOTSPACE_STATUS_INVALID_ARGUMENT &&
              strstr(last_error(), "status_code 42") != NULL && wanted,
          "pump_report: a status that is not HTTP (output untouched)");
    CHECK(botspace_webhook_pump_report_failure(NULL, s, 1, BOTSPACE_WEBHOOK_FAILURE_TLS, NULL, now, &wanted) ==
              BOTSPACE_STATUS_NULL_ARGUMENT,
          "pump_report_failure: NULL pump");
    CHECK(botspace_webhook_pump_report_failure(pump, s, 1, 11, "x", now, &wanted) == BOTSPACE_STATUS_INVALID_ARGUMENT &&
              strcmp(last_error(), "kind 11 is not a botspace_webhook_failure (0..=10)") == 0 && wanted,
          "pump_report_failure: an unknown kind (output untouched)");
    CHECK(botspace_webhook_pump_store_turn_wanted(NULL, &b) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "pump_store_turn_wanted: NULL pump");
    CHECK(botspace_webhook_pump_store_turn_wanted(pump, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "pump_store_turn_wanted: NULL out");
    CHECK(botspace_webhook_pump_wait_turn(NULL, &b) == BOTSPACE_STATUS_NULL_ARGUMENT, "pump_wait_turn: NULL pump");
    CHECK(botspace_webhook_pump_wait_turn(pump, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "pump_wait_turn: NULL out");
    CHECK(botspace_webhook_pump_store_turn(NULL, s, now, &handed) == BOTSPACE_STATUS_NULL_ARGUMENT && handed == 99,
          "pump_store_turn: NULL pump");
    CHECK(botspace_webhook_pump_store_turn(pump, NULL, now, &handed) == BOTSPACE_STATUS_NULL_ARGUMENT && handed == 99,
          "pump_store_turn: NULL service");
    CHECK(botspace_webhook_pump_stop(NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "pump_stop: NULL pump");

    /* Nothing loaded: due now; the loop finds nothing in memory and asks
     * for a store turn, and has no deadline while it is wanted. */
    CHECK(pump_timeout(pump, s, now) == now, "pump_timeout: due before loading");
    CHECK(!pump_wanted(pump), "pump: no turn wanted before a take");
    CHECK(pump_take_one(pump, s, now, &p) == NULL, "pump_take: nothing in memory before loading");
    CHECK(pump_wanted(pump), "pump: the first load is a store turn");
    CHECK(pump_timeout(pump, s, now) == BOTSPACE_NO_DEADLINE, "pump_timeout: past due while a turn is wanted: none");
    /* A store thread runs it: parked in wait_turn, woken by the core. */
    pump_thread th = {s, pump, 0, 0};
    pthread_t tid;
    CHECK(pthread_create(&tid, NULL, pump_store_loop, &th) == 0, "pump: the store thread starts");
    const struct timespec ms = {0, 1000000};
    for (int i = 0; i < 10000 && atomic_load(&th.turns) < 1; i++) nanosleep(&ms, NULL);
    CHECK(atomic_load(&th.turns) == 1, "pump: the store thread ran the turn");
    CHECK(!pump_wanted(pump) && pump_timeout(pump, s, now) == BOTSPACE_NO_DEADLINE,
          "pump: loaded, no webhook: nothing wanted, nothing waits");
    CHECK(botspace_webhook_pump_stop(pump) == BOTSPACE_STATUS_OK, "pump_stop");
    pthread_join(tid, NULL);
    CHECK(atomic_load(&th.ended) == 1 && atomic_load(&th.turns) == 1, "pump: wait_turn writes false once stopped");

    world w;
    world_make(s, &w, "standard");
    char auth[256], body[512];
    snprintf(auth, sizeof auth, "Bot %s", w.token);
    int status = 0;
    jval *set = post_json(s, "/bot/setWebhook", auth, "{\"url\":\"http://127.0.0.1:9/hook\"}", &status);
    CHECK(status == 200, "pump: setWebhook");
    json_free(set);
    snprintf(body, sizeof body, "{\"user_id\":\"%s\",\"chat_id\":\"%s\",\"text\":\"hello pump\"}", w.user, w.chat);
    json_free(admin(s, "sendUserMessage", body));

    /* The bot's log is the store's: a turn (run here, on this thread)
     * hands out the chat's first event; its message waits behind it. */
    CHECK(pump_take_one(pump, s, now, &p) == NULL && pump_wanted(pump), "pump: new events want a store turn");
    CHECK(botspace_webhook_pump_store_turn(pump, s, now, &handed) == BOTSPACE_STATUS_OK && handed == 1,
          "pump_store_turn: one request handed out");
    CHECK(!pump_wanted(pump), "pump: the turn ended");
    req = pump_take_one(pump, s, now, &p);
    CHECK(req && p.attempt == 1 && memcmp(p.body, "{\"update_id\":1,\"type\":\"bot_started\",", 36) == 0,
          "pump_take: the turn's request, bot_started");
    botspace_webhook_request *none = NULL;
    CHECK(botspace_webhook_pump_take(pump, s, now, &none) == BOTSPACE_STATUS_OK && none == NULL, "pump_take: the round ends");
    CHECK(pump_timeout(pump, s, now) == BOTSPACE_NO_DEADLINE, "pump_timeout: in flight, nothing waits");
    if (!req) {
        world_free(&w);
        botspace_webhook_pump_free(&pump);
        botspace_service_free(&s);
        return;
    }
    /* 200: the cursor move is the store's to write now; the message is
     * memory's and taken without a turn. */
    wanted = false;
    CHECK(botspace_webhook_pump_report(pump, s, p.id, 200, NULL, NULL, false, now, &wanted) == BOTSPACE_STATUS_OK && wanted,
          "pump_report: 200, a store turn is wanted");
    botspace_webhook_request_free(&req);
    CHECK(pump_wanted(pump), "pump: the report asked for the turn");
    req = pump_take_one(pump, s, now, &p);
    CHECK(req && p.attempt == 1 && memcmp(p.body, "{\"update_id\":2,\"type\":\"message_created\",", 40) == 0,
          "pump_take: the message, from memory");
    CHECK(botspace_webhook_pump_take(pump, s, now, &none) == BOTSPACE_STATUS_OK && none == NULL, "pump_take: then nothing");
    jval *info = webhook_info(s, &w);
    CHECK(info_is(info, "pending_update_count", "2"), "pump: taking and reporting never write");
    json_free(info);
    CHECK(botspace_webhook_pump_store_turn(pump, s, now, &handed) == BOTSPACE_STATUS_OK && handed == 0,
          "pump_store_turn: writes the cursor, hands out nothing");
    info = webhook_info(s, &w);
    CHECK(info_is(info, "pending_update_count", "1"), "pump: the turn wrote the 200");
    json_free(info);
    if (req) {
        /* A failure just after a write: no turn wanted; the write is due
         * 50 ms after the last one. */
        wanted = true;
        CHECK(botspace_webhook_pump_report_failure(pump, s, p.id, BOTSPACE_WEBHOOK_FAILURE_TLS, "certificate expired", now,
                                                   &wanted) == BOTSPACE_STATUS_OK &&
                  !wanted,
              "pump_report_failure: TLS, nothing for the store yet");
        botspace_webhook_request_free(&req);
        CHECK(!pump_wanted(pump) && pump_timeout(pump, s, now) == now + 50, "pump_timeout: the write, 50 ms on");
        CHECK(pump_take_one(pump, s, now + 49, &p) == NULL && !pump_wanted(pump), "pump_take: nothing before it");
        CHECK(pump_take_one(pump, s, now + 50, &p) == NULL && pump_wanted(pump), "pump_take: then a turn is wanted");
        CHECK(botspace_webhook_pump_store_turn(pump, s, now + 50, &handed) == BOTSPACE_STATUS_OK && handed == 0,
              "pump_store_turn: writes the failure");
        info = webhook_info(s, &w);
        CHECK(info_is(info, "last_error_message", "TLS failed: certificate expired"), "pump: the failure, in the library's words");
        json_free(info);
        t = pump_timeout(pump, s, now + 50);
        CHECK(t >= now + 500 && t <= now + 1000, "pump_timeout: the retry, 0.5..1 s later");
        CHECK(pump_take_one(pump, s, t - 1, &p) == NULL && !pump_wanted(pump), "pump_take: nothing before the retry");
        req = pump_take_one(pump, s, t, &p);
        CHECK(req && p.attempt == 2 && !pump_wanted(pump), "pump_take: the retry, from memory");
        botspace_webhook_request_free(&req);
    }
    /* Stopped: a wait returns at once. */
    b = true;
    CHECK(botspace_webhook_pump_wait_turn(pump, &b) == BOTSPACE_STATUS_OK && !b, "pump_wait_turn: false once stopped");
    world_free(&w);
    botspace_webhook_pump_free(&pump);
    CHECK(pump == NULL, "pump_free sets the handle to NULL");
    botspace_service_free(&s);
}

/* A host that writes the request to its own socket: the library's bytes
 * kept alive, and the answer read by the library. */
static void test_webhook_answer(void) {
    botspace_webhook_answer *a = NULL;
    botspace_webhook_answer_step step = BOTSPACE_WEBHOOK_ANSWER_STEP_FAILED;
    bool reusable = true, wanted = false;
    const uint8_t *bytes = NULL;
    size_t len = 0;

    /* NULL arguments */
    CHECK(botspace_webhook_answer_new(NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "answer_new: NULL out");
    botspace_webhook_answer_free(NULL);
    botspace_webhook_answer_free(&a);
    CHECK(a == NULL, "answer_free: NULL and a pointer to NULL are harmless");
    CHECK(botspace_webhook_answer_feed(NULL, (const uint8_t *)"H", 1, 0, &step, &reusable) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "answer_feed: NULL answer");
    CHECK(botspace_webhook_request_http_kept(NULL, &bytes, &len) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "request_http_kept: NULL request");

    /* An answer in two pieces: more, then whole, the connection kept. */
    CHECK(botspace_webhook_answer_new(&a) == BOTSPACE_STATUS_OK && a, "answer_new");
    if (!a) return;
    CHECK(botspace_webhook_answer_feed(a, NULL, 5, 0, &step, &reusable) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "answer_feed: NULL data with a length");
    CHECK(botspace_webhook_answer_feed(a, (const uint8_t *)"x", 1, 0, NULL, &reusable) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "answer_feed: NULL step out");
    const char *head = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 7\r\nContent-Len";
    CHECK(botspace_webhook_answer_feed(a, (const uint8_t *)head, strlen(head), 0, &step, &reusable) == BOTSPACE_STATUS_OK &&
              step == BOTSPACE_WEBHOOK_ANSWER_STEP_MORE && !reusable,
          "answer_feed: part of the head is more to read");
    const char *rest = "gth: 2\r\n\r\nno";
    CHECK(botspace_webhook_answer_feed(a, (const uint8_t *)rest, strlen(rest), 0, &step, &reusable) == BOTSPACE_STATUS_OK &&
              step == BOTSPACE_WEBHOOK_ANSWER_STEP_ANSWERED && reusable,
          "answer_feed: the whole answer, the connection kept");
    CHECK(botspace_webhook_answer_feed(a, (const uint8_t *)"x", 1, 0, &step, &reusable) == BOTSPACE_STATUS_INVALID_ARGUMENT &&
              strcmp(last_error(), "the answer was already whole: feed a new reader") == 0,
          "answer_feed: nothing after a whole answer");

    /* Closed before a byte came; not HTTP at all. */
    botspace_webhook_answer *closed = NULL, *junk = NULL;
    botspace_webhook_answer_new(&closed);
    CHECK(botspace_webhook_answer_feed(closed, NULL, 0, 0, &step, &reusable) == BOTSPACE_STATUS_OK &&
              step == BOTSPACE_WEBHOOK_ANSWER_STEP_CLOSED_BEFORE_ANSWER && !reusable,
          "answer_feed: a close before any byte");
    botspace_webhook_answer_new(&junk);
    CHECK(botspace_webhook_answer_feed(junk, (const uint8_t *)"SSH-2.0\r\n\r\n", 11, 0, &step, &reusable) ==
                  BOTSPACE_STATUS_OK &&
              step == BOTSPACE_WEBHOOK_ANSWER_STEP_FAILED,
          "answer_feed: not an HTTP answer");

    /* A delivery through the pump: the kept request is the closing one
     * without `Connection: close`, and the answer read above is reported. */
    botspace_service *s = open_service(WEBHOOK_CONFIG);
    uint64_t now = 0;
    botspace_service_now_ms(s, &now);
    botspace_webhook_pump *pump = NULL;
    botspace_webhook_pump_new(&pump);
    world w;
    world_make(s, &w, "standard");
    char auth[256];
    snprintf(auth, sizeof auth, "Bot %s", w.token);
    int status = 0;
    json_free(post_json(s, "/bot/setWebhook", auth, "{\"url\":\"http://127.0.0.1:9/hook\"}", &status));
    CHECK(status == 200, "answer: setWebhook");
    botspace_webhook_request_parts p;
    size_t handed = 0;
    CHECK(botspace_webhook_pump_store_turn(pump, s, now, &handed) == BOTSPACE_STATUS_OK && handed == 1, "answer: a request");
    botspace_webhook_request *req = pump_take_one(pump, s, now, &p);
    CHECK(req != NULL, "answer: the request taken");
    if (req) {
        CHECK(botspace_webhook_request_http_kept(req, &bytes, &len) == BOTSPACE_STATUS_OK, "request_http_kept");
        char closing[2048], kept[2048];
        const char *drop = "Connection: close\r\n";
        char *at = NULL;
        if (p.http_bytes_len < sizeof closing && len < sizeof kept) {
            memcpy(closing, p.http_bytes, p.http_bytes_len);
            closing[p.http_bytes_len] = 0;
            memcpy(kept, bytes, len);
            kept[len] = 0;
            at = strstr(closing, drop);
        }
        if (at) memmove(at, at + strlen(drop), strlen(at + strlen(drop)) + 1);
        CHECK(at && strcmp(closing, kept) == 0 && strstr(kept, "webhook-signature: v1,") != NULL,
              "request_http_kept: the request without Connection: close");
        CHECK(botspace_webhook_pump_report_answer(pump, s, p.id, NULL, now, &wanted) == BOTSPACE_STATUS_NULL_ARGUMENT,
              "pump_report_answer: NULL answer");
        botspace_webhook_answer *unread = NULL;
        botspace_webhook_answer_new(&unread);
        CHECK(botspace_webhook_pump_report_answer(pump, s, p.id, unread, now, &wanted) == BOTSPACE_STATUS_INVALID_ARGUMENT &&
                  strcmp(last_error(), "the answer is not whole yet") == 0,
              "pump_report_answer: not before the answer is whole");
        botspace_webhook_answer_free(&unread);
        CHECK(botspace_webhook_pump_report_answer(pump, s, p.id, a, now, &wanted) == BOTSPACE_STATUS_OK,
              "pump_report_answer: the 503");
        CHECK(botspace_webhook_pump_store_turn(pump, s, now + 50, &handed) == BOTSPACE_STATUS_OK, "answer: the write");
        jval *info = webhook_info(s, &w);
        CHECK(info_is(info, "last_error_message", "the receiver answered 503"), "answer: the status was reported");
        json_free(info);
        uint64_t t = pump_timeout(pump, s, now + 50);
        CHECK(t >= now + 7000 && t != BOTSPACE_NO_DEADLINE, "answer: its Retry-After holds the retry back");
        botspace_webhook_request_free(&req);
    }
    world_free(&w);
    botspace_webhook_pump_free(&pump);
    botspace_service_free(&s);
    botspace_webhook_answer_free(&a);
    botspace_webhook_answer_free(&closed);
    botspace_webhook_answer_free(&junk);
    CHECK(a == NULL, "answer_free sets the handle to NULL");
}

/* Asked by botspace_service_run_store_notifications. */
static int should_stop_calls;
static bool stop_now(void *ud) {
    (void)ud;
    should_stop_calls++;
    return true;
}

static void test_admission(void) {
    botspace_service *s = NULL;
    CHECK(botspace_service_open((const uint8_t *)BASE_CONFIG, strlen(BASE_CONFIG), &s) == BOTSPACE_STATUS_OK, "admission: open");
    CHECK(botspace_service_set_log_callback(s, on_line, NULL) == BOTSPACE_STATUS_OK, "admission: log callback");
    int calls0 = last_line.calls;
    botspace_admission *a = NULL;
    CHECK(botspace_admission_new(NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "admission_new: NULL out");
    CHECK(botspace_admission_new(&a) == BOTSPACE_STATUS_OK && a, "admission_new");
    uint64_t id = 99;
    bool found = true;
    CHECK(botspace_admission_oldest(a, &id, &found) == BOTSPACE_STATUS_OK && !found && id == 0, "admission: none waits");
    CHECK(botspace_admission_touch(NULL, 1, 0) == BOTSPACE_STATUS_NULL_ARGUMENT, "admission_touch: NULL");
    CHECK(botspace_admission_oldest(a, NULL, &found) == BOTSPACE_STATUS_NULL_ARGUMENT, "admission_oldest: NULL out_id");
    /* The one that waited longest first; equal times in the order touched;
     * a touch moves a connection behind the others. */
    CHECK(botspace_admission_touch(a, 7, 100) == BOTSPACE_STATUS_OK && botspace_admission_touch(a, 3, 50) == BOTSPACE_STATUS_OK &&
              botspace_admission_touch(a, 9, 50) == BOTSPACE_STATUS_OK,
          "admission_touch");
    CHECK(botspace_admission_oldest(a, &id, &found) == BOTSPACE_STATUS_OK && found && id == 3, "admission: oldest is 3");
    CHECK(botspace_admission_touch(a, 3, 120) == BOTSPACE_STATUS_OK && botspace_admission_oldest(a, &id, &found) == BOTSPACE_STATUS_OK &&
              found && id == 9,
          "admission: a touched connection waits afresh");
    CHECK(botspace_admission_remove(a, 9) == BOTSPACE_STATUS_OK && botspace_admission_remove(a, 42) == BOTSPACE_STATUS_OK &&
              botspace_admission_oldest(a, &id, &found) == BOTSPACE_STATUS_OK && found && id == 7,
          "admission_remove");
    CHECK(botspace_admission_remove(NULL, 1) == BOTSPACE_STATUS_NULL_ARGUMENT, "admission_remove: NULL");

    /* Below the limit: serve. At it: evict the oldest (counted and said). */
    botspace_admit ad = {BOTSPACE_ADMIT_KIND_REFUSE_NOW, 5};
    CHECK(botspace_admission_admit(a, s, 1, 2, &ad) == BOTSPACE_STATUS_OK && ad.kind == BOTSPACE_ADMIT_KIND_SERVE && ad.evict_id == 0,
          "admission_admit: below the limit, serve");
    CHECK(last_line.calls == calls0, "admission_admit: serving says nothing");
    CHECK(botspace_admission_admit(a, s, 2, 2, &ad) == BOTSPACE_STATUS_OK && ad.kind == BOTSPACE_ADMIT_KIND_SERVE_AFTER_EVICTING &&
              ad.evict_id == 7,
          "admission_admit: at the limit, evict the oldest");
    CHECK(last_line.calls == calls0 + 1 && last_line.level == 1 &&
              strcmp(last_line.text, "connection evicted: the oldest waiting connection was closed to admit a new one "
                                     "at the connection limit event=connection_evicted") == 0,
          "admission_admit: the eviction is said");
    CHECK(botspace_admission_admit(a, s, 2, 2, &ad) == BOTSPACE_STATUS_OK && ad.kind == BOTSPACE_ADMIT_KIND_SERVE_AFTER_EVICTING &&
              ad.evict_id == 3,
          "admission_admit: the next oldest");
    /* Every connection busy: 256 refusals linger, the next closes at once. */
    int lingering = 0;
    for (int i = 0; i < 256; i++)
        if (botspace_admission_admit(a, s, 2, 2, &ad) == BOTSPACE_STATUS_OK && ad.kind == BOTSPACE_ADMIT_KIND_REFUSE_LINGERING) lingering++;
    size_t n = 0;
    CHECK(lingering == 256 && botspace_admission_lingering_refusals(a, &n) == BOTSPACE_STATUS_OK && n == 256,
          "admission_admit: 256 refusals linger");
    CHECK(botspace_admission_admit(a, s, 2, 2, &ad) == BOTSPACE_STATUS_OK && ad.kind == BOTSPACE_ADMIT_KIND_REFUSE_NOW,
          "admission_admit: the 257th closes at once");
    CHECK(botspace_admission_refusal_ended(a) == BOTSPACE_STATUS_OK && botspace_admission_lingering_refusals(a, &n) == BOTSPACE_STATUS_OK &&
              n == 255 && botspace_admission_admit(a, s, 2, 2, &ad) == BOTSPACE_STATUS_OK &&
              ad.kind == BOTSPACE_ADMIT_KIND_REFUSE_LINGERING,
          "admission_refusal_ended: room for one more");
    CHECK(botspace_admission_admit(a, NULL, 0, 1, &ad) == BOTSPACE_STATUS_NULL_ARGUMENT, "admission_admit: NULL service");
    CHECK(botspace_admission_admit(a, s, 0, 1, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "admission_admit: NULL out");
    CHECK(botspace_admission_refusal_ended(NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "admission_refusal_ended: NULL");

    /* Out of descriptors with a connection waiting: evict it, serve the
     * client on the spare, accept again 1 ms later; nothing else said. */
    const char *emfile = "Too many open files";
    botspace_accept_error_action act;
    memset(&act, 0xff, sizeof act);
    int calls1 = last_line.calls;
    CHECK(botspace_admission_touch(a, 11, 500) == BOTSPACE_STATUS_OK &&
              botspace_admission_accept_failed(a, s, BOTSPACE_ACCEPT_ERROR_OUT_OF_DESCRIPTORS, (const uint8_t *)emfile,
                                               strlen(emfile), 1000, &act) == BOTSPACE_STATUS_OK &&
              act.evict && act.evict_id == 11 && act.use_spare && act.resume_at_ms == 1001,
          "admission_accept_failed: out of descriptors, evict and serve on the spare");
    CHECK(last_line.calls == calls1 + 1 && strstr(last_line.text, "connection evicted: ") == last_line.text,
          "admission_accept_failed: only the eviction is said");
    /* Nobody to evict: refuse on the spare, back off 50 ms, said once a
     * second with the count. */
    CHECK(botspace_admission_accept_failed(a, s, BOTSPACE_ACCEPT_ERROR_OUT_OF_DESCRIPTORS, (const uint8_t *)emfile, strlen(emfile),
                                           2000, &act) == BOTSPACE_STATUS_OK &&
              !act.evict && act.evict_id == 0 && act.use_spare && act.resume_at_ms == 2050,
          "admission_accept_failed: nobody to evict, refuse on the spare and back off");
    CHECK(last_line.calls == calls1 + 2 && last_line.level == 0 &&
              strcmp(last_line.text, "accept failed: Too many open files (1 in the last second)") == 0 &&
              strstr(last_line.json, "\"level\":\"error\",\"msg\":\"accept failed: Too many open files (1 in the last second)\"}") != NULL,
          "admission_accept_failed: said at level error");
    const char *enobufs = "No buffer space available";
    CHECK(botspace_admission_accept_failed(a, s, BOTSPACE_ACCEPT_ERROR_OTHER, (const uint8_t *)enobufs, strlen(enobufs), 2500, &act) ==
                  BOTSPACE_STATUS_OK &&
              !act.evict && !act.use_spare && act.resume_at_ms == 2550 && last_line.calls == calls1 + 2,
          "admission_accept_failed: another error backs off, not said within the second");
    CHECK(botspace_admission_accept_failed(a, s, BOTSPACE_ACCEPT_ERROR_OTHER, (const uint8_t *)enobufs, strlen(enobufs), 3000, &act) ==
                  BOTSPACE_STATUS_OK &&
              last_line.calls == calls1 + 3 && strcmp(last_line.text, "accept failed: No buffer space available (2 in the last second)") == 0,
          "admission_accept_failed: said a second later with the count");
    CHECK(botspace_admission_accept_failed(a, s, BOTSPACE_ACCEPT_ERROR_OTHER, NULL, 3, 4000, &act) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "admission_accept_failed: NULL error with a length");
    CHECK(botspace_admission_accept_failed(a, s, BOTSPACE_ACCEPT_ERROR_OTHER, NULL, 0, 4000, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "admission_accept_failed: NULL out");
    botspace_admission_free(&a);
    CHECK(a == NULL, "admission_free: sets NULL");
    botspace_admission_free(&a);
    botspace_admission_free(NULL);

    /* SQLite hears no other node: the run returns at once, never asking. */
    should_stop_calls = 0;
    CHECK(botspace_service_run_store_notifications(s, stop_now, NULL) == BOTSPACE_STATUS_OK && should_stop_calls == 0,
          "run_store_notifications: returns at once without notifications");
    CHECK(botspace_service_run_store_notifications(s, NULL, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "run_store_notifications: NULL callback");
    CHECK(botspace_service_run_store_notifications(NULL, stop_now, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "run_store_notifications: NULL service");
    botspace_service_set_log_callback(s, NULL, NULL);
    botspace_service_free(&s);
}

/* ---------------------------------------------------------------- operator output */

/* Whether `b` holds exactly the NUL-terminated `want`; frees it. */
static int take_eq(botspace_bytes *b, const char *want) {
    int ok = b->len == strlen(want) && (b->len == 0 ? b->ptr == NULL : memcmp(b->ptr, want, b->len) == 0);
    if (!ok) printf("  got %.*s", (int)b->len, b->ptr ? (const char *)b->ptr : "(NULL)");
    botspace_bytes_free(b);
    return ok;
}

/* The last line the output callback got. */
static struct {
    int calls;
    botspace_stream stream;
    char line[512];
} last_out;

static void on_output(void *ud, botspace_stream stream, const uint8_t *line, size_t len) {
    (void)ud;
    last_out.calls++;
    last_out.stream = stream;
    snprintf(last_out.line, sizeof last_out.line, "%.*s", (int)len, (const char *)line);
}

static void test_output(void) {
    botspace_output out = {-7, false};
    CHECK(botspace_output_from_setting(true, "WARN", 4, &out) == BOTSPACE_STATUS_OK && out.threshold == 1 && out.json,
          "output_from_setting: WARN, json");
    CHECK(botspace_output_from_setting(false, NULL, 0, &out) == BOTSPACE_STATUS_OK && out.threshold == 2 && !out.json,
          "output_from_setting: unset is info");
    CHECK(botspace_output_from_setting(false, NULL, 0, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "output_from_setting: NULL out");

    /* a line: its stream and exact bytes, or nothing below the threshold */
    botspace_output warn = {1, false}, json = {2, true}, bad = {4, false};
    botspace_stream stream = BOTSPACE_STREAM_STDOUT;
    botspace_bytes line = {NULL, 0};
    CHECK(botspace_output_log(&warn, 0, "cannot listen on x", 18, 0, &stream, &line) == BOTSPACE_STATUS_OK &&
              stream == BOTSPACE_STREAM_STDERR && take_eq(&line, "cannot listen on x\n"),
          "output_log: an error on stderr, newline included");
    CHECK(botspace_output_log(&warn, 1, "w", 1, 0, &stream, &line) == BOTSPACE_STATUS_OK && stream == BOTSPACE_STREAM_STDERR &&
              take_eq(&line, "w\n"),
          "output_log: the threshold's own level is printed");
    CHECK(botspace_output_log(&warn, 2, "botspace ready", 14, 0, &stream, &line) == BOTSPACE_STATUS_OK && line.ptr == NULL &&
              line.len == 0,
          "output_log: info under a warn threshold is nothing");
    CHECK(botspace_output_log(&json, 2, "botspace ready", 14, 1000, &stream, &line) == BOTSPACE_STATUS_OK &&
              stream == BOTSPACE_STREAM_STDOUT &&
              take_eq(&line, "{\"ts\":\"1970-01-01T00:00:01.000Z\",\"level\":\"info\",\"msg\":\"botspace ready\"}\n"),
          "output_log: info in JSON on stdout");
    CHECK(botspace_output_log(&json, 3, "d", 1, 0, &stream, &line) == BOTSPACE_STATUS_OK && line.len == 0,
          "output_log: debug under an info threshold is nothing");
    line.ptr = (uint8_t *)"untouched";
    line.len = 9;
    CHECK(botspace_output_log(&json, 4, "x", 1, 0, &stream, &line) == BOTSPACE_STATUS_INVALID_ARGUMENT && line.len == 9,
          "output_log: level 4 is INVALID_ARGUMENT, nothing written");
    CHECK(botspace_output_log(&bad, 0, "x", 1, 0, &stream, &line) == BOTSPACE_STATUS_INVALID_ARGUMENT && line.len == 9 &&
              strstr(last_error(), "threshold 4 is not 0 to 3") != NULL,
          "output_log: threshold 4 is INVALID_ARGUMENT");
    CHECK(botspace_output_log(NULL, 0, "x", 1, 0, &stream, &line) == BOTSPACE_STATUS_NULL_ARGUMENT, "output_log: NULL output");
    CHECK(botspace_output_log(&warn, 0, "x", 1, 0, NULL, &line) == BOTSPACE_STATUS_NULL_ARGUMENT, "output_log: NULL out_stream");
    CHECK(botspace_output_log(&warn, 0, "x", 1, 0, &stream, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "output_log: NULL out_line");
    CHECK(botspace_output_log(&warn, 0, NULL, 3, 0, &stream, &line) == BOTSPACE_STATUS_NULL_ARGUMENT && line.len == 9,
          "output_log: NULL msg with a length");
    line.ptr = NULL;
    line.len = 0;

    /* a block: whatever the threshold, on stdout */
    botspace_output error = {0, false}, error_json = {0, true};
    CHECK(botspace_output_block(&error, "demo", 4, "a: 1\nb\n", 7, 0, &stream, &line) == BOTSPACE_STATUS_OK &&
              stream == BOTSPACE_STREAM_STDOUT && take_eq(&line, "a: 1\nb\n"),
          "output_block: text under an error threshold");
    stream = BOTSPACE_STREAM_STDERR;
    CHECK(botspace_output_block(&error_json, "demo", 4, "a: 1\nb\n", 7, 2, &stream, &line) == BOTSPACE_STATUS_OK &&
              stream == BOTSPACE_STREAM_STDOUT &&
              take_eq(&line, "{\"ts\":\"1970-01-01T00:00:00.002Z\",\"level\":\"info\",\"msg\":\"demo\",\"lines\":[\"a: 1\",\"b\"]}\n"),
          "output_block: one JSON line holding the block's lines");
    CHECK(botspace_output_block(&error, "demo", 4, NULL, 0, 0, &stream, &line) == BOTSPACE_STATUS_OK && line.ptr == NULL,
          "output_block: an empty block is nothing");
    CHECK(botspace_output_block(&bad, "demo", 4, "a", 1, 0, &stream, &line) == BOTSPACE_STATUS_INVALID_ARGUMENT,
          "output_block: threshold 4 is INVALID_ARGUMENT");
    CHECK(botspace_output_block(&error, "demo", 4, "a", 1, 0, NULL, &line) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "output_block: NULL out_stream");

    /* the start-up lines from getsockname's bytes */
    struct sockaddr_in pub;
    struct sockaddr_in6 adm;
    memset(&pub, 0, sizeof pub);
    memset(&adm, 0, sizeof adm);
    pub.sin_family = AF_INET;
    pub.sin_port = htons(8080);
    pub.sin_addr.s_addr = htonl(INADDR_ANY);
    adm.sin6_family = AF_INET6;
    adm.sin6_port = htons(8081);
    adm.sin6_addr = in6addr_any;
    botspace_startup *st = NULL;
    CHECK(botspace_startup_new(&pub, sizeof pub, &adm, sizeof adm, "ab12", 4, true, &st) == BOTSPACE_STATUS_OK && st,
          "startup_new: both listeners, a generated secret, a manual clock");
    botspace_output info = {2, false};
    static const char *const want[] = {
        "botspace listening on http://0.0.0.0:8080\n",
        "botspace admin listening on http://[::]:8081\n",
        "admin secret: ab12\n",
        "clock: manual (moves only through /admin/advanceClock)\n",
        "",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char name[96];
        snprintf(name, sizeof name, "startup_next_line: line %zu", i + 1);
        stream = BOTSPACE_STREAM_STDERR;
        CHECK(botspace_startup_next_line(st, &info, 0, &stream, &line) == BOTSPACE_STATUS_OK &&
                  stream == BOTSPACE_STREAM_STDOUT && take_eq(&line, want[i]),
              name);
    }
    CHECK(botspace_startup_next_line(st, &info, 0, &stream, &line) == BOTSPACE_STATUS_OK && line.ptr == NULL,
          "startup_next_line: still none left");
    botspace_bytes base = {NULL, 0}, admin_base = {NULL, 0};
    CHECK(botspace_startup_base_urls(st, &base, &admin_base) == BOTSPACE_STATUS_OK && take_eq(&base, "http://127.0.0.1:8080") &&
              take_eq(&admin_base, "http://[::1]:8081"),
          "startup_base_urls: wildcard addresses made loopback");
    CHECK(botspace_startup_base_urls(st, NULL, &admin_base) == BOTSPACE_STATUS_NULL_ARGUMENT, "startup_base_urls: NULL out");
    CHECK(botspace_startup_base_urls(NULL, &base, &admin_base) == BOTSPACE_STATUS_NULL_ARGUMENT, "startup_base_urls: NULL startup");
    botspace_startup_free(&st);
    CHECK(st == NULL, "startup_free sets the handle to NULL");
    botspace_startup_free(&st);
    botspace_startup_free(NULL);

    /* under an error threshold only a generated secret's block shows */
    pub.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(botspace_startup_new(&pub, sizeof pub, NULL, 0, NULL, 0, false, &st) == BOTSPACE_STATUS_OK, "startup_new: one listener");
    CHECK(botspace_startup_next_line(st, &error_json, 0, &stream, &line) == BOTSPACE_STATUS_OK && line.ptr == NULL,
          "startup_next_line: an error threshold drops the info lines");
    CHECK(botspace_startup_base_urls(st, &base, &admin_base) == BOTSPACE_STATUS_OK && take_eq(&base, "http://127.0.0.1:8080") &&
              take_eq(&admin_base, "http://127.0.0.1:8080"),
          "startup_base_urls: /admin/ on the public listener");
    botspace_startup_free(&st);
    CHECK(botspace_startup_new(&adm, sizeof adm, NULL, 0, "s", 1, false, &st) == BOTSPACE_STATUS_OK, "startup_new: IPv6 only");
    CHECK(botspace_startup_next_line(st, &error_json, 5, &stream, &line) == BOTSPACE_STATUS_OK &&
              take_eq(&line, "{\"ts\":\"1970-01-01T00:00:00.005Z\",\"level\":\"info\",\"msg\":\"admin secret (generated; shown "
                             "only now)\",\"lines\":[\"admin secret: s\"]}\n"),
          "startup_next_line: the secret's block in JSON whatever the level");
    CHECK(botspace_startup_next_line(st, &bad, 5, &stream, &line) == BOTSPACE_STATUS_INVALID_ARGUMENT,
          "startup_next_line: threshold 4 is INVALID_ARGUMENT");
    CHECK(botspace_startup_next_line(NULL, &info, 5, &stream, &line) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "startup_next_line: NULL startup");
    botspace_startup_free(&st);
    botspace_startup *sentinel = (botspace_startup *)&pub;
    st = sentinel;
    CHECK(botspace_startup_new(&pub, 3, NULL, 0, NULL, 0, false, &st) == BOTSPACE_STATUS_INVALID_ARGUMENT && st == sentinel,
          "startup_new: 3 bytes are no address");
    struct sockaddr_in other = pub;
    other.sin_family = AF_UNIX;
    CHECK(botspace_startup_new(&other, sizeof other, NULL, 0, NULL, 0, false, &st) == BOTSPACE_STATUS_INVALID_ARGUMENT &&
              st == sentinel,
          "startup_new: AF_UNIX is no IP address");
    CHECK(botspace_startup_new(&pub, sizeof pub, &pub, 4, NULL, 0, false, &st) == BOTSPACE_STATUS_INVALID_ARGUMENT &&
              st == sentinel && strstr(last_error(), "admin_addr") != NULL,
          "startup_new: a short admin address");
    CHECK(botspace_startup_new(NULL, 0, NULL, 0, NULL, 0, false, &st) == BOTSPACE_STATUS_INVALID_ARGUMENT && st == sentinel,
          "startup_new: no public address");
    CHECK(botspace_startup_new(&pub, sizeof pub, NULL, 0, NULL, 0, false, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "startup_new: NULL out");

    /* the library's own lines through the same rule */
    botspace_service *s = NULL;
    CHECK(botspace_service_open((const uint8_t *)BASE_CONFIG, strlen(BASE_CONFIG), &s) == BOTSPACE_STATUS_OK, "output: open");
    CHECK(botspace_service_set_output_callback(NULL, &warn, on_output, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "set_output_callback: NULL service");
    CHECK(botspace_service_set_output_callback(s, NULL, on_output, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "set_output_callback: NULL output with a callback");
    CHECK(botspace_service_set_output_callback(s, &bad, on_output, NULL) == BOTSPACE_STATUS_INVALID_ARGUMENT,
          "set_output_callback: threshold 4");
    CHECK(botspace_service_set_output_callback(s, &warn, on_output, NULL) == BOTSPACE_STATUS_OK, "set_output_callback: warn, text");
    CHECK(botspace_service_note_connection_evicted(s) == BOTSPACE_STATUS_OK && last_out.calls == 1 &&
              last_out.stream == BOTSPACE_STREAM_STDERR &&
              strcmp(last_out.line, "connection evicted: the oldest waiting connection was closed to admit a new one at the "
                                    "connection limit event=connection_evicted\n") == 0,
          "set_output_callback: a warn event's text line on stderr");
    CHECK(botspace_service_note_request_timeout(s) == BOTSPACE_STATUS_OK && last_out.calls == 1,
          "set_output_callback: an info event under a warn threshold is not given");
    CHECK(botspace_service_set_output_callback(s, &json, on_output, NULL) == BOTSPACE_STATUS_OK, "set_output_callback: info, json");
    CHECK(botspace_service_note_request_timeout(s) == BOTSPACE_STATUS_OK && last_out.calls == 2 &&
              last_out.stream == BOTSPACE_STREAM_STDOUT && strncmp(last_out.line, "{\"ts\":\"", 7) == 0 &&
              strstr(last_out.line, "Z\",\"level\":\"info\",\"msg\":\"request timed out: answered 408, it did not arrive whole "
                                    "in time\",\"event\":\"request_timeout\"}\n") != NULL,
          "set_output_callback: an info event's JSON line on stdout");
    CHECK(botspace_service_set_output_callback(s, NULL, NULL, NULL) == BOTSPACE_STATUS_OK, "set_output_callback: NULL removes");
    CHECK(botspace_service_note_connection_evicted(s) == BOTSPACE_STATUS_OK && last_out.calls == 2, "no output callback: no line");
    botspace_service_free(&s);

    /* the level from the environment: BOTSPACE_LOG when set, else RUST_LOG */
    char *saved[2] = {NULL, NULL};
    static const char *const vars[2] = {"BOTSPACE_LOG", "RUST_LOG"};
    for (int i = 0; i < 2; i++) {
        const char *v = getenv(vars[i]);
        saved[i] = v ? strdup(v) : NULL;
    }
    unsetenv("BOTSPACE_LOG");
    unsetenv("RUST_LOG");
    out.threshold = -7;
    CHECK(botspace_output_from_env(true, &out) == BOTSPACE_STATUS_OK && out.threshold == 2 && out.json,
          "output_from_env: neither set is info");
    setenv("RUST_LOG", "debug", 1);
    CHECK(botspace_output_from_env(false, &out) == BOTSPACE_STATUS_OK && out.threshold == 3 && !out.json,
          "output_from_env: RUST_LOG=debug alone");
    setenv("BOTSPACE_LOG", "warn", 1);
    CHECK(botspace_output_from_env(false, &out) == BOTSPACE_STATUS_OK && out.threshold == 1,
          "output_from_env: BOTSPACE_LOG=warn beats RUST_LOG=debug");
    setenv("BOTSPACE_LOG", "", 1);
    CHECK(botspace_output_from_env(false, &out) == BOTSPACE_STATUS_OK && out.threshold == 2,
          "output_from_env: an empty BOTSPACE_LOG is set: info, not RUST_LOG's debug");
    CHECK(botspace_output_from_env(false, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT, "output_from_env: NULL out");
    for (int i = 0; i < 2; i++) {
        if (saved[i]) setenv(vars[i], saved[i], 1);
        else unsetenv(vars[i]);
        free(saved[i]);
    }

    /* a server's lines about its own life */
    CHECK(botspace_output_server_line(&info, BOTSPACE_SERVER_LINE_READY, 0, 0, &stream, &line) == BOTSPACE_STATUS_OK &&
              stream == BOTSPACE_STREAM_STDOUT && take_eq(&line, "botspace ready\n"),
          "server_line: ready");
    CHECK(botspace_output_server_line(&info, BOTSPACE_SERVER_LINE_STOPPING, 0, 0, &stream, &line) == BOTSPACE_STATUS_OK &&
              take_eq(&line, "botspace stopping\n"),
          "server_line: stopping");
    CHECK(botspace_output_server_line(&info, BOTSPACE_SERVER_LINE_STOPPED, 0, 0, &stream, &line) == BOTSPACE_STATUS_OK &&
              take_eq(&line, "botspace stopped\n"),
          "server_line: stopped");
    CHECK(botspace_output_server_line(&info, BOTSPACE_SERVER_LINE_STOPPED, 4, 0, &stream, &line) == BOTSPACE_STATUS_OK &&
              take_eq(&line, "botspace stopped (4 connections cut; every answered request was already committed)\n"),
          "server_line: stopped with connections cut");
    CHECK(botspace_output_server_line(&json, BOTSPACE_SERVER_LINE_READY, 0, 1000, &stream, &line) == BOTSPACE_STATUS_OK &&
              stream == BOTSPACE_STREAM_STDOUT &&
              take_eq(&line, "{\"ts\":\"1970-01-01T00:00:01.000Z\",\"level\":\"info\",\"msg\":\"botspace ready\"}\n"),
          "server_line: ready in JSON");
    CHECK(botspace_output_server_line(&warn, BOTSPACE_SERVER_LINE_READY, 0, 0, &stream, &line) == BOTSPACE_STATUS_OK &&
              line.ptr == NULL && line.len == 0,
          "server_line: an info line under a warn threshold is nothing");
    CHECK(botspace_output_server_line(&info, 3, 0, 0, &stream, &line) == BOTSPACE_STATUS_INVALID_ARGUMENT &&
              strstr(last_error(), "server line 3 is not 0 to 2") != NULL,
          "server_line: 3 is INVALID_ARGUMENT");
    CHECK(botspace_output_server_line(&bad, BOTSPACE_SERVER_LINE_READY, 0, 0, &stream, &line) == BOTSPACE_STATUS_INVALID_ARGUMENT,
          "server_line: threshold 4");
    CHECK(botspace_output_server_line(&info, BOTSPACE_SERVER_LINE_READY, 0, 0, &stream, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "server_line: NULL out_line");

    /* the library's log records: the host's output and callback, checked */
    CHECK(botspace_output_set_records_callback(NULL, on_output, NULL) == BOTSPACE_STATUS_NULL_ARGUMENT,
          "set_records_callback: NULL output with a callback");
    CHECK(botspace_output_set_records_callback(&bad, on_output, NULL) == BOTSPACE_STATUS_INVALID_ARGUMENT,
          "set_records_callback: threshold 4");
    CHECK(botspace_output_set_records_callback(&json, on_output, NULL) == BOTSPACE_STATUS_OK && last_out.calls == 2,
          "set_records_callback: set, nothing said yet");
    CHECK(botspace_output_set_records_callback(NULL, NULL, NULL) == BOTSPACE_STATUS_OK, "set_records_callback: NULL removes");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s VECTORS_DIR\n", argv[0]);
        return 2;
    }
    int iters = 200;
    const char *env = getenv("BOTSPACE_TEST_ITERS");
    if (env && atoi(env) > 0) iters = atoi(env);
    printf("# botspace %s\n", botspace_version());
    test_basics();
    test_open();
    test_requests();
    test_admin_throttle();
    test_long_polling();
    test_request_framer();
    test_request_head();
    test_http_connection();
    test_http_round();
    test_connection_budgets();
    test_host_policy();
    test_admission();
    test_output();
    test_gateway();
    test_gateway_link();
    test_webhooks();
    test_webhook_pump();
    test_webhook_answer();
    test_threads(iters);
    test_vectors(argv[1]);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
