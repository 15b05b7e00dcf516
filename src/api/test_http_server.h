// A loopback HTTP server for the client tests (header only; not part of the api library): it
// serves each request it reads with the reply a script gives, on a thread of its own.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace tidepool::test_support {

// The whole HTTP/1.1 reply with `status` and `body` (a JSON body when it starts with '{').
inline std::string http_reply(int status, const std::string& body) {
  const std::string type = body.starts_with('{') ? "application/json" : "text/plain";
  return "HTTP/1.1 " + std::to_string(status) + " Status\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A server on 127.0.0.1 that answers the Nth request it reads (N from 1, over all connections)
// with script(request head and body as read, N), or closes the connection without a reply when
// the script gives nullopt. It closes each connection after `per_connection` requests.
class ScriptedServer {
 public:
  using Script = std::function<std::optional<std::string>(const std::string& request, int n)>;

  // Answers every request with 200 and the body "reply N".
  static Script numbered_replies() {
    return [](const std::string&, int n) { return http_reply(200, "reply " + std::to_string(n)); };
  }

  explicit ScriptedServer(int per_connection, Script script = numbered_replies())
      : per_connection_(per_connection), script_(std::move(script)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(address);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&address), size), 0);
    EXPECT_EQ(::listen(listener_, 8), 0);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &size);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    thread_.join();
  }
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] int connections() const { return connections_; }
  // The requests read so far, heads and bodies, in order.
  [[nodiscard]] std::vector<std::string> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  void serve() {
    for (;;) {
      const int peer = ::accept(listener_, nullptr, nullptr);
      if (peer < 0) return;
      ++connections_;
      for (int served = 0; served < per_connection_; ++served) {
        auto request = read_request(peer);
        if (!request) break;
        int n = 0;
        {
          std::lock_guard lock(mutex_);
          requests_.push_back(*request);
          n = static_cast<int>(requests_.size());
        }
        const std::optional<std::string> reply = script_(*request, n);
        if (!reply) break;
        ::send(peer, reply->data(), reply->size(), MSG_NOSIGNAL);
      }
      ::close(peer);
    }
  }

  // One request's head and its Content-Length body; nullopt when the peer closed first.
  static std::optional<std::string> read_request(int peer) {
    std::string request;
    char buffer[4096];
    std::size_t wanted = std::string::npos;
    while (wanted == std::string::npos || request.size() < wanted) {
      const ssize_t got = ::recv(peer, buffer, sizeof(buffer), 0);
      if (got <= 0) return std::nullopt;
      request.append(buffer, static_cast<std::size_t>(got));
      const auto head_end = request.find("\r\n\r\n");
      if (wanted == std::string::npos && head_end != std::string::npos) {
        std::size_t length = 0;
        const auto field = request.find("Content-Length: ");
        if (field != std::string::npos && field < head_end) {
          length = std::stoul(request.substr(field + 16));
        }
        wanted = head_end + 4 + length;
      }
    }
    return request;
  }

  int per_connection_;
  Script script_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<int> connections_{0};
  mutable std::mutex mutex_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

// A loopback port that nothing listens on (a server's, closed again): connecting is refused.
inline int refusing_port() {
  ScriptedServer gone(1);
  return gone.port();
}

}  // namespace tidepool::test_support
