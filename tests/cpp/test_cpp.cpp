// Tests of the header-only C++17 wrapper bindings/cpp/botspace.hpp: RAII
// and moves, string_view and byte inputs, exceptions, framing, batches, the
// gateway, the wake-up callback, store notifications and threads. Prints
// `N passed, M failed`.
#include "botspace.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

static int passed = 0, failed = 0;

static void check(bool ok, const char *name, int line) {
    if (ok) {
        passed++;
        std::printf("ok - %s\n", name);
    } else {
        failed++;
        std::printf("FAIL - %s (line %d)\n", name, line);
    }
    std::fflush(stdout);
}
#define CHECK(cond, name) check((cond), (name), __LINE__)

static const char *const CONFIG = R"({"admin_secret":"cpp-test-admin-secret-0001","clock":"manual","limits":{"free":{},"standard":{},"official":{}}})";

static std::string post(std::string_view path, std::string_view auth, std::string_view body) {
    std::string r = "POST " + std::string(path) + " HTTP/1.1\r\nHost: x\r\nAuthorization: " + std::string(auth) + "\r\n";
    r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
    return r;
}

static std::string body_of(const botspace::Bytes &b) {
    auto v = b.view();
    auto p = v.find("\r\n\r\n");
    return p == std::string_view::npos ? std::string() : std::string(v.substr(p + 4));
}

// The string value of the first `"key":"` (enough for ids and tokens).
static std::string pick(const std::string &json, const std::string &key) {
    auto p = json.find("\"" + key + "\":\"");
    if (p == std::string::npos) return {};
    p += key.size() + 4;
    return json.substr(p, json.find('"', p) - p);
}

static std::string admin(const botspace::Service &svc, const char *method, const std::string &body) {
    auto r = svc.handle_request(post(std::string("/admin/") + method, "Admin cpp-test-admin-secret-0001", body));
    return body_of(r);
}

int main() {
    std::printf("# botspace %s\n", std::string(botspace::version()).c_str());
    CHECK(!botspace::version().empty(), "version");

    // Exceptions carry the status and the message.
    try {
        botspace::Service::open(R"({"admin_secret":"short"})");
        CHECK(false, "invalid configuration throws");
    } catch (const botspace::Error &e) {
        CHECK(e.status() == BOTSPACE_STATUS_INVALID_CONFIG && std::strstr(e.what(), "admin_secret"), "invalid configuration throws");
    }
    try {
        botspace::Service::open(std::string_view());
        CHECK(false, "empty configuration throws");
    } catch (const botspace::Error &e) {
        CHECK(e.status() == BOTSPACE_STATUS_INVALID_CONFIG, "empty configuration throws");
    }

    botspace::Service svc = botspace::Service::open(CONFIG);
    std::atomic<int> wakes{0};
    std::string last_woken;
    std::mutex mu;
    svc.set_wake_callback([&](std::string_view bot) {
        wakes++;
        std::lock_guard<std::mutex> g(mu);
        last_woken = std::string(bot);
    });

    std::string user = pick(admin(svc, "createUser", R"({"display_name":"Ann"})"), "id");
    std::string created = admin(svc, "createBot", R"({"display_name":"Echo","handle":"echo_bot"})");
    std::string bot = pick(created.substr(created.find("\"bot\":")), "id");
    std::string token = pick(created, "token");
    std::string chat = pick(admin(svc, "startBot", R"({"user_id":")" + user + R"(","bot_id":")" + bot + R"("})"), "id");
    CHECK(!user.empty() && !bot.empty() && token.size() == 47 && !chat.empty(), "host API through the wrapper");
    CHECK(wakes.load() == 1 && last_woken == bot, "wake-up callback (a lambda) with the bot id");

    // Inputs: std::string, string_view, vector<uint8_t>, Bytes.
    std::string get_me = "POST /bot/getMe HTTP/1.1\r\nHost: x\r\nAuthorization: Bot " + token + "\r\n\r\n";
    botspace::Bytes r1 = svc.handle_request(get_me);
    botspace::Bytes r2 = svc.handle_request(std::string_view(get_me));
    std::vector<uint8_t> bytes(get_me.begin(), get_me.end());
    botspace::Bytes r3 = svc.handle_request(bytes);
    CHECK(r1.view().substr(0, 12) == "HTTP/1.1 200" && body_of(r1) == body_of(r2) && body_of(r2) == body_of(r3),
          "handle_request from string, string_view and byte vector");
    botspace::Bytes moved = std::move(r1);
    CHECK(r1.empty() && !moved.empty(), "Bytes moves");
    CHECK(svc.handle_request(botspace::ByteView()).view().substr(0, 12) == "HTTP/1.1 400", "an empty request is 400");

    // Framing of two pipelined requests.
    std::string two = get_me + get_me;
    botspace::Framing f = svc.frame_request(two);
    CHECK(f.kind == botspace::Framing::Kind::Complete && f.length == get_me.size(), "frame_request: complete");
    CHECK(svc.frame_request(botspace::ByteView(two).substr(0, 10)).kind == botspace::Framing::Kind::Incomplete,
          "frame_request: incomplete");
    botspace::Framing bad = svc.frame_request("\x01\x02\r\n\r\n");
    CHECK(bad.kind == botspace::Framing::Kind::Invalid && bad.error_response.view().substr(0, 12) == "HTTP/1.1 400",
          "frame_request: invalid with a response");

    // The resuming framer and the head it read.
    {
        botspace::RequestFramer fr(svc);
        CHECK(!fr.head(), "RequestFramer: no head before a request");
        botspace::Framing c = fr.frame(two);
        auto h = fr.head();
        CHECK(c.kind == botspace::Framing::Kind::Complete && c.length == get_me.size() && h &&
                  h->head_len == get_me.find("\r\n\r\n") + 4 && h->method_start == 0 && h->method_len == 4 &&
                  h->path_len == 10 && get_me.compare(h->path_start, h->path_len, "/bot/getMe") == 0 &&
                  h->http_minor == 1 && h->keep_alive && !h->close_token && !h->upgrade && !h->expect_continue &&
                  !h->has_expect,
              "RequestFramer: a complete request and its head");
        std::string close_req = "GET /bot/getMe HTTP/1.0\r\n\r\n";
        c = fr.frame(close_req);
        CHECK(c.kind == botspace::Framing::Kind::Complete && fr.head() && !fr.head()->keep_alive &&
                  fr.head()->http_minor == 0,
              "RequestFramer: HTTP/1.0 closes");
        botspace::RequestFramer moved_fr = std::move(fr);
        CHECK(moved_fr.frame(botspace::ByteView(two).substr(0, 10)).kind == botspace::Framing::Kind::Incomplete &&
                  !moved_fr.head(),
              "RequestFramer: moves; no head while the head is partial");
    }

    // Many at once.
    std::string send = post("/bot/sendMessage", "Bot " + token, R"({"chat_id":")" + chat + R"(","text":"hi"})");
    auto answers = svc.handle({{send, {}, true, false}, {send, {}, true, false}, {get_me, {}, true, false}}, svc.now_ms());
    CHECK(answers.size() == 3 && pick(body_of(answers[0].response), "message_id") == "1" &&
              pick(body_of(answers[1].response), "message_id") == "2" &&
              answers[2].response.view().substr(0, 12) == "HTTP/1.1 200" && !answers[0].parked() && !answers[2].parked(),
          "handle: many at once");
    CHECK(svc.handle({}, svc.now_ms()).empty(), "handle: none");

    // The graceful stop: /readyz says so, everything else is answered.
    CHECK(svc.handle_request(std::string_view("GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")).view().substr(0, 12) == "HTTP/1.1 200",
          "readyz: 200");
    svc.note_connection_evicted();
    svc.note_request_timeout();
    svc.begin_shutdown();
    CHECK(svc.handle_request(std::string_view("GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")).view().find("shutting_down") !=
              std::string_view::npos,
          "readyz: 503 shutting_down after begin_shutdown");

    // Gateway.
    std::string up = "GET /bot/gateway HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                     "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bot " +
                     token + "\r\n\r\n";
    uint64_t now = svc.now_ms();
    botspace::GatewayAccept acc = svc.accept_gateway(up, now);
    CHECK(acc.gateway.has_value() && acc.response.view().substr(0, 12) == "HTTP/1.1 101", "accept_gateway: 101");
    botspace::Gateway gw = std::move(*acc.gateway);
    acc.gateway.reset();
    CHECK(gw && gw.bot_id() == bot, "Gateway moves; bot_id");
    CHECK(gw.poll_timeout() == now + 2 * 41250 + 1, "poll_timeout: the heartbeat deadline");
    botspace::Bytes hello = gw.poll_transmit();
    CHECK(hello.view().find("\"op\":\"hello\"") != std::string_view::npos && hello.view().find("bot_started") != std::string_view::npos,
          "hello and the replayed event");
    admin(svc, "sendUserMessage", R"({"user_id":")" + user + R"(","chat_id":")" + chat + R"(","text":"ping"})");
    CHECK(gw.poll_transmit().view().find("\"text\":\"ping\"") != std::string_view::npos, "a live event after the wake-up");
    CHECK(gw.poll_transmit().size() == 0, "nothing more to send");
    botspace::GatewayAccept refused = svc.accept_gateway(up, now);
    CHECK(!refused.gateway && refused.response.view().substr(0, 12) == "HTTP/1.1 429", "accept_gateway: refusal");
    admin(svc, "advanceClock", R"({"seconds":100})");
    gw.handle_timeout(svc.now_ms());
    botspace::Bytes closing = gw.poll_transmit();
    CHECK(closing.size() >= 4 && closing.data()[0] == 0x88 && closing.data()[2] == 0x0f && closing.data()[3] == 0xa9,
          "close 4009 after the heartbeat timeout");
    auto closed = gw.poll_closed();
    CHECK(closed && closed->first == 4009 && closed->second == "session_timeout" && !gw.poll_closed(),
          "poll_closed: 4009 session_timeout, once");
    CHECK(gw.is_closed() && !gw.poll_timeout().has_value(), "is_closed; no timeout");
    gw = botspace::Gateway();
    CHECK(svc.accept_gateway(up, svc.now_ms()).gateway.has_value(), "the slot is free after the Gateway is destroyed");

    // Other nodes' commits: a SQLite service hears none, and waiting for
    // them returns 0 at once (not after the timeout) without waking anyone.
    CHECK(!svc.has_store_notifications(), "has_store_notifications: false on SQLite");
    int wakes_before_wait = wakes.load();
    auto wait_start = std::chrono::steady_clock::now();
    size_t heard = svc.wait_store_notifications(10000);
    auto waited_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - wait_start).count();
    CHECK(heard == 0 && waited_ms < 1000 && wakes.load() == wakes_before_wait,
          "wait_store_notifications: 0 at once on SQLite");

    // Threads on one service.
    std::atomic<int> errors{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; t++) {
        threads.emplace_back([&] {
            for (int i = 0; i < 100; i++) {
                if (svc.handle_request(send).view().substr(0, 12) != "HTTP/1.1 200") errors++;
                if (svc.handle_request(get_me).view().substr(0, 12) != "HTTP/1.1 200") errors++;
            }
        });
    }
    for (auto &t : threads) t.join();
    CHECK(errors.load() == 0, "8 threads through the wrapper");

    // Moving a service keeps it (and its callback) working.
    botspace::Service other = std::move(svc);
    int before = wakes.load();
    admin(other, "sendUserMessage", R"({"user_id":")" + user + R"(","chat_id":")" + chat + R"(","text":"again"})");
    CHECK(wakes.load() == before + 1, "a moved service keeps its callback");
    other.set_wake_callback(nullptr);
    admin(other, "sendUserMessage", R"({"user_id":")" + user + R"(","chat_id":")" + chat + R"(","text":"quiet"})");
    CHECK(wakes.load() == before + 1, "an empty callback removes it");

    std::printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
