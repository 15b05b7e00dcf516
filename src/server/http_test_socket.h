// Tests only: a raw TCP client of a server on the loopback, to send what a well-behaved HTTP
// client would not (trickled heads, oversized or malformed requests) and to hold connections
// open. Header only; every wait is bounded.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>

namespace tidepool::test_support {

class TestSocket {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects to 127.0.0.1:port from the address `source` (another loopback address such as
  // 127.0.0.2 makes another peer); ok() says whether it worked.
  explicit TestSocket(int port, const std::string& source = "127.0.0.1") {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
        ::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~TestSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  TestSocket(TestSocket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  TestSocket& operator=(TestSocket&&) = delete;
  TestSocket(const TestSocket&) = delete;
  TestSocket& operator=(const TestSocket&) = delete;

  [[nodiscard]] bool ok() const { return fd_ >= 0; }

  // Whether all of `bytes` was sent (false once the server closed or reset the connection).
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // Stops sending (the server reads the end of the stream).
  void shutdown_send() { ::shutdown(fd_, SHUT_WR); }

  // One response: its status (0 if none came within `limit`) and body (by Content-Length).
  struct Response {
    int status = 0;
    std::string head;
    std::string body;
  };
  Response read_response(std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    Response res;
    std::size_t end = std::string::npos;
    while ((end = in_.find("\r\n\r\n")) == std::string::npos) {
      if (!receive(deadline)) return res;
    }
    res.head = in_.substr(0, end + 4);
    std::size_t length = 0;
    if (auto at = lower(res.head).find("\r\ncontent-length:"); at != std::string::npos) {
      length = std::strtoul(res.head.c_str() + at + 17, nullptr, 10);
    }
    while (in_.size() < end + 4 + length) {
      if (!receive(deadline)) return res;
    }
    res.body = in_.substr(end + 4, length);
    in_.erase(0, end + 4 + length);
    if (res.head.starts_with("HTTP/1.")) res.status = std::atoi(res.head.c_str() + 9);
    return res;
  }

  // Whether the server closed (or reset) the connection within `limit`; bytes it sent before
  // are kept for read_response.
  bool closed_within(std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      if (!receive(deadline)) return eof_;
    }
    return eof_;
  }

 private:
  static std::string lower(std::string text) {
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
  }

  // Reads what is there (waiting until `deadline`); false at the end of the stream, an error or
  // the deadline.
  bool receive(Clock::time_point deadline) {
    if (eof_ || fd_ < 0) return false;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char buffer[65536];
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    in_.append(buffer, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool eof_ = false;
  std::string in_;
};

}  // namespace tidepool::test_support
