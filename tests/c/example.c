/* The short example of docs/c-api.md, compiled and run by scripts/test-c.sh
 * through pkg-config (dynamic and static): open a service, create a bot
 * through the host API, answer the bot's getMe. */
#include <botspace.h>
#include <stdio.h>
#include <string.h>

#define SECRET "example-admin-secret-01"

/* Answers one complete HTTP/1.1 request, as a host would for a socket's
 * bytes; the response goes to *resp (free it with botspace_bytes_free). */
static int answer(botspace_service *svc, const char *req, botspace_bytes *resp) {
    return botspace_service_handle_request(svc, (const uint8_t *)req, strlen(req), resp) == BOTSPACE_STATUS_OK &&
           resp->len > 12 && memcmp(resp->ptr, "HTTP/1.1 200", 12) == 0;
}

int main(void) {
    const char *cfg = "{\"database\":\":memory:\",\"admin_secret\":\"" SECRET "\"}";
    botspace_service *svc = NULL;
    if (botspace_service_open((const uint8_t *)cfg, strlen(cfg), &svc) != BOTSPACE_STATUS_OK) {
        char msg[256];
        size_t n = 0;
        botspace_last_error_message(msg, sizeof msg, &n);
        fprintf(stderr, "open failed: %s\n", msg);
        return 1;
    }
    const char *body = "{\"display_name\":\"C Bot\",\"handle\":\"c_bot\"}";
    char req[1024];
    snprintf(req, sizeof req,
             "POST /admin/createBot HTTP/1.1\r\nHost: x\r\nAuthorization: Admin " SECRET "\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(body), body);
    botspace_bytes resp = {NULL, 0};
    char token[128] = "";
    if (answer(svc, req, &resp)) {
        /* {"ok":true,"result":{"bot":{...},"token":"bot_..."}} */
        char text[2048];
        size_t n = resp.len < sizeof text - 1 ? resp.len : sizeof text - 1;
        memcpy(text, resp.ptr, n);
        text[n] = 0;
        const char *at = strstr(text, "\"token\":\"");
        if (at) sscanf(at + 9, "%127[^\"]", token);
    }
    botspace_bytes_free(&resp);
    int ok = 0;
    if (token[0]) {
        snprintf(req, sizeof req, "POST /bot/getMe HTTP/1.1\r\nHost: x\r\nAuthorization: Bot %s\r\n\r\n", token);
        ok = answer(svc, req, &resp);
        fwrite(resp.ptr, 1, resp.len, stdout); /* HTTP/1.1 200 OK ... {"ok":true,"result":{"id":"bot_...",...}} */
        putchar('\n');
        botspace_bytes_free(&resp);
    }
    botspace_service_free(&svc);
    printf("botspace %s\n", botspace_version());
    return ok ? 0 : 1;
}
