/* A compact JSON reader/writer for the C tests; see json.h. */
#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fputs("out of memory\n", stderr);
        abort();
    }
    return p;
}

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fputs("out of memory\n", stderr);
        abort();
    }
    return q;
}

void sb_add(sbuf *b, const void *data, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap *= 2;
        b->p = xrealloc(b->p, cap);
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = 0;
}

void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

void sb_fmt(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        char *tmp = xmalloc((size_t)n + 1);
        vsnprintf(tmp, (size_t)n + 1, fmt, ap2);
        sb_add(b, tmp, (size_t)n);
        free(tmp);
    }
    va_end(ap2);
}

void sb_free(sbuf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

jval *json_new(jtype t) {
    jval *v = xmalloc(sizeof *v);
    memset(v, 0, sizeof *v);
    v->t = t;
    return v;
}

jval *json_new_str(const char *s, size_t n) {
    jval *v = json_new(J_STR);
    v->s = xmalloc(n + 1);
    memcpy(v->s, s, n);
    v->s[n] = 0;
    v->slen = n;
    return v;
}

void json_free(jval *v) {
    if (!v) return;
    free(v->s);
    for (size_t i = 0; i < v->n; i++) {
        json_free(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->klens);
    free(v);
}

static void push(jval *c, char *key, size_t klen, jval *item) {
    if (c->t == J_OBJ) {
        for (size_t i = 0; i < c->n; i++) {
            if (c->klens[i] == klen && memcmp(c->keys[i], key, klen) == 0) { /* duplicate: last wins */
                json_free(c->items[i]);
                c->items[i] = item;
                free(key);
                return;
            }
        }
    }
    c->items = xrealloc(c->items, (c->n + 1) * sizeof *c->items);
    c->items[c->n] = item;
    if (c->t == J_OBJ) {
        c->keys = xrealloc(c->keys, (c->n + 1) * sizeof *c->keys);
        c->klens = xrealloc(c->klens, (c->n + 1) * sizeof *c->klens);
        c->keys[c->n] = key;
        c->klens[c->n] = klen;
    }
    c->n++;
}

jval *json_clone(const jval *v) {
    jval *c = json_new(v->t);
    c->b = v->b;
    if (v->s) {
        c->s = xmalloc(v->slen + 1);
        memcpy(c->s, v->s, v->slen + 1);
        c->slen = v->slen;
    }
    for (size_t i = 0; i < v->n; i++) {
        char *k = NULL;
        if (v->t == J_OBJ) {
            k = xmalloc(v->klens[i] + 1);
            memcpy(k, v->keys[i], v->klens[i] + 1);
        }
        push(c, k, v->t == J_OBJ ? v->klens[i] : 0, json_clone(v->items[i]));
    }
    return c;
}

jval *json_get(const jval *obj, const char *key) {
    if (!obj || obj->t != J_OBJ) return NULL;
    size_t kl = strlen(key);
    for (size_t i = 0; i < obj->n; i++)
        if (obj->klens[i] == kl && memcmp(obj->keys[i], key, kl) == 0) return obj->items[i];
    return NULL;
}

void json_set(jval *obj, const char *key, jval *v) {
    size_t kl = strlen(key);
    char *k = xmalloc(kl + 1);
    memcpy(k, key, kl + 1);
    push(obj, k, kl, v);
}

/* ---- parser ---- */

typedef struct {
    const char *p, *end;
    char *err;
    size_t errlen;
    int depth;
} parser;

static void fail(parser *ps, const char *msg) {
    if (ps->err && ps->err[0] == 0) snprintf(ps->err, ps->errlen, "%s at byte %ld", msg, (long)(ps->end - ps->p));
}

static void ws(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static int hex4(parser *ps, unsigned *out) {
    if (ps->end - ps->p < 4) return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = ps->p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    ps->p += 4;
    *out = v;
    return 1;
}

static void put_utf8(sbuf *b, unsigned cp) {
    unsigned char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (unsigned char)(0xC0 | (cp >> 6));
        u[1] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (unsigned char)(0xE0 | (cp >> 12));
        u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (unsigned char)(0xF0 | (cp >> 18));
        u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    sb_add(b, u, n);
}

/* Parses a string at ps->p (at the opening quote) into out. */
static int parse_string(parser *ps, sbuf *out) {
    ps->p++;
    for (;;) {
        if (ps->p >= ps->end) {
            fail(ps, "unterminated string");
            return 0;
        }
        unsigned char c = (unsigned char)*ps->p;
        if (c == '"') {
            ps->p++;
            if (!out->p) sb_add(out, "", 0);
            return 1;
        }
        if (c < 0x20) {
            fail(ps, "control character in string");
            return 0;
        }
        if (c != '\\') {
            const char *s = ps->p;
            while (ps->p < ps->end && *ps->p != '"' && *ps->p != '\\' && (unsigned char)*ps->p >= 0x20) ps->p++;
            sb_add(out, s, (size_t)(ps->p - s));
            continue;
        }
        ps->p++;
        if (ps->p >= ps->end) {
            fail(ps, "bad escape");
            return 0;
        }
        char e = *ps->p++;
        switch (e) {
        case '"': sb_add(out, "\"", 1); break;
        case '\\': sb_add(out, "\\", 1); break;
        case '/': sb_add(out, "/", 1); break;
        case 'b': sb_add(out, "\b", 1); break;
        case 'f': sb_add(out, "\f", 1); break;
        case 'n': sb_add(out, "\n", 1); break;
        case 'r': sb_add(out, "\r", 1); break;
        case 't': sb_add(out, "\t", 1); break;
        case 'u': {
            unsigned cp;
            if (!hex4(ps, &cp)) {
                fail(ps, "bad \\u escape");
                return 0;
            }
            if (cp >= 0xD800 && cp < 0xDC00) {
                unsigned lo;
                if (ps->end - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u') {
                    ps->p += 2;
                    if (!hex4(ps, &lo) || lo < 0xDC00 || lo >= 0xE000) {
                        fail(ps, "lone surrogate");
                        return 0;
                    }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else {
                    fail(ps, "lone surrogate");
                    return 0;
                }
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                fail(ps, "lone surrogate");
                return 0;
            }
            put_utf8(out, cp);
            break;
        }
        default:
            fail(ps, "bad escape");
            return 0;
        }
    }
}

static jval *parse_value(parser *ps);

static jval *parse_number(parser *ps) {
    const char *s = ps->p;
    if (ps->p < ps->end && *ps->p == '-') ps->p++;
    if (ps->p >= ps->end) goto bad;
    if (*ps->p == '0') {
        ps->p++;
    } else if (*ps->p >= '1' && *ps->p <= '9') {
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
    } else {
        goto bad;
    }
    if (ps->p < ps->end && *ps->p == '.') {
        ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') goto bad;
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') goto bad;
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
    }
    {
        jval *v = json_new(J_NUM);
        v->slen = (size_t)(ps->p - s);
        v->s = xmalloc(v->slen + 1);
        memcpy(v->s, s, v->slen);
        v->s[v->slen] = 0;
        return v;
    }
bad:
    fail(ps, "bad number");
    return NULL;
}

static int lit(parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, word, n) == 0) {
        ps->p += n;
        return 1;
    }
    return 0;
}

static jval *parse_value(parser *ps) {
    ws(ps);
    if (ps->p >= ps->end) {
        fail(ps, "unexpected end");
        return NULL;
    }
    if (++ps->depth > 128) {
        fail(ps, "nesting too deep");
        return NULL;
    }
    jval *v = NULL;
    char c = *ps->p;
    if (c == '{' || c == '[') {
        int obj = c == '{';
        v = json_new(obj ? J_OBJ : J_ARR);
        ps->p++;
        ws(ps);
        if (ps->p < ps->end && *ps->p == (obj ? '}' : ']')) {
            ps->p++;
        } else {
            for (;;) {
                char *key = NULL;
                size_t klen = 0;
                if (obj) {
                    ws(ps);
                    sbuf k = {0};
                    if (ps->p >= ps->end || *ps->p != '"' || !parse_string(ps, &k)) {
                        sb_free(&k);
                        fail(ps, "expected a key");
                        json_free(v);
                        return NULL;
                    }
                    key = k.p;
                    klen = k.len;
                    ws(ps);
                    if (ps->p >= ps->end || *ps->p != ':') {
                        free(key);
                        fail(ps, "expected ':'");
                        json_free(v);
                        return NULL;
                    }
                    ps->p++;
                }
                jval *item = parse_value(ps);
                if (!item) {
                    free(key);
                    json_free(v);
                    return NULL;
                }
                push(v, key, klen, item);
                ws(ps);
                if (ps->p < ps->end && *ps->p == ',') {
                    ps->p++;
                    continue;
                }
                if (ps->p < ps->end && *ps->p == (obj ? '}' : ']')) {
                    ps->p++;
                    break;
                }
                fail(ps, "expected ',' or a closing bracket");
                json_free(v);
                return NULL;
            }
        }
    } else if (c == '"') {
        sbuf s = {0};
        if (!parse_string(ps, &s)) {
            sb_free(&s);
            return NULL;
        }
        v = json_new(J_STR);
        v->s = s.p;
        v->slen = s.len;
    } else if (lit(ps, "true")) {
        v = json_new(J_BOOL);
        v->b = 1;
    } else if (lit(ps, "false")) {
        v = json_new(J_BOOL);
    } else if (lit(ps, "null")) {
        v = json_new(J_NULL);
    } else {
        v = parse_number(ps);
    }
    ps->depth--;
    return v;
}

jval *json_parse(const char *text, size_t len, char *err, size_t errlen) {
    parser ps = {text, text + len, err, errlen, 0};
    if (err && errlen) err[0] = 0;
    jval *v = parse_value(&ps);
    if (!v) return NULL;
    ws(&ps);
    if (ps.p != ps.end) {
        fail(&ps, "trailing characters");
        json_free(v);
        return NULL;
    }
    return v;
}

/* ---- writer ---- */

static void write_string(sbuf *out, const char *s, size_t n) {
    static const char hexd[] = "0123456789abcdef";
    sb_add(out, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[6];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) {
                u[0] = '\\';
                u[1] = 'u';
                u[2] = '0';
                u[3] = '0';
                u[4] = hexd[c >> 4];
                u[5] = hexd[c & 15];
            }
        }
        if (esc || c < 0x20) {
            sb_add(out, s + run, i - run);
            if (esc) sb_str(out, esc);
            else sb_add(out, u, 6);
            run = i + 1;
        }
    }
    sb_add(out, s + run, n - run);
    sb_add(out, "\"", 1);
}

static int key_cmp(const char *a, size_t al, const char *b, size_t bl) {
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c) return c;
    return al < bl ? -1 : al > bl;
}

void json_write(sbuf *out, const jval *v) {
    switch (v->t) {
    case J_NULL: sb_str(out, "null"); break;
    case J_BOOL: sb_str(out, v->b ? "true" : "false"); break;
    case J_NUM: sb_add(out, v->s, v->slen); break;
    case J_STR: write_string(out, v->s, v->slen); break;
    case J_ARR:
        sb_add(out, "[", 1);
        for (size_t i = 0; i < v->n; i++) {
            if (i) sb_add(out, ",", 1);
            json_write(out, v->items[i]);
        }
        sb_add(out, "]", 1);
        break;
    case J_OBJ: {
        /* keys in bytewise order, as serde_json's default BTreeMap */
        size_t *order = xmalloc(v->n * sizeof *order);
        for (size_t i = 0; i < v->n; i++) order[i] = i;
        for (size_t i = 1; i < v->n; i++) {
            size_t k = order[i], j = i;
            while (j > 0 && key_cmp(v->keys[order[j - 1]], v->klens[order[j - 1]], v->keys[k], v->klens[k]) > 0) {
                order[j] = order[j - 1];
                j--;
            }
            order[j] = k;
        }
        sb_add(out, "{", 1);
        for (size_t i = 0; i < v->n; i++) {
            if (i) sb_add(out, ",", 1);
            write_string(out, v->keys[order[i]], v->klens[order[i]]);
            sb_add(out, ":", 1);
            json_write(out, v->items[order[i]]);
        }
        sb_add(out, "}", 1);
        free(order);
        break;
    }
    }
}

int json_num_is_int(const jval *v) {
    return v->t == J_NUM && !memchr(v->s, '.', v->slen) && !memchr(v->s, 'e', v->slen) && !memchr(v->s, 'E', v->slen);
}

int json_equal(const jval *a, const jval *b) {
    if (a->t != b->t) return 0;
    switch (a->t) {
    case J_NULL: return 1;
    case J_BOOL: return a->b == b->b;
    case J_NUM: {
        int ai = json_num_is_int(a), bi = json_num_is_int(b);
        if (ai != bi) return 0;
        if (ai) {
            const char *x = a->s, *y = b->s;
            if (strcmp(x, "-0") == 0) x = "0";
            if (strcmp(y, "-0") == 0) y = "0";
            return strcmp(x, y) == 0;
        }
        return strtod(a->s, NULL) == strtod(b->s, NULL);
    }
    case J_STR: return a->slen == b->slen && memcmp(a->s, b->s, a->slen) == 0;
    case J_ARR:
        if (a->n != b->n) return 0;
        for (size_t i = 0; i < a->n; i++)
            if (!json_equal(a->items[i], b->items[i])) return 0;
        return 1;
    case J_OBJ:
        if (a->n != b->n) return 0;
        for (size_t i = 0; i < a->n; i++) {
            const jval *other = NULL;
            for (size_t j = 0; j < b->n; j++)
                if (b->klens[j] == a->klens[i] && memcmp(b->keys[j], a->keys[i], a->klens[i]) == 0) other = b->items[j];
            if (!other || !json_equal(a->items[i], other)) return 0;
        }
        return 1;
    }
    return 0;
}
