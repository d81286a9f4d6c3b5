/*
 * getMe and sendMessage through the C ABI; the C half of the FFI benchmark
 * (bindings/c/examples/ffi_bench.rs runs this program between its own Rust
 * rounds and prints both side by side).
 *
 *   bench [N]     prints `getMe NS` and `sendMessage NS` (ns per call)
 *
 * The setup and the request bytes are the same as in ffi_bench.rs: a fresh
 * in-memory service with every tier unlimited, a user, a bot and their
 * started private chat, N/10 warm-up calls, then N timed calls each.
 */
#define _POSIX_C_SOURCE 200809L

#include "botspace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char CONFIG[] = "{\"database\":\":memory:\",\"admin_secret\":\"bench-admin-secret-0001\",\"clock\":\"manual\","
                             "\"limits\":{\"free\":{},\"standard\":{},\"official\":{}}}";

static botspace_service *svc;

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Calls a host method; returns the response text (caller frees). */
static char *admin(const char *method, const char *body) {
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "POST /admin/%s HTTP/1.1\r\nHost: bench\r\nAuthorization: Admin bench-admin-secret-0001\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     method, strlen(body), body);
    botspace_bytes r = {NULL, 0};
    if (botspace_service_handle_request(svc, (const uint8_t *)req, (size_t)n, &r) != BOTSPACE_STATUS_OK || r.len < 12 ||
        memcmp(r.ptr, "HTTP/1.1 200", 12) != 0) {
        fprintf(stderr, "%s failed: %.*s\n", method, (int)r.len, (const char *)r.ptr);
        exit(1);
    }
    char *text = malloc(r.len + 1);
    memcpy(text, r.ptr, r.len);
    text[r.len] = 0;
    botspace_bytes_free(&r);
    return text;
}

/* Copies the first string value of `"key":"` in text into out. */
static void pick(const char *text, const char *key, char *out, size_t outlen) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = strstr(text, pat);
    if (!p) {
        fprintf(stderr, "no %s in %s\n", key, text);
        exit(1);
    }
    p += strlen(pat);
    size_t len = strcspn(p, "\"");
    if (len >= outlen) len = outlen - 1;
    memcpy(out, p, len);
    out[len] = 0;
}

static size_t request(char *buf, size_t cap, const char *path, const char *token, const char *body) {
    int n;
    if (body[0] == 0)
        n = snprintf(buf, cap, "POST %s HTTP/1.1\r\nHost: bench\r\nAuthorization: Bot %s\r\nContent-Type: application/json\r\n\r\n",
                     path, token);
    else
        n = snprintf(buf, cap,
                     "POST %s HTTP/1.1\r\nHost: bench\r\nAuthorization: Bot %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     path, token, strlen(body), body);
    return (size_t)n;
}

static double timed(const char *req, size_t len, long n) {
    for (long i = 0; i < n / 10; i++) {
        botspace_bytes r = {NULL, 0};
        if (botspace_service_handle_request(svc, (const uint8_t *)req, len, &r) != BOTSPACE_STATUS_OK ||
            memcmp(r.ptr, "HTTP/1.1 200", 12) != 0) {
            fprintf(stderr, "warm-up call failed\n");
            exit(1);
        }
        botspace_bytes_free(&r);
    }
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        botspace_bytes r = {NULL, 0};
        botspace_service_handle_request(svc, (const uint8_t *)req, len, &r);
        botspace_bytes_free(&r);
    }
    return (now_ns() - t0) / (double)n;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    if (n < 10) n = 10;
    if (botspace_service_open((const uint8_t *)CONFIG, strlen(CONFIG), &svc) != BOTSPACE_STATUS_OK) {
        fputs("cannot open the service\n", stderr);
        return 1;
    }
    char user[64], bot[64], token[128], chat[64], body[256];
    char *t = admin("createUser", "{\"display_name\":\"Bench User\"}");
    pick(t, "id", user, sizeof user);
    free(t);
    t = admin("createBot", "{\"display_name\":\"Bench Bot\",\"handle\":\"bench_bot\"}");
    pick(strstr(t, "\"bot\":"), "id", bot, sizeof bot);
    pick(t, "token", token, sizeof token);
    free(t);
    snprintf(body, sizeof body, "{\"user_id\":\"%s\",\"bot_id\":\"%s\"}", user, bot);
    t = admin("startBot", body);
    pick(t, "id", chat, sizeof chat);
    free(t);

    char get_me[512], send[1024];
    size_t get_me_len = request(get_me, sizeof get_me, "/bot/getMe", token, "");
    snprintf(body, sizeof body, "{\"chat_id\":\"%s\",\"text\":\"hello from the benchmark\"}", chat);
    size_t send_len = request(send, sizeof send, "/bot/sendMessage", token, body);
    double g = timed(get_me, get_me_len, n);
    double s = timed(send, send_len, n);
    printf("getMe %.1f\nsendMessage %.1f\n", g, s);
    botspace_service_free(&svc);
    return 0;
}
