// A tiny HTTP/1.1 server on 127.0.0.1 for tests: one connection at a time,
// one request per connection, answered by a handler. Not for production.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <thread>

namespace sb::test {

struct HttpRequest {
  std::string method, path;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

struct HttpServerOptions {
  const char* address = "127.0.0.1";  // any 127.x.y.z is a loopback address on Linux
  // A TLS ClientHello: left unanswered (the client's handshake times out), or
  // answered "400 Bad Request" at once, as a real plain-HTTP server does.
  bool answer_tls_with_400 = false;
};

// The handler returns the whole raw response ("HTTP/1.1 200 OK\r\n...") or ""
// to drop the connection without answering.
class HttpServer {
 public:
  explicit HttpServer(std::function<std::string(const HttpRequest&)> handler, HttpServerOptions options = {})
      : handler_(std::move(handler)), options_(options) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, options_.address, &a.sin_addr);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~HttpServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string url(const std::string& path = "/") const {
    return "http://" + std::string(options_.address) + ":" + std::to_string(port_) + path;
  }
  int port() const { return port_; }
  int tls_hellos() const { return tls_hellos_; }
  int requests() const { return count_; }

 private:
  static std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(tolower(c));
    return s;
  }
  void serve() {
    while (!stop_) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      std::string in;
      char buf[65536];
      size_t head_end;
      while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
        ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        bool first = in.empty();
        in.append(buf, static_cast<size_t>(n));
        if (first && in[0] == '\x16') ++tls_hellos_;  // a TLS handshake record
        if (in[0] == '\x16' && options_.answer_tls_with_400) {
          const char bad[] = "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n";
          (void)!::write(c, bad, sizeof bad - 1);
          break;
        }
      }
      if (head_end == std::string::npos) {
        ::close(c);
        continue;
      }
      HttpRequest r;
      size_t line_end = in.find("\r\n");
      std::string first = in.substr(0, line_end);
      r.method = first.substr(0, first.find(' '));
      r.path = first.substr(first.find(' ') + 1, first.rfind(' ') - first.find(' ') - 1);
      size_t pos = line_end + 2;
      while (pos < head_end) {
        size_t e = in.find("\r\n", pos);
        std::string h = in.substr(pos, e - pos);
        auto colon = h.find(':');
        if (colon != std::string::npos)
          r.headers[lower(h.substr(0, colon))] = h.substr(h.find_first_not_of(' ', colon + 1));
        pos = e + 2;
      }
      size_t want = r.headers.count("content-length") ? std::stoul(r.headers["content-length"]) : 0;
      r.body = in.substr(head_end + 4);
      while (r.body.size() < want) {
        ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        r.body.append(buf, static_cast<size_t>(n));
      }
      ++count_;
      std::string out = handler_(r);
      for (size_t off = 0; off < out.size();) {
        ssize_t n = ::write(c, out.data() + off, out.size() - off);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      ::close(c);
    }
  }
  std::function<std::string(const HttpRequest&)> handler_;
  HttpServerOptions options_;
  std::atomic<int> tls_hellos_{0};
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> count_{0};
  std::thread thread_;
};

inline std::string http_response(int status, const std::string& body,
                                 const std::string& extra_headers = "") {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n" + extra_headers + "\r\n" + body;
}

}  // namespace sb::test
