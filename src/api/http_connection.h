// The CLI's HTTP/1.1 client: one kept-alive connection to a server over TCP, or TLS through
// OpenSSL, with timeouts, reconnecting when the server closed an idle connection.
//
// The CLI runs as one short process per command (as sbatch does), so what it costs to start counts
// as much as what its requests cost: the Debian cpp-httplib library initialises OpenSSL when it is
// loaded and brings a dozen shared libraries with it, which made one `tidepool submit` spend most
// of its time in the dynamic loader. This client touches OpenSSL only for an https:// server.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/http_response.h"
#include "core/error.h"

namespace tidepool {

// Where the server is: "http[s]://host[:port][/]".
struct HttpEndpoint {
  std::string host;  // a name or an address (IPv6 without brackets)
  int port = 80;
  bool tls = false;
};

// The endpoint of `url`, or an Error saying what is wrong with it.
Result<HttpEndpoint> parse_http_url(std::string_view url);

struct HttpClientOptions {
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds io_timeout{30000};
  std::string ca_cert;  // PEM file of the CAs to trust for https (default: the system's)
};

struct HttpRequest {
  std::string method;  // GET, POST, PUT, DELETE
  std::string target;  // path and query, e.g. "/v1/jobs?state=pending"
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // sent with Content-Length when the method is POST or PUT, or not empty
};

// Why a request got no reply; the reply of a server that answered, whatever its status, is a
// value.
enum class HttpFailure {
  kConnect,       // refused, unreachable, or the name does not resolve
  kTimeout,       // connecting or waiting for the reply took longer than allowed
  kNoReply,       // the connection broke or closed before a complete reply
  kBadReply,      // the reply is not valid HTTP
  kTlsHandshake,  // the TLS handshake failed
  kUntrusted,     // the server's certificate is not trusted or does not match its name
  kCaCerts,       // the CA certificates cannot be loaded
  kBadRequest,    // the request cannot be sent as given (a line break in a header value)
};

struct HttpError {
  HttpFailure failure = HttpFailure::kConnect;
  std::string detail;  // the system's or OpenSSL's words
  // Whether the request may have reached the server: false when the failure came before a byte
  // of it was sent (resolving, connecting, the TLS handshake), so that sending it to another
  // server cannot do anything twice.
  bool sent = false;
};

class HttpConnection {
 public:
  HttpConnection(HttpEndpoint endpoint, HttpClientOptions options);
  ~HttpConnection();
  HttpConnection(HttpConnection&&) noexcept;
  HttpConnection& operator=(HttpConnection&&) noexcept;

  // Sends `request` and reads its reply, connecting first when needed. A request on a kept-alive
  // connection that the server closed in between is sent once more on a new one.
  std::expected<HttpResponse, HttpError> send(const HttpRequest& request);

 private:
  class Stream;
  class TlsContext;
  std::expected<HttpResponse, HttpError> exchange(const std::string& wire, bool* sent_nothing);

  HttpEndpoint endpoint_;
  HttpClientOptions options_;
  std::unique_ptr<TlsContext> tls_;  // for https, made at the first connection
  std::unique_ptr<Stream> stream_;
};

}  // namespace tidepool
