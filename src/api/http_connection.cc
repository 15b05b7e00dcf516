#include "api/http_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace tidepool {
namespace {

std::unexpected<HttpError> failure(HttpFailure kind, std::string detail) {
  return std::unexpected(HttpError{kind, std::move(detail)});
}

std::string system_error(int error) { return std::strerror(error); }

// The last OpenSSL error in words, or `fallback` when OpenSSL recorded none.
std::string openssl_error(std::string fallback) {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return fallback;
  std::array<char, 256> text{};
  ERR_error_string_n(code, text.data(), text.size());
  return text.data();
}

timeval to_timeval(std::chrono::milliseconds ms) {
  return timeval{.tv_sec = static_cast<time_t>(ms.count() / 1000),
                 .tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

bool is_timeout(int error) { return error == EAGAIN || error == EWOULDBLOCK || error == ETIMEDOUT; }

// A TCP connection to one of the addresses `host` resolves to, within `timeout`, with the read and
// write timeouts `io_timeout` and Nagle's delay off (a request is one write; without it the reply
// can wait for a delayed ACK).
std::expected<int, HttpError> connect_tcp(const HttpEndpoint& endpoint,
                                          std::chrono::milliseconds timeout,
                                          std::chrono::milliseconds io_timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  const std::string port = std::to_string(endpoint.port);
  if (const int rc = getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &addresses);
      rc != 0) {
    return failure(HttpFailure::kConnect,
                   fmt::format("cannot resolve {}: {}", endpoint.host, gai_strerror(rc)));
  }
  HttpError last{HttpFailure::kConnect, "no address"};
  int connected = -1;
  for (const addrinfo* address = addresses; address != nullptr && connected < 0;
       address = address->ai_next) {
    const int fd =
        socket(address->ai_family, address->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      last = {HttpFailure::kConnect, system_error(errno)};
      continue;
    }
    int error = 0;
    if (connect(fd, address->ai_addr, address->ai_addrlen) != 0) {
      error = errno;
      if (error == EINPROGRESS) {
        pollfd waiting{.fd = fd, .events = POLLOUT, .revents = 0};
        const int ready = poll(&waiting, 1, static_cast<int>(timeout.count()));
        socklen_t size = sizeof(error);
        if (ready == 0) {
          error = ETIMEDOUT;
        } else if (ready < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) {
          error = errno;
        }
      }
    }
    if (error != 0) {
      last = {error == ETIMEDOUT ? HttpFailure::kTimeout : HttpFailure::kConnect,
              system_error(error)};
      close(fd);
      continue;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    const timeval io = to_timeval(io_timeout);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &io, sizeof(io));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &io, sizeof(io));
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    connected = fd;
  }
  freeaddrinfo(addresses);
  if (connected < 0) return std::unexpected(last);
  return connected;
}

bool is_ip_address(const std::string& host) {
  std::array<unsigned char, sizeof(in6_addr)> buffer{};
  return inet_pton(AF_INET, host.c_str(), buffer.data()) == 1 ||
         inet_pton(AF_INET6, host.c_str(), buffer.data()) == 1;
}

}  // namespace

// One open connection: a socket, and OpenSSL's session on it for https.
class HttpConnection::Stream {
 public:
  // A connection to `endpoint`; TLS through `tls` when it is not null.
  static std::expected<std::unique_ptr<Stream>, HttpError> open(const HttpEndpoint& endpoint,
                                                                const HttpClientOptions& options,
                                                                SSL_CTX* tls) {
    auto fd = connect_tcp(endpoint, options.connect_timeout, options.io_timeout);
    if (!fd) return std::unexpected(fd.error());
    auto stream = std::unique_ptr<Stream>(new Stream(*fd));
    if (tls != nullptr) {
      if (auto secured = stream->start_tls(endpoint, tls); !secured) {
        return std::unexpected(secured.error());
      }
    }
    return stream;
  }

  ~Stream() {
    if (ssl_ != nullptr) {
      SSL_shutdown(ssl_);
      SSL_free(ssl_);
    }
    close(fd_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Whether the connection can carry another request: nothing arrived on it since the last reply
  // (a server closing an idle connection makes it readable).
  [[nodiscard]] bool reusable() const {
    pollfd idle{.fd = fd_, .events = POLLIN, .revents = 0};
    return poll(&idle, 1, 0) == 0;
  }

  std::expected<void, HttpError> write_all(std::string_view data) {
    while (!data.empty()) {
      ssize_t written = 0;
      if (ssl_ != nullptr) {
        ERR_clear_error();
        written = SSL_write(ssl_, data.data(), static_cast<int>(data.size()));
        if (written <= 0) return ssl_failure(static_cast<int>(written), "the TLS write failed");
      } else {
        written = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
        if (written < 0) {
          if (errno == EINTR) continue;
          return failure(is_timeout(errno) ? HttpFailure::kTimeout : HttpFailure::kNoReply,
                         system_error(errno));
        }
      }
      data.remove_prefix(static_cast<std::size_t>(written));
    }
    return {};
  }

  // Up to `size` bytes into `buffer`; 0 when the server closed the connection.
  std::expected<std::size_t, HttpError> read_some(char* buffer, std::size_t size) {
    for (;;) {
      if (ssl_ != nullptr) {
        ERR_clear_error();
        const int got = SSL_read(ssl_, buffer, static_cast<int>(size));
        if (got > 0) return static_cast<std::size_t>(got);
        if (SSL_get_error(ssl_, got) == SSL_ERROR_ZERO_RETURN) return 0;
        return ssl_failure(got, "the TLS read failed");
      }
      const ssize_t got = ::recv(fd_, buffer, size, 0);
      if (got >= 0) return static_cast<std::size_t>(got);
      if (errno == EINTR) continue;
      return failure(is_timeout(errno) ? HttpFailure::kTimeout : HttpFailure::kNoReply,
                     system_error(errno));
    }
  }

 private:
  explicit Stream(int fd) : fd_(fd) {}

  std::expected<void, HttpError> start_tls(const HttpEndpoint& endpoint, SSL_CTX* tls) {
    ssl_ = SSL_new(tls);
    if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) {
      return failure(HttpFailure::kTlsHandshake, openssl_error("cannot set up TLS"));
    }
    if (is_ip_address(endpoint.host)) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), endpoint.host.c_str());
    } else {
      SSL_set_tlsext_host_name(ssl_, endpoint.host.c_str());
      SSL_set1_host(ssl_, endpoint.host.c_str());
    }
    ERR_clear_error();
    const int rc = SSL_connect(ssl_);
    if (rc == 1) return {};
    if (const long verdict = SSL_get_verify_result(ssl_); verdict != X509_V_OK) {
      return failure(HttpFailure::kUntrusted, X509_verify_cert_error_string(verdict));
    }
    auto failed = ssl_failure(rc, "the handshake failed");
    if (failed.error().failure != HttpFailure::kTimeout) {
      failed.error().failure = HttpFailure::kTlsHandshake;
    }
    return failed;
  }

  std::unexpected<HttpError> ssl_failure(int rc, const std::string& what) {
    const int kind = SSL_get_error(ssl_, rc);
    if (kind == SSL_ERROR_SYSCALL && is_timeout(errno)) {
      return failure(HttpFailure::kTimeout, system_error(errno));
    }
    if (kind == SSL_ERROR_SYSCALL && errno != 0) {
      return failure(HttpFailure::kNoReply, fmt::format("{}: {}", what, system_error(errno)));
    }
    return failure(HttpFailure::kNoReply, openssl_error(what));
  }

  int fd_;
  SSL* ssl_ = nullptr;
};

// What every TLS connection to the server shares: peer verification against the CAs to trust,
// loaded once rather than at every reconnection.
class HttpConnection::TlsContext {
 public:
  static std::expected<std::unique_ptr<TlsContext>, HttpError> create(const std::string& ca_cert) {
    SSL_CTX* context = SSL_CTX_new(TLS_client_method());
    if (context == nullptr) {
      return failure(HttpFailure::kTlsHandshake, openssl_error("cannot set up TLS"));
    }
    auto owned = std::unique_ptr<TlsContext>(new TlsContext(context));
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
    // A server that closes without a TLS close_notify has still sent what it sent.
    SSL_CTX_set_options(context, SSL_OP_IGNORE_UNEXPECTED_EOF);
    if (!ca_cert.empty()) {
      if (SSL_CTX_load_verify_locations(context, ca_cert.c_str(), nullptr) != 1) {
        return failure(HttpFailure::kCaCerts,
                       fmt::format("{}: {}", ca_cert, openssl_error("unreadable")));
      }
    } else if (SSL_CTX_set_default_verify_paths(context) != 1) {
      return failure(HttpFailure::kCaCerts, openssl_error("the system's CA certificates"));
    }
    return owned;
  }

  ~TlsContext() { SSL_CTX_free(context_); }
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  [[nodiscard]] SSL_CTX* get() const { return context_; }

 private:
  explicit TlsContext(SSL_CTX* context) : context_(context) {}

  SSL_CTX* context_;
};

Result<HttpEndpoint> parse_http_url(std::string_view url) {
  HttpEndpoint endpoint;
  std::string_view rest = url;
  if (rest.starts_with("https://")) {
    endpoint.tls = true;
    endpoint.port = 443;
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else if (rest.find("://") != std::string_view::npos) {
    return fail("server", fmt::format("\"{}\" is not an http:// or https:// URL", url));
  }
  rest = rest.substr(0, rest.find('/'));
  std::string_view host = rest;
  const auto bracket = rest.rfind(']');
  const auto colon = rest.rfind(':');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    host = rest.substr(0, colon);
    const std::string_view digits = rest.substr(colon + 1);
    const auto [end, ec] =
        std::from_chars(digits.data(), digits.data() + digits.size(), endpoint.port);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
        endpoint.port < 1 || endpoint.port > 65535) {
      return fail("server", fmt::format("the port of \"{}\" is not a number in 1..65535", url));
    }
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) return fail("server", fmt::format("\"{}\" names no host", url));
  endpoint.host = host;
  return endpoint;
}

HttpConnection::HttpConnection(HttpEndpoint endpoint, HttpClientOptions options)
    : endpoint_(std::move(endpoint)), options_(std::move(options)) {}
HttpConnection::~HttpConnection() = default;
HttpConnection::HttpConnection(HttpConnection&&) noexcept = default;
HttpConnection& HttpConnection::operator=(HttpConnection&&) noexcept = default;

std::expected<HttpResponse, HttpError> HttpConnection::send(const HttpRequest& request) {
  const bool default_port = endpoint_.port == (endpoint_.tls ? 443 : 80);
  const bool ipv6 = endpoint_.host.find(':') != std::string::npos;
  std::string wire =
      fmt::format("{} {} HTTP/1.1\r\nHost: {}{}{}", request.method, request.target,
                  ipv6 ? "[" + endpoint_.host + "]" : endpoint_.host, default_port ? "" : ":",
                  default_port ? "" : std::to_string(endpoint_.port));
  wire += "\r\nAccept: application/json\r\nUser-Agent: tidepool\r\n";
  for (const auto& [name, value] : request.headers) {
    if (name.find_first_of("\r\n:") != std::string::npos ||
        value.find_first_of("\r\n") != std::string::npos) {
      return failure(HttpFailure::kBadRequest,
                     fmt::format("the {} header holds a line break or colon", name));
    }
    wire += fmt::format("{}: {}\r\n", name, value);
  }
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT") {
    wire += fmt::format("Content-Length: {}\r\n", request.body.size());
  }
  wire += "\r\n";
  wire += request.body;

  bool reused = stream_ != nullptr;
  if (reused && !stream_->reusable()) {
    stream_.reset();
    reused = false;
  }
  bool sent_nothing = false;
  auto reply = exchange(wire, &sent_nothing);
  if (!reply && reused && sent_nothing) {
    // The server closed the idle connection as the request went out: nothing of it was read.
    reply = exchange(wire, &sent_nothing);
  }
  return reply;
}

std::expected<HttpResponse, HttpError> HttpConnection::exchange(const std::string& wire,
                                                                bool* sent_nothing) {
  *sent_nothing = false;
  if (endpoint_.tls && tls_ == nullptr) {
    auto created = TlsContext::create(options_.ca_cert);
    if (!created) return std::unexpected(created.error());
    tls_ = std::move(*created);
  }
  if (stream_ == nullptr) {
    auto opened = Stream::open(endpoint_, options_, tls_ == nullptr ? nullptr : tls_->get());
    if (!opened) return std::unexpected(opened.error());
    stream_ = std::move(*opened);
  }
  auto fail_and_close = [&](HttpError error) -> std::expected<HttpResponse, HttpError> {
    stream_.reset();
    error.sent = true;
    return std::unexpected(std::move(error));
  };
  if (auto written = stream_->write_all(wire); !written) {
    *sent_nothing = written.error().failure == HttpFailure::kNoReply;
    return fail_and_close(written.error());
  }
  std::string received;
  std::array<char, 16 * 1024> buffer{};
  for (;;) {
    auto got = stream_->read_some(buffer.data(), buffer.size());
    if (!got) {
      *sent_nothing = received.empty() && got.error().failure == HttpFailure::kNoReply;
      return fail_and_close(got.error());
    }
    received.append(buffer.data(), *got);
    auto parsed = parse_http_response(received, *got == 0);
    if (!parsed) {
      *sent_nothing = received.empty();
      const bool closed = *got == 0;
      return fail_and_close(HttpError{closed ? HttpFailure::kNoReply : HttpFailure::kBadReply,
                                      parsed.error().reason});
    }
    if (*parsed) {
      if (!(*parsed)->response.keep_alive || (*parsed)->consumed != received.size()) {
        stream_.reset();
      }
      return std::move((*parsed)->response);
    }
  }
}

}  // namespace tidepool
