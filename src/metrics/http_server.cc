#include "metrics/http_server.h"

#include <httplib.h>

#include <sys/socket.h>

#include <chrono>
#include <thread>

namespace slip::metrics {
namespace {

class HttpServerImpl final : public HttpServer {
 public:
  ~HttpServerImpl() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  Status Start(const std::string& bind, uint16_t port, std::map<std::string, Handler> routes) {
    for (auto& [path, handler] : routes) {
      server_.Get(path, [h = std::move(handler)](const httplib::Request&, httplib::Response& res) {
        Page p = h();
        res.status = p.status;
        res.set_header("Cache-Control", "no-store");
        res.set_content(std::move(p.body), p.content_type.c_str());
      });
    }
    // A few threads: scrapes and the web view's polls are light.
    server_.new_task_queue = [] { return new httplib::ThreadPool(8); };
    // SO_REUSEADDR only: the library's default adds SO_REUSEPORT, which
    // would let a second process bind the same port and split its traffic.
    server_.set_socket_options([](int fd) {
      const int on = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    });
    if (port == 0) {
      const int p = server_.bind_to_any_port(bind);
      if (p <= 0) return Status::IoError("HTTP: cannot listen on " + bind);
      port_ = static_cast<uint16_t>(p);
    } else {
      if (!server_.bind_to_port(bind, port)) {
        return Status::IoError("HTTP port " + bind + ":" + std::to_string(port) + " is not free (or not an address here)");
      }
      port_ = port;
    }
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() before the loop runs would be lost (and the destructor's join
    // hang): serve before returning.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return Status::Ok();
  }

  uint16_t port() const override { return port_; }

 private:
  httplib::Server server_;
  std::thread thread_;
  uint16_t port_ = 0;
};

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& bind, uint16_t port,
                                                      std::map<std::string, Handler> routes) {
  auto s = std::make_unique<HttpServerImpl>();
  SLIP_RETURN_IF_ERROR(s->Start(bind, port, std::move(routes)));
  return std::unique_ptr<HttpServer>(std::move(s));
}

}  // namespace slip::metrics
