// A small HTTP/1.1 server (Boost.Beast on Boost.Asio, optional TLS) that clients cannot crash or
// stall. It knows nothing of Tidepool's routes: a service answers through two hooks.
//
// A request goes through these steps:
//   1. accept: over `max_connections` in all, or `max_connections_per_peer` from one address, the
//      connection is closed at once (no thread, no read);
//   2. the head: the connection may stay idle `idle_timeout` before a request's first byte; the
//      whole head (TLS handshake included) must then arrive within `head_timeout` — a deadline,
//      not restarted per byte. Over `max_header_bytes`, or more than `max_header_count` fields:
//      431. A malformed head, several Content-Length fields, or Content-Length with
//      Transfer-Encoding: 400. Every error answer has a JSON body {"error", "field", "reason"}
//      and closes the connection;
//   3. `on_head` runs on an I/O thread with the head alone (body empty). It either answers at
//      once (health probes, 401, 404, 429: the body is never read, the connection is closed
//      after the answer if a body was announced) or lets the request go on;
//   4. the body, within `body_timeout`, whatever its framing (Content-Length or chunked): over
//      `max_body_bytes`, 413 (never more than that is buffered). `Expect: 100-continue` is
//      answered before the body is read;
//   5. `handle` runs on the worker pool (`worker_threads` threads; over `max_queued` requests
//      waiting: 503), where it may block; or, when on_head said the handler does not block and
//      the body is at most `max_inline_body_bytes`, at once on the I/O thread (no hand-over). It
//      answers through the HttpResponder it is given, at once or later from any thread (a long poll
//      keeps the responder and returns); a responder dropped without an answer answers 500. An
//      exception out of a hook is logged (method, target, what()) and answered 500: a request never
//      ends the server.
//   6. the answer is written within `write_timeout`; keep-alive as the client asks.
//
// Thread safety: bind(), serve() and stop() may be called from any threads; stop() may come
// before, during or after serve() (before: serve() returns at once). The hooks run on several
// threads at once.
#pragma once

#include <any>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace tidepool {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;          // 0: any free port
  std::string tls_cert;  // both set: HTTPS (PEM files)
  std::string tls_key;
  int io_threads = 2;                               // socket I/O, timers, on_head
  int worker_threads = 16;                          // handle (may block)
  std::size_t max_queued = 4096;                    // requests waiting for a worker; past it 503
  std::chrono::milliseconds idle_timeout{5'000};    // keep-alive: before a request's first byte
  std::chrono::milliseconds head_timeout{10'000};   // first byte to the end of the head
  std::chrono::milliseconds body_timeout{30'000};   // end of the head to the end of the body
  std::chrono::milliseconds write_timeout{30'000};  // the answer
  std::size_t max_header_bytes = 16 * 1024;         // request line and fields; past it 431
  std::size_t max_header_count = 100;               // fields; past it 431
  std::size_t max_body_bytes = 1 << 20;             // past it 413
  std::size_t max_inline_body_bytes = 64 * 1024;    // larger: handled on a worker in any case
  std::size_t max_connections = 4096;               // open at once, in all
  std::size_t max_connections_per_peer = 256;       // open at once from one IP address
  int backlog = 4096;  // listen(2) backlog (the kernel caps it at net.core.somaxconn)
};

// A field of a request head, as received.
struct HttpField {
  std::string name;
  std::string value;
};

struct HttpRequest {
  std::string method;  // as sent, e.g. "GET"
  std::string target;  // as sent: path and query, still %-encoded
  std::string path;    // the target before '?', still %-encoded
  std::string query;   // the target after '?' (empty if none), still %-encoded
  std::vector<HttpField> fields;
  std::string body;  // empty in on_head
  std::string peer;  // the client's IP address, as text
  // Whatever on_head wants to hand to handle (e.g. the route and the caller).
  std::any context;

  // The value of the first field named `name` (case-insensitive); empty if none.
  [[nodiscard]] std::string_view field(std::string_view name) const;
  [[nodiscard]] bool has_field(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<HttpField> fields;  // extra fields (Content-Type and Content-Length are set)
  std::string body;
};

// A JSON error body {"error": error, "field": field, "reason": reason}, valid UTF-8 whatever the
// text (invalid sequences are replaced by U+FFFD).
HttpResponse http_error(int status, std::string_view error, std::string_view field,
                        std::string_view reason);

// Answers one request, once, from any thread. Copies share the answer: the first send() counts,
// later ones are ignored. When the last copy goes without a send(), the request gets 500. Once
// the connection or the server is gone, send() does nothing.
class HttpResponder {
 public:
  struct State;
  explicit HttpResponder(std::shared_ptr<State> state) : state_(std::move(state)) {}
  void send(HttpResponse response) const;
  // As send(make()), with make() called on the connection's I/O thread (not at all once the
  // connection is gone): a caller that answers many requests at once leaves their serializing to
  // the I/O threads.
  void send_made(std::function<HttpResponse()> make) const;
  // Whether an answer was sent already.
  [[nodiscard]] bool answered() const;

 private:
  std::shared_ptr<State> state_;
};

// What on_head decides: an answer now (the body is not read), or go on to handle, on a worker
// or, for a handler that never blocks (it answers later through its responder), on the I/O
// thread when the body is small.
struct HeadVerdict {
  std::optional<HttpResponse> answer;
  bool handler_does_not_block = false;
  static HeadVerdict respond(HttpResponse response) { return {std::move(response), false}; }
  static HeadVerdict proceed() { return {}; }
  static HeadVerdict proceed_without_blocking() { return {std::nullopt, true}; }
};

struct HttpHooks {
  // On an I/O thread: must not block.
  std::function<HeadVerdict(HttpRequest&)> on_head;
  // On a worker thread (or the I/O thread: see HeadVerdict), with the whole request.
  std::function<void(HttpRequest&, HttpResponder)> handle;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHooks hooks);
  ~HttpServer();  // stops and joins
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Loads the TLS files and binds the listening socket; the port (useful with port 0). Fails
  // naming the field ("listen", "tls_cert") when the address is in use or not this machine's,
  // or the certificate cannot be loaded.
  Result<int> bind();
  // Serves until stop(); returns at once if stop() came first or bind() was not called.
  void serve();
  // Stops accepting, closes every connection, drops the requests still queued, and makes
  // serve() return (within a few seconds: a handler already running is waited for).
  void stop();

  // Runs `task` on an I/O thread after `delay`, unless the server stops first (then never).
  void run_after(std::chrono::milliseconds delay, std::function<void()> task);
  // Runs `task` on the worker pool; false (and not run) when the server is stopping or the
  // queue is full.
  bool run_on_worker(std::function<void()> task);

  // Connections open now (for tests and metrics).
  [[nodiscard]] std::size_t connections() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace tidepool
