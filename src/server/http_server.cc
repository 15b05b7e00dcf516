#include "server/http_server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <condition_variable>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <type_traits>
#include <unordered_map>

namespace tidepool {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// Client text for the server's log: control bytes and non-ASCII as \xNN (one line, no escapes).
std::string printable(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, 512)) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b >= 0x7f || b == '\\') {
      out += fmt::format("\\x{:02x}", b);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

// The types of members of HttpResponder::State and HttpServer::Impl, classes the header declares:
// outside the anonymous namespace, so that those classes hold no member of a type with internal
// linkage (-Wsubobject-linkage where this file is compiled as part of a unity batch).
namespace http_server_internal {

// Requests waiting for a handler, and the threads that run them.
class WorkerPool {
 public:
  WorkerPool(int threads, std::size_t max_queued) : max_queued_(max_queued) {
    for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { run(); });
  }
  ~WorkerPool() { stop(); }

  bool post(std::function<void()> task) {
    std::lock_guard lock(mutex_);
    if (stopping_ || queue_.size() >= max_queued_) return false;
    queue_.push_back(std::move(task));
    wake_.notify_one();
    return true;
  }

  // Drops what is queued (outside the lock: a dropped task may answer its request) and waits for
  // the tasks running.
  void stop() {
    std::deque<std::function<void()>> dropped;
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      dropped.swap(queue_);
      wake_.notify_all();
    }
    dropped.clear();
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void run() {
    while (true) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::size_t max_queued_;
  std::mutex mutex_;  // guards queue_ and stopping_; waited on by wake_
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

class SessionBase : public std::enable_shared_from_this<SessionBase> {
 public:
  virtual ~SessionBase() = default;
  // From any thread: writes the answer to the request being handled.
  virtual void deliver(HttpResponse response) = 0;
  // From any thread: makes the answer on the session's I/O thread, then writes it.
  virtual void deliver_made(std::function<HttpResponse()> make) = 0;
  // With no I/O thread running (the end of serve()): closes the socket.
  virtual void close_now() = 0;
};

}  // namespace http_server_internal

namespace {

using http_server_internal::SessionBase;
using http_server_internal::WorkerPool;

}  // namespace

struct HttpResponder::State {
  std::weak_ptr<SessionBase> session;
  std::atomic<bool> sent{false};

  explicit State(std::weak_ptr<SessionBase> s) : session(std::move(s)) {}
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    if (!sent.exchange(true)) {
      if (auto s = session.lock()) {
        s->deliver(http_error(500, "internal error", "", "the request got no answer"));
      }
    }
  }
};

void HttpResponder::send(HttpResponse response) const {
  if (state_->sent.exchange(true)) return;
  if (auto s = state_->session.lock()) s->deliver(std::move(response));
}

void HttpResponder::send_made(std::function<HttpResponse()> make) const {
  if (state_->sent.exchange(true)) return;
  if (auto s = state_->session.lock()) s->deliver_made(std::move(make));
}

bool HttpResponder::answered() const { return state_->sent.load(); }

std::string_view HttpRequest::field(std::string_view name) const {
  for (const HttpField& f : fields) {
    if (iequal(f.name, name)) return f.value;
  }
  return {};
}

bool HttpRequest::has_field(std::string_view name) const {
  return std::ranges::any_of(fields, [name](const HttpField& f) { return iequal(f.name, name); });
}

HttpResponse http_error(int status, std::string_view error, std::string_view field,
                        std::string_view reason) {
  HttpResponse response;
  response.status = status;
  response.body = nlohmann::json{{"error", std::string(error)},
                                 {"field", std::string(field)},
                                 {"reason", std::string(reason)}}
                      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return response;
}

struct HttpServer::Impl {
  enum class Phase : std::uint8_t { kNew, kBound, kServing, kStopped };

  HttpServerOptions options;
  HttpHooks hooks;

  mutable std::mutex mutex;  // guards what follows, up to the I/O objects
  Phase phase = Phase::kNew;
  std::size_t open = 0;
  std::map<std::string, std::size_t> per_peer;
  std::unordered_map<SessionBase*, std::weak_ptr<SessionBase>> sessions;

  std::unique_ptr<WorkerPool> workers;
  std::unique_ptr<asio::io_context> io;
  std::unique_ptr<asio::ssl::context> tls;
  // Its executor is a strand: every operation on it (accept, the retry timer, close) runs there,
  // never two at once on two I/O threads.
  std::unique_ptr<tcp::acceptor> acceptor;

  Impl(HttpServerOptions o, HttpHooks h) : options(std::move(o)), hooks(std::move(h)) {
    io = std::make_unique<asio::io_context>(std::max(1, options.io_threads));
  }
  ~Impl() {
    if (workers) workers->stop();
    acceptor.reset();
    // The pending handlers (and the sessions they hold) go while the rest is still here.
    io.reset();
  }

  // A connection from `peer` may open: counts it.
  bool admit(const std::string& peer) {
    std::lock_guard lock(mutex);
    if (phase != Phase::kServing || open >= options.max_connections) return false;
    std::size_t& n = per_peer[peer];
    if (n >= options.max_connections_per_peer) return false;
    ++n;
    ++open;
    return true;
  }
  void release(SessionBase* session, const std::string& peer) {
    std::lock_guard lock(mutex);
    sessions.erase(session);
    --open;
    if (auto it = per_peer.find(peer); it != per_peer.end() && --it->second == 0) {
      per_peer.erase(it);
    }
  }

  void accept();
  template <bool kTls>
  void start_session(tcp::socket socket, std::string peer);
};

namespace {

// One connection: reads a request, answers it, and reads the next (no pipelining: the next
// request is read only once this one is answered).
template <bool kTls>
class Session final : public SessionBase {
 public:
  using Stream = std::conditional_t<kTls, beast::ssl_stream<beast::tcp_stream>, beast::tcp_stream>;

  Session(HttpServer::Impl& server, tcp::socket socket, std::string peer)
      : server_(server), stream_(make_stream(server, std::move(socket))), peer_(std::move(peer)) {}
  ~Session() override { server_.release(this, peer_); }

  void start() {
    if constexpr (kTls) {
      lowest().expires_after(server_.options.head_timeout);
      stream_.async_handshake(asio::ssl::stream_base::server, [self = shared()](error_code ec) {
        if (ec) return self->close();
        self->wait_for_request();
      });
    } else {
      wait_for_request();
    }
  }

  void deliver(HttpResponse response) override {
    asio::post(stream_.get_executor(), [self = shared(), response = std::move(response)]() mutable {
      self->waiting_ = nullptr;
      self->write(std::move(response));
    });
  }

  void deliver_made(std::function<HttpResponse()> make) override {
    asio::post(stream_.get_executor(), [self = shared(), make = std::move(make)] {
      self->waiting_ = nullptr;
      HttpResponse response;
      try {
        response = make();
      } catch (const std::exception& e) {
        spdlog::error("HTTP answer: {}", e.what());
        self->keep_alive_ = false;
        response = http_error(500, "internal error", "", "see the server log");
      }
      self->write(std::move(response));
    });
  }

  void close_now() override {
    error_code ignored;
    lowest().socket().close(ignored);
    waiting_ = nullptr;
  }

 private:
  static Stream make_stream(HttpServer::Impl& server, tcp::socket socket) {
    if constexpr (kTls) {
      return Stream(beast::tcp_stream(std::move(socket)), *server.tls);
    } else {
      return Stream(std::move(socket));
    }
  }

  std::shared_ptr<Session> shared() {
    return std::static_pointer_cast<Session>(shared_from_this());
  }
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }
  const HttpServerOptions& options() const { return server_.options; }

  // Idle until the first byte of the next request (keep-alive), then its head.
  void wait_for_request() {
    if (buffer_.size() > 0) return read_head();
    lowest().expires_after(options().idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096), [self = shared()](error_code ec, std::size_t n) {
      if (ec) return self->close();
      self->buffer_.commit(n);
      self->read_head();
    });
  }

  void read_head() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(
        options().max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
    // The body's limit is applied once the head is accepted (a 401 comes before a 413).
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    lowest().expires_after(options().head_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared()](error_code ec, std::size_t) { self->on_head(ec); });
  }

  void on_head(error_code ec) {
    if (ec) return refuse_malformed(ec);
    const auto& head = parser_->get();
    request_ = HttpRequest{};
    request_.method = std::string(head.method_string());
    request_.target = std::string(head.target());
    const auto question = request_.target.find('?');
    request_.path = request_.target.substr(0, question);
    if (question != std::string::npos) request_.query = request_.target.substr(question + 1);
    request_.peer = peer_;
    std::size_t content_lengths = 0;
    for (const auto& f : head) {
      if (request_.fields.size() >= options().max_header_count) {
        return refuse(
            http_error(431, "request header fields too large", "request",
                       fmt::format("more than {} header fields", options().max_header_count)));
      }
      request_.fields.push_back({std::string(f.name_string()), std::string(f.value())});
      if (f.name() == http::field::content_length) {
        ++content_lengths;
        if (f.value().find(',') != beast::string_view::npos) ++content_lengths;
      }
    }
    if (content_lengths > 1 ||
        (content_lengths == 1 && head.find(http::field::transfer_encoding) != head.end())) {
      return refuse(http_error(400, "bad request", "Content-Length",
                               "one Content-Length, and none with Transfer-Encoding"));
    }
    keep_alive_ = head.keep_alive();
    body_announced_ = !parser_->is_done();

    HeadVerdict verdict;
    if (!guarded("on_head", [&] { verdict = server_.hooks.on_head(request_); })) return;
    if (verdict.answer) {
      if (body_announced_) keep_alive_ = false;  // the body is not read
      return write(std::move(*verdict.answer));
    }
    handle_here_ = verdict.handler_does_not_block;
    const auto length = parser_->content_length();
    if (length && *length > options().max_body_bytes) return refuse_body_size();
    parser_->body_limit(options().max_body_bytes);
    // An HTTP/1.0 client knows no interim answers: its expectation is ignored (RFC 9110 10.1.1)
    // and the body read at once.
    if (body_announced_ && head.version() >= 11 &&
        iequal(request_.field("Expect"), "100-continue")) {
      auto interim =
          std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      lowest().expires_after(options().write_timeout);
      http::async_write(stream_, *interim,
                        [self = shared(), interim](error_code write_ec, std::size_t) {
                          if (write_ec) return self->close();
                          self->read_body();
                        });
      return;
    }
    read_body();
  }

  void read_body() {
    if (parser_->is_done()) return dispatch();
    lowest().expires_after(options().body_timeout);
    http::async_read(stream_, buffer_, *parser_, [self = shared()](error_code ec, std::size_t) {
      if (ec == http::error::body_limit) return self->refuse_body_size();
      if (ec) return self->refuse_malformed(ec);
      self->dispatch();
    });
  }

  // Hands the request to a worker (or handles it here, if its handler does not block and its
  // body is small); the connection waits for the answer.
  void dispatch() {
    request_.body = std::move(parser_->get().body());
    parser_.reset();
    lowest().expires_never();
    auto state = std::make_shared<HttpResponder::State>(weak_from_this());
    waiting_ = shared();  // the connection lives until it is answered
    HttpHooks& hooks = server_.hooks;
    const bool here = handle_here_ && request_.body.size() <= options().max_inline_body_bytes;
    auto task = [&hooks, state, request = std::move(request_)]() mutable {
      HttpResponder responder(state);
      try {
        hooks.handle(request, responder);
      } catch (const std::exception& e) {
        spdlog::error("HTTP {} {}: {}", printable(request.method), printable(request.target),
                      e.what());
        responder.send(http_error(500, "internal error", "", "see the server log"));
      }
    };
    if (here) return task();
    if (!server_.workers->post(std::move(task))) {
      state->sent = true;  // answered here, not by the dropped task
      waiting_ = nullptr;
      keep_alive_ = false;
      write(http_error(503, "unavailable", "request",
                       "the server is busy or stopping; retry in a moment"));
    }
  }

  // Runs `hook`; an exception is logged and answered 500. Whether it returned.
  template <class Hook>
  bool guarded(std::string_view what, Hook&& hook) {
    try {
      hook();
      return true;
    } catch (const std::exception& e) {
      spdlog::error("HTTP {} {} ({}): {}", printable(request_.method), printable(request_.target),
                    what, e.what());
    }
    keep_alive_ = false;
    write(http_error(500, "internal error", "", "see the server log"));
    return false;
  }

  void refuse_body_size() {
    refuse(http_error(
        413, "payload too large", "request",
        fmt::format("the request body is over the limit of {} bytes", options().max_body_bytes)));
  }

  // A head or body the parser refused, or a connection that ended or timed out.
  void refuse_malformed(error_code ec) {
    if (ec == http::error::header_limit) {
      return refuse(
          http_error(431, "request header fields too large", "request",
                     fmt::format("the request head is over {} bytes", options().max_header_bytes)));
    }
    if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      return refuse(http_error(400, "bad request", "request", ec.message()));
    }
    close();
  }

  // Answers and closes the connection (the rest of the request is not read).
  void refuse(HttpResponse response) {
    keep_alive_ = false;
    write(std::move(response));
  }

  void write(HttpResponse response) {
    auto res = std::make_shared<http::response<http::string_body>>();
    res->result(static_cast<unsigned>(response.status));
    res->version(11);
    res->set(http::field::content_type, response.content_type);
    for (HttpField& f : response.fields) res->insert(f.name, f.value);
    res->body() = std::move(response.body);
    res->keep_alive(keep_alive_);
    res->prepare_payload();
    lowest().expires_after(options().write_timeout);
    http::async_write(stream_, *res, [self = shared(), res](error_code ec, std::size_t) {
      if (ec || !self->keep_alive_) return self->close();
      self->keep_alive_ = true;
      self->wait_for_request();
    });
  }

  void close() {
    waiting_ = nullptr;
    if constexpr (kTls) {
      if (!closing_) {
        closing_ = true;
        lowest().expires_after(std::chrono::seconds(1));
        stream_.async_shutdown([self = shared()](error_code) { self->close_socket(); });
        return;
      }
    }
    close_socket();
  }

  // Stops sending, then reads what the client still sends for a moment, so that it sees the
  // answer before the connection is reset by unread bytes.
  void close_socket() {
    if (closed_) return;
    closed_ = true;
    error_code ignored;
    lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
    lowest().expires_after(std::chrono::milliseconds(500));
    drain_ = std::make_shared<std::array<char, 4096>>();
    linger();
  }

  void linger() {
    lowest().async_read_some(asio::buffer(*drain_),
                             [self = shared()](error_code ec, std::size_t n) {
                               self->drained_ += n;
                               if (ec || self->drained_ > (std::size_t{1} << 20)) {
                                 error_code ignored;
                                 self->lowest().socket().close(ignored);
                                 return;
                               }
                               self->linger();
                             });
  }

  HttpServer::Impl& server_;
  Stream stream_;
  std::string peer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpRequest request_;
  bool keep_alive_ = true;
  bool handle_here_ = false;  // on_head said the request's handler does not block
  bool body_announced_ = false;
  bool closing_ = false;
  bool closed_ = false;
  std::shared_ptr<SessionBase> waiting_;
  std::shared_ptr<std::array<char, 4096>> drain_;
  std::size_t drained_ = 0;
};

}  // namespace

template <bool kTls>
void HttpServer::Impl::start_session(tcp::socket socket, std::string peer) {
  auto session = std::make_shared<Session<kTls>>(*this, std::move(socket), peer);
  {
    std::lock_guard lock(mutex);
    sessions[session.get()] = session;
  }
  session->start();
}

void HttpServer::Impl::accept() {
  acceptor->async_accept(asio::make_strand(*io), [this](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
    if (ec) {
      // Out of descriptors, say: wait a moment rather than spin, and go on.
      spdlog::warn("HTTP accept: {}", ec.message());
      auto timer = std::make_shared<asio::steady_timer>(acceptor->get_executor(),
                                                        std::chrono::milliseconds(100));
      timer->async_wait([this, timer](error_code) {
        if (acceptor->is_open()) accept();
      });
      return;
    }
    error_code peer_ec;
    const auto remote = socket.remote_endpoint(peer_ec);
    std::string peer = peer_ec ? std::string("?") : remote.address().to_string();
    if (!admit(peer)) {
      error_code ignored;
      socket.close(ignored);
    } else {
      // Small JSON answers: without TCP_NODELAY, Nagle's algorithm and delayed ACKs hold each
      // one back for tens of milliseconds.
      socket.set_option(tcp::no_delay(true), peer_ec);
      if (tls) {
        start_session<true>(std::move(socket), std::move(peer));
      } else {
        start_session<false>(std::move(socket), std::move(peer));
      }
    }
    accept();
  });
}

HttpServer::HttpServer(HttpServerOptions options, HttpHooks hooks)
    : impl_(std::make_shared<Impl>(std::move(options), std::move(hooks))) {}

HttpServer::~HttpServer() { stop(); }

Result<int> HttpServer::bind() {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.mutex);
    if (s.phase != Impl::Phase::kNew) return fail("listen", "the server was bound or stopped");
  }
  const HttpServerOptions& o = s.options;
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return fail(o.tls_cert.empty() ? "tls_cert" : "tls_key",
                "TLS needs both a certificate and its key");
  }
  if (!o.tls_cert.empty()) {
    try {
      auto tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
      tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1);
      tls->use_certificate_chain_file(o.tls_cert);
      tls->use_private_key_file(o.tls_key, asio::ssl::context::pem);
      s.tls = std::move(tls);
    } catch (const std::exception& e) {
      return fail("tls_cert", fmt::format("cannot load the TLS certificate '{}' or key '{}': {}",
                                          o.tls_cert, o.tls_key, e.what()));
    }
  }
  error_code ec;
  tcp::resolver resolver(*s.io);
  const auto endpoints = resolver.resolve(
      o.host, std::to_string(o.port), tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) {
    return fail("listen", fmt::format("cannot listen on {}:{}: {}", o.host, o.port,
                                      ec ? ec.message() : "no such address"));
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  auto acceptor = std::make_unique<tcp::acceptor>(asio::make_strand(*s.io));
  // SO_REUSEADDR only (a restart may bind while old connections linger in TIME_WAIT); never
  // SO_REUSEPORT, so a second server on the same port fails here instead of sharing it.
  acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(o.backlog, ec);
  if (!ec) {
    const int port = acceptor->local_endpoint(ec).port();
    if (!ec) {
      std::lock_guard lock(s.mutex);
      if (s.phase != Impl::Phase::kNew) return fail("listen", "the server was stopped");
      s.acceptor = std::move(acceptor);
      s.workers = std::make_unique<WorkerPool>(o.worker_threads, o.max_queued);
      s.phase = Impl::Phase::kBound;
      return port;
    }
  }
  return fail(
      "listen",
      fmt::format("cannot listen on {}:{}: {}{}", o.host, o.port, ec.message(),
                  ec == asio::error::address_in_use ? " (another server listens there?)" : ""));
}

void HttpServer::serve() {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.mutex);
    if (s.phase != Impl::Phase::kBound) return;
    s.phase = Impl::Phase::kServing;
  }
  asio::post(s.acceptor->get_executor(), [&s] { s.accept(); });
  auto run = [&s] {
    while (true) {
      try {
        s.io->run();
        return;
      } catch (const std::exception& e) {
        // A handler should not throw; if one does, the loop goes on.
        spdlog::error("HTTP I/O: {}", e.what());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < s.options.io_threads; ++i) threads.emplace_back(run);
  run();
  for (std::thread& t : threads) t.join();
  // No I/O thread runs now: close what is open and let the aborted handlers finish.
  std::vector<std::shared_ptr<SessionBase>> open;
  {
    std::lock_guard lock(s.mutex);
    for (auto& [raw, weak] : s.sessions) {
      if (auto session = weak.lock()) open.push_back(std::move(session));
    }
  }
  for (auto& session : open) session->close_now();
  open.clear();
  s.io->restart();
  s.io->poll();
}

void HttpServer::stop() {
  Impl& s = *impl_;
  Impl::Phase before{};
  {
    std::lock_guard lock(s.mutex);
    before = s.phase;
    s.phase = Impl::Phase::kStopped;
  }
  if (before == Impl::Phase::kStopped) return;
  // Stopping the io_context makes serve() return whether it runs already or starts later.
  asio::post(*s.io, [&s] {
    if (!s.acceptor) {
      s.io->stop();
      return;
    }
    // Closed on its strand, after any accept under way there.
    asio::post(s.acceptor->get_executor(), [&s] {
      error_code ignored;
      s.acceptor->close(ignored);
      s.io->stop();
    });
  });
  if (before != Impl::Phase::kServing) s.io->stop();
  if (s.workers) s.workers->stop();
}

void HttpServer::run_after(std::chrono::milliseconds delay, std::function<void()> task) {
  auto timer = std::make_shared<asio::steady_timer>(*impl_->io, delay);
  timer->async_wait([timer, task = std::move(task)](error_code ec) {
    if (ec) return;
    try {
      task();
    } catch (const std::exception& e) {
      spdlog::error("HTTP timer: {}", e.what());
    }
  });
}

bool HttpServer::run_on_worker(std::function<void()> task) {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.mutex);
    if (s.phase == Impl::Phase::kStopped || !s.workers) return false;
  }
  return s.workers->post(std::move(task));
}

std::size_t HttpServer::connections() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->open;
}

}  // namespace tidepool
