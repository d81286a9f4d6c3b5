// A C++ host, end to end through bindings/cpp/botspace.hpp: open a service,
// create a bot through the host API, then answer the bot's getMe. Built and
// run by scripts/test-c.sh (step 5); the build line is in docs/c-api.md.
//
//   c++ -std=c++17 bindings/cpp/example.cpp $(pkg-config --cflags --libs botspace-static) -o example
#include "botspace.hpp"

#include <iostream>
#include <string>

static const std::string SECRET = "cpp-example-admin-secret-01";

// A complete HTTP/1.1 POST with a JSON body, as a host's socket would read it.
static std::string post(const std::string &path, const std::string &auth, const std::string &body) {
    return "POST " + path + " HTTP/1.1\r\nHost: example\r\nAuthorization: " + auth +
           "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// The string value of "key" in a compact JSON text (enough for botspace's ids and tokens).
static std::string field(std::string_view json, const std::string &key) {
    std::string k = "\"" + key + "\":\"";
    size_t at = json.find(k);
    if (at == std::string_view::npos) return {};
    size_t start = at + k.size();
    return std::string(json.substr(start, json.find('"', start) - start));
}

int main() {
    try {
        botspace::Service svc =
            botspace::Service::open(R"({"database":":memory:","admin_secret":")" + SECRET + R"("})");

        botspace::Bytes created = svc.handle_request(
            post("/admin/createBot", "Admin " + SECRET, R"({"display_name":"Cpp Bot","handle":"cpp_bot"})"));
        std::string token = field(created.view(), "token");
        if (created.view().substr(0, 12) != "HTTP/1.1 200" || token.empty()) {
            std::cerr << "createBot failed:\n" << created.view() << "\n";
            return 1;
        }

        botspace::Bytes me = svc.handle_request(post("/bot/getMe", "Bot " + token, "{}"));
        std::cout << me.view() << "\n";
        bool ok = me.view().substr(0, 12) == "HTTP/1.1 200" && field(me.view(), "handle") == "cpp_bot";
        std::cout << (ok ? "getMe answered for @cpp_bot" : "getMe failed") << "\n";
        return ok ? 0 : 1;
    } catch (const botspace::Error &e) {
        std::cerr << "botspace error " << e.status() << ": " << e.what() << "\n";
        return 1;
    }
}
