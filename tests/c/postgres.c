/* The C library built with its `postgres` feature opens a postgres:// database:
 * scripts/test-postgres.sh builds libbotspace.a with
 * `cargo build -p botspace-c --features postgres`, links this file against it
 * and runs it with the URL of a throwaway cluster (scripts/with-postgres.sh).
 * It opens the service twice (the second open finds the schema in place) and
 * creates a user each time; any other answer fails. */
#include <botspace.h>
#include <stdio.h>
#include <string.h>

static int fails = 0;

static void check(int ok, const char *what) {
    printf("%s - %s\n", ok ? "ok" : "FAIL", what);
    if (!ok) fails++;
}

static int create_user(botspace_service *svc) {
    const char *req = "POST /admin/createUser HTTP/1.1\r\nHost: x\r\n"
                      "Authorization: Admin postgres-c-admin-secret\r\n"
                      "Content-Type: application/json\r\nContent-Length: 22\r\n\r\n"
                      "{\"display_name\":\"Ann\"}";
    botspace_bytes resp = {NULL, 0};
    char text[1024] = {0};
    int ok = botspace_service_handle_request(svc, (const uint8_t *)req, strlen(req), &resp) == BOTSPACE_STATUS_OK &&
             resp.len < sizeof text;
    if (ok) memcpy(text, resp.ptr, resp.len); /* NUL-terminated for strstr */
    const char *body = strstr(text, "\r\n\r\n");
    ok = ok && strncmp(text, "HTTP/1.1 200 OK\r\n", 17) == 0 && body != NULL &&
         strncmp(body + 4, "{\"ok\":true,\"result\":{\"display_name\":\"Ann\",\"handle\":null,\"id\":\"usr_", 66) == 0;
    if (!ok && resp.ptr) fwrite(resp.ptr, 1, resp.len, stderr);
    botspace_bytes_free(&resp);
    return ok;
}

int main(int argc, char **argv) {
    if (argc != 2 || strncmp(argv[1], "postgres", 8) != 0) {
        fprintf(stderr, "usage: %s postgres://...\n", argv[0]);
        return 2;
    }
    char cfg[1024];
    int n = snprintf(cfg, sizeof cfg, "{\"database\":\"%s\",\"admin_secret\":\"postgres-c-admin-secret\"}", argv[1]);
    if (n < 0 || (size_t)n >= sizeof cfg) return 2;
    for (int round = 0; round < 2; round++) {
        botspace_service *svc = NULL;
        int opened = botspace_service_open((const uint8_t *)cfg, (size_t)n, &svc) == BOTSPACE_STATUS_OK;
        if (!opened) {
            char msg[512];
            size_t len = 0;
            botspace_last_error_message(msg, sizeof msg, &len);
            fprintf(stderr, "open failed: %s\n", msg);
        }
        check(opened, round == 0 ? "open a postgres:// database (schema created)" : "open it again (schema found)");
        if (!opened) break;
        check(create_user(svc), "POST /admin/createUser answers 200 with a user");
        botspace_service_free(&svc);
    }
    printf("%d failed\n", fails);
    return fails == 0 ? 0 : 1;
}
