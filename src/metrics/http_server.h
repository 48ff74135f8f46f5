// A small HTTP server for a node's operator endpoints (/metrics, the web
// view and its JSON): GET routes, each answered by a function, on threads
// of its own. cpp-httplib underneath, kept out of this header.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/status.h"

namespace slip::metrics {

struct Page {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  using Handler = std::function<Page()>;
  // Listens on bind:port (0: a free port) and serves `routes` (exact paths;
  // anything else is 404) until destroyed. Handlers run on the server's
  // threads, several at once.
  static Result<std::unique_ptr<HttpServer>> Start(const std::string& bind, uint16_t port,
                                                   std::map<std::string, Handler> routes);
  virtual ~HttpServer() = default;
  virtual uint16_t port() const = 0;
};

}  // namespace slip::metrics
