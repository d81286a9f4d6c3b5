/*
 * A compact JSON reader/writer for the C tests (RFC 8259). Strings keep
 * their length (they may contain NUL), numbers keep their source text, and
 * the writer emits compact JSON with object keys sorted bytewise, as
 * serde_json does, so request bodies match the Rust vector runner byte for
 * byte.
 */
#ifndef BOTSPACE_TEST_JSON_H
#define BOTSPACE_TEST_JSON_H

#include <stddef.h>

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jval jval;
struct jval {
    jtype t;
    int b;        /* J_BOOL */
    char *s;      /* J_STR: bytes (NUL-terminated too); J_NUM: source text */
    size_t slen;
    size_t n;     /* J_ARR, J_OBJ: element count */
    jval **items; /* J_ARR, J_OBJ: values */
    char **keys;  /* J_OBJ: keys (NUL-terminated too) */
    size_t *klens;
};

/* A growable string. */
typedef struct {
    char *p;
    size_t len, cap;
} sbuf;

void sb_add(sbuf *b, const void *data, size_t n);
void sb_str(sbuf *b, const char *s);
void sb_fmt(sbuf *b, const char *fmt, ...);
void sb_free(sbuf *b);

/* Parses `len` bytes; NULL on error with a message in err. */
jval *json_parse(const char *text, size_t len, char *err, size_t errlen);
void json_free(jval *v);
jval *json_clone(const jval *v);

jval *json_new(jtype t);
jval *json_new_str(const char *s, size_t n);
/* Object access; NULL when absent or not an object. */
jval *json_get(const jval *obj, const char *key);
/* Sets (or replaces) a key of an object; takes ownership of v. */
void json_set(jval *obj, const char *key, jval *v);

/* Compact JSON, keys sorted. */
void json_write(sbuf *out, const jval *v);

/* Structural equality as serde_json::Value compares (integers and floats
 * are different numbers). */
int json_equal(const jval *a, const jval *b);

/* Whether a number's text is an integer (no fraction, no exponent). */
int json_num_is_int(const jval *v);

#endif
