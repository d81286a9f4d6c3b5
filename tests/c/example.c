/* The short example of docs/c-api.md, compiled and run by scripts/test-c.sh
 * through pkg-config (dynamic and static). */
#include <botspace.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    const char *cfg = "{\"database\":\":memory:\",\"admin_secret\":\"example-admin-secret-01\"}";
    botspace_service *svc = NULL;
    if (botspace_service_open((const uint8_t *)cfg, strlen(cfg), &svc) != BOTSPACE_STATUS_OK) {
        char msg[256];
        size_t n = 0;
        botspace_last_error_message(msg, sizeof msg, &n);
        fprintf(stderr, "open failed: %s\n", msg);
        return 1;
    }
    const char *req = "POST /admin/createUser HTTP/1.1\r\nHost: x\r\n"
                      "Authorization: Admin example-admin-secret-01\r\n"
                      "Content-Type: application/json\r\nContent-Length: 22\r\n\r\n"
                      "{\"display_name\":\"Ann\"}";
    botspace_bytes resp = {NULL, 0};
    if (botspace_service_handle_request(svc, (const uint8_t *)req, strlen(req), &resp) == BOTSPACE_STATUS_OK) {
        fwrite(resp.ptr, 1, resp.len, stdout); /* HTTP/1.1 200 OK ... {"ok":true,...} */
        putchar('\n');
    }
    int ok = resp.len > 12 && memcmp(resp.ptr, "HTTP/1.1 200", 12) == 0;
    botspace_bytes_free(&resp);
    botspace_service_free(&svc);
    printf("botspace %s\n", botspace_version());
    return ok ? 0 : 1;
}
