// botspace.hpp: a header-only C++17 wrapper over the botspace C API
// (include/botspace.h). RAII handles, std::string_view / byte-view inputs,
// exceptions for failures. Link exactly as for C (see docs/c-api.md).
//
//   botspace::Service svc = botspace::Service::open(R"({"admin_secret":"...16+ chars...","database":"bots.db"})");
//   botspace::Bytes resp = svc.handle_request(request_bytes);
//   write(fd, resp.data(), resp.size());
//
// Threading follows the C API: a Service may be used from many threads at
// once (its destructor excepted); a Gateway from one thread at a time. The
// wake-up callback runs on the thread that ran the commit (with group
// commit, one of the grouped requests' threads), possibly on several threads
// at once, and must not block.
#ifndef BOTSPACE_HPP
#define BOTSPACE_HPP

#include "botspace.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace botspace {

/// A failed call: the C status and the library's message.
class Error : public std::runtime_error {
public:
    Error(botspace_status status, const std::string &message) : std::runtime_error(message), status_(status) {}
    botspace_status status() const noexcept { return status_; }

private:
    botspace_status status_;
};

/// The message of the last failed call on this thread.
inline std::string last_error_message() {
    size_t n = 0;
    if (botspace_last_error_message(nullptr, 0, &n) != BOTSPACE_STATUS_OK) return {};
    std::string s(n + 1, '\0');
    botspace_last_error_message(s.data(), s.size(), &n);
    s.resize(n);
    return s;
}

namespace detail {
inline void check(botspace_status st) {
    if (st != BOTSPACE_STATUS_OK) {
        std::string msg = last_error_message();
        if (msg.empty()) msg = botspace_status_message(static_cast<uint32_t>(st));
        throw Error(st, msg);
    }
}
} // namespace detail

/// The library version, e.g. "0.1.0".
inline std::string_view version() { return botspace_version(); }

/// Borrowed input bytes: from a string_view, a string, a vector or array of
/// bytes, or a pointer and a length. Must outlive the call it is passed to.
class ByteView {
public:
    constexpr ByteView() noexcept = default;
    ByteView(const void *data, size_t size) noexcept : data_(static_cast<const uint8_t *>(data)), size_(size) {}
    ByteView(std::string_view s) noexcept : ByteView(s.data(), s.size()) {}
    ByteView(const std::string &s) noexcept : ByteView(s.data(), s.size()) {}
    ByteView(const char *s) noexcept : ByteView(std::string_view(s)) {}
    template <typename T, typename A, typename = std::enable_if_t<sizeof(T) == 1>>
    ByteView(const std::vector<T, A> &v) noexcept : ByteView(v.data(), v.size()) {}
    template <typename T, size_t N, typename = std::enable_if_t<sizeof(T) == 1>>
    ByteView(const std::array<T, N> &a) noexcept : ByteView(a.data(), N) {}

    const uint8_t *data() const noexcept { return data_; }
    size_t size() const noexcept { return size_; }
    ByteView substr(size_t pos, size_t n = SIZE_MAX) const noexcept {
        if (pos > size_) pos = size_;
        return ByteView(data_ + pos, n < size_ - pos ? n : size_ - pos);
    }

private:
    const uint8_t *data_ = nullptr;
    size_t size_ = 0;
};

/// Bytes returned by botspace, owned; released by the destructor.
class Bytes {
public:
    Bytes() noexcept = default;
    explicit Bytes(botspace_bytes b) noexcept : b_(b) {}
    Bytes(const Bytes &) = delete;
    Bytes &operator=(const Bytes &) = delete;
    Bytes(Bytes &&o) noexcept : b_(o.b_) { o.b_ = botspace_bytes{nullptr, 0}; }
    Bytes &operator=(Bytes &&o) noexcept {
        if (this != &o) {
            botspace_bytes_free(&b_);
            b_ = o.b_;
            o.b_ = botspace_bytes{nullptr, 0};
        }
        return *this;
    }
    ~Bytes() { botspace_bytes_free(&b_); }

    const uint8_t *data() const noexcept { return b_.ptr; }
    size_t size() const noexcept { return b_.len; }
    bool empty() const noexcept { return b_.len == 0; }
    const uint8_t *begin() const noexcept { return b_.ptr; }
    const uint8_t *end() const noexcept { return b_.ptr + b_.len; }
    std::string_view view() const noexcept {
        return b_.len ? std::string_view(reinterpret_cast<const char *>(b_.ptr), b_.len) : std::string_view();
    }
    std::string str() const { return std::string(view()); }
    operator ByteView() const noexcept { return ByteView(b_.ptr, b_.len); }

private:
    botspace_bytes b_{nullptr, 0};
};

/// One request for `Service::handle`: its HTTP/1.1 bytes, who sent it (the
/// peer's address or any stable client key; empty when unknown), and
/// whether it must be answered now (`at_once`: a getUpdates never parks)
/// or arrived concurrently with the others (`unordered`).
struct Incoming {
    ByteView request;
    std::string_view peer;
    bool at_once = false;
    bool unordered = false;
};

/// What `Service::handle` did with one request: answered (`response`,
/// `poll_id` 0), or parked (`response` empty, `poll_id` names the poll;
/// its answer comes from `botspace_service_poll_parked`).
struct Handled {
    Bytes response;
    uint64_t poll_id = 0;
    bool parked() const noexcept { return poll_id != 0; }
};

/// Where the first request in a buffer ends.
struct Framing {
    enum class Kind { Complete = BOTSPACE_FRAMING_KIND_COMPLETE, Incomplete = BOTSPACE_FRAMING_KIND_INCOMPLETE, Invalid = BOTSPACE_FRAMING_KIND_INVALID };
    Kind kind = Kind::Incomplete;
    /// Length of the complete request (Complete only).
    size_t length = 0;
    /// The response to send before closing (Invalid only).
    Bytes error_response;
};

class Service;

/// One gateway connection. Move-only; use from one thread at a time.
class Gateway {
public:
    Gateway() noexcept = default;
    explicit Gateway(botspace_gateway *g) noexcept : g_(g) {}
    Gateway(const Gateway &) = delete;
    Gateway &operator=(const Gateway &) = delete;
    Gateway(Gateway &&o) noexcept : g_(std::exchange(o.g_, nullptr)) {}
    Gateway &operator=(Gateway &&o) noexcept {
        if (this != &o) {
            botspace_gateway_free(&g_);
            g_ = std::exchange(o.g_, nullptr);
        }
        return *this;
    }
    ~Gateway() { botspace_gateway_free(&g_); }

    explicit operator bool() const noexcept { return g_ != nullptr; }
    botspace_gateway *native() const noexcept { return g_; }

    /// Bytes read from the socket, received at `now_ms`.
    void handle_input(ByteView bytes, uint64_t now_ms) {
        detail::check(botspace_gateway_handle_input(g_, bytes.data(), bytes.size(), now_ms));
    }
    /// The time is `now_ms`: checks the heartbeat deadline.
    void handle_timeout(uint64_t now_ms) { detail::check(botspace_gateway_handle_timeout(g_, now_ms)); }
    /// The next bytes to write (empty: nothing now). Bounded per call:
    /// write them, then call again until empty.
    Bytes poll_transmit() {
        botspace_bytes b{nullptr, 0};
        detail::check(botspace_gateway_poll_transmit(g_, &b));
        return Bytes(b);
    }
    /// When to call handle_timeout at the latest; nullopt once closed.
    std::optional<uint64_t> poll_timeout() const {
        uint64_t d = BOTSPACE_NO_DEADLINE;
        detail::check(botspace_gateway_poll_timeout(g_, &d));
        if (d == BOTSPACE_NO_DEADLINE) return std::nullopt;
        return d;
    }
    /// Why the session ended, once: (close code, reason); nullopt otherwise.
    std::optional<std::pair<uint16_t, std::string_view>> poll_closed() {
        botspace_gateway_event ev{};
        detail::check(botspace_gateway_poll_event(g_, &ev));
        if (ev.kind != BOTSPACE_GATEWAY_EVENT_KIND_CLOSED) return std::nullopt;
        return std::make_pair(ev.close_code, std::string_view(ev.reason));
    }
    bool is_closed() const {
        bool c = false;
        detail::check(botspace_gateway_is_closed(g_, &c));
        return c;
    }
    std::string_view bot_id() const {
        const char *id = nullptr;
        detail::check(botspace_gateway_bot_id(g_, &id));
        return id;
    }

private:
    botspace_gateway *g_ = nullptr;
};

/// The result of Service::accept_gateway.
struct GatewayAccept {
    /// `101 Switching Protocols`, or a JSON error response.
    Bytes response;
    /// Set when the upgrade succeeded.
    std::optional<Gateway> gateway;
};

/// A botspace service. Move-only; thread-safe (the destructor excepted).
class Service {
public:
    using WakeCallback = std::function<void(std::string_view bot_id)>;

    /// Opens a service from a JSON configuration; throws Error.
    static Service open(std::string_view config_json) {
        botspace_service *s = nullptr;
        detail::check(botspace_service_open(reinterpret_cast<const uint8_t *>(config_json.data()), config_json.size(), &s));
        return Service(s);
    }

    Service(const Service &) = delete;
    Service &operator=(const Service &) = delete;
    Service(Service &&o) noexcept : s_(std::exchange(o.s_, nullptr)), hooks_(std::move(o.hooks_)) {}
    Service &operator=(Service &&o) noexcept {
        if (this != &o) {
            reset();
            s_ = std::exchange(o.s_, nullptr);
            hooks_ = std::move(o.hooks_);
        }
        return *this;
    }
    ~Service() { reset(); }

    botspace_service *native() const noexcept { return s_; }

    /// One complete HTTP/1.1 request in, one complete response out.
    Bytes handle_request(ByteView request) const {
        botspace_bytes b{nullptr, 0};
        detail::check(botspace_service_handle_request(s_, request.data(), request.size(), &b));
        return Bytes(b);
    }

    /// Where the first request in `buf` ends.
    Framing frame_request(ByteView buf) const {
        botspace_framing f{};
        detail::check(botspace_service_frame_request(s_, buf.data(), buf.size(), &f));
        Framing out;
        out.kind = static_cast<Framing::Kind>(f.kind);
        out.length = f.length;
        out.error_response = Bytes(f.error_response);
        return out;
    }

    /// The one typed way in (`botspace_service_handle`): one `Handled` per
    /// request, in order; a run of requests commits as one transaction, a
    /// getUpdates may park unless `at_once`. `now_ms` as for the gateway.
    std::vector<Handled> handle(const std::vector<Incoming> &requests, uint64_t now_ms) const {
        std::vector<botspace_incoming> in(requests.size());
        for (size_t i = 0; i < requests.size(); i++) {
            const Incoming &r = requests[i];
            uint32_t flags = (r.at_once ? BOTSPACE_INCOMING_AT_ONCE : 0u) | (r.unordered ? BOTSPACE_INCOMING_UNORDERED : 0u);
            in[i] = botspace_incoming{r.request.data(), r.request.size(), r.peer.data(), r.peer.size(), flags};
        }
        std::vector<botspace_handled> raw(requests.size(), botspace_handled{botspace_bytes{nullptr, 0}, 0});
        detail::check(botspace_service_handle(s_, in.data(), in.size(), now_ms, raw.data()));
        std::vector<Handled> out(raw.size());
        for (size_t i = 0; i < raw.size(); i++) {
            out[i].response = Bytes(raw[i].response);
            out[i].poll_id = raw[i].poll_id;
        }
        return out;
    }

    /// Registers the wake-up callback (an empty function removes it). It is
    /// called with a bot id on the committing thread, maybe on several
    /// threads at once; it must not block or throw.
    void set_wake_callback(WakeCallback cb) {
        if (!cb) {
            detail::check(botspace_service_set_wake_callback(s_, nullptr, nullptr));
            return;
        }
        // Earlier callbacks stay alive until the service is destroyed: another
        // thread may still be running one when it is replaced.
        auto holder = std::make_unique<WakeCallback>(std::move(cb));
        detail::check(botspace_service_set_wake_callback(s_, &Service::trampoline, holder.get()));
        std::lock_guard<std::mutex> g(hooks_->mu);
        hooks_->list.push_back(std::move(holder));
    }

    /// The service clock (Unix ms); pass it to Gateway::feed and poll.
    uint64_t now_ms() const {
        uint64_t t = 0;
        detail::check(botspace_service_now_ms(s_, &t));
        return t;
    }

    /// A graceful stop begins: GET /readyz answers 503 shutting_down from
    /// now on (docs/operations.md); call it first thing on SIGTERM.
    void begin_shutdown() const { detail::check(botspace_service_begin_shutdown(s_)); }
    /// The host closed a waiting connection at its connection limit.
    void note_connection_evicted() const { detail::check(botspace_service_note_connection_evicted(s_)); }
    /// The host answered 408 to a request that did not arrive in time.
    void note_request_timeout() const { detail::check(botspace_service_note_request_timeout(s_)); }

    /// True when other nodes' commits can be heard: the database is
    /// PostgreSQL and `listen_notify` is on. Only then run
    /// wait_store_notifications in a loop; otherwise it returns 0 at once.
    bool has_store_notifications() const {
        bool available = false;
        detail::check(botspace_service_has_store_notifications(s_, &available));
        return available;
    }

    /// Blocks at most `timeout_ms` for other nodes' notifications (shared
    /// PostgreSQL store), runs the wake-up callback on this thread for the
    /// notified bots with gateways here, and returns how many arrived. Throws
    /// Error (BOTSPACE_STATUS_STORAGE_ERROR) when the listening connection
    /// cannot be opened or broke: pause about a second and call again, the
    /// next call reconnects. Run it on a thread of its own and join that
    /// thread before the service is destroyed.
    size_t wait_store_notifications(uint64_t timeout_ms) const {
        size_t n = 0;
        detail::check(botspace_service_wait_store_notifications(s_, timeout_ms, &n));
        return n;
    }

    /// Checks a `GET /bot/gateway` upgrade request received at `now_ms`.
    GatewayAccept accept_gateway(ByteView request, uint64_t now_ms) const {
        botspace_bytes b{nullptr, 0};
        botspace_gateway *g = nullptr;
        detail::check(botspace_gateway_accept(s_, request.data(), request.size(), now_ms, &b, &g));
        GatewayAccept out;
        out.response = Bytes(b);
        if (g) out.gateway.emplace(g);
        return out;
    }

private:
    struct Hooks {
        std::mutex mu;
        std::vector<std::unique_ptr<WakeCallback>> list;
    };

    explicit Service(botspace_service *s) : s_(s), hooks_(std::make_unique<Hooks>()) {}

    void reset() noexcept {
        botspace_service_free(&s_); // unregisters the callback first
        hooks_.reset();
    }

    static void trampoline(void *user_data, const char *bot_id, size_t len) {
        try {
            (*static_cast<WakeCallback *>(user_data))(std::string_view(bot_id, len));
        } catch (...) {
            // An exception must not cross the C boundary.
        }
    }

    botspace_service *s_ = nullptr;
    std::unique_ptr<Hooks> hooks_;
};

/// A request framer for one connection (botspace_request_framer): resumes
/// where the last read left it, and keeps the head of the request it
/// framed, so the host parses nothing again. Move-only; one thread at a time.
class RequestFramer {
public:
    explicit RequestFramer(const Service &svc) { detail::check(botspace_request_framer_new(svc.native(), &f_)); }
    RequestFramer(const RequestFramer &) = delete;
    RequestFramer &operator=(const RequestFramer &) = delete;
    RequestFramer(RequestFramer &&o) noexcept : f_(std::exchange(o.f_, nullptr)) {}
    RequestFramer &operator=(RequestFramer &&o) noexcept {
        if (this != &o) {
            botspace_request_framer_free(&f_);
            f_ = std::exchange(o.f_, nullptr);
        }
        return *this;
    }
    ~RequestFramer() { botspace_request_framer_free(&f_); }

    /// Where the first request in `buf` ends (the host only appends until
    /// Complete or Invalid, then drops the framed bytes).
    Framing frame(ByteView buf) {
        botspace_framing f{};
        detail::check(botspace_request_framer_frame(f_, buf.data(), buf.size(), &f));
        Framing out;
        out.kind = static_cast<Framing::Kind>(f.kind);
        out.length = f.length;
        out.error_response = Bytes(f.error_response);
        return out;
    }

    /// The head of the request last framed (after Complete), or of the one
    /// whose body is still missing (after Incomplete); nullopt otherwise.
    std::optional<botspace_request_head> head() const {
        botspace_request_head h{};
        bool present = false;
        detail::check(botspace_request_framer_head(f_, &h, &present));
        if (!present) return std::nullopt;
        return h;
    }

private:
    botspace_request_framer *f_ = nullptr;
};

} // namespace botspace

#endif // BOTSPACE_HPP
