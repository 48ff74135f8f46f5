#include "cli/front_door.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/web_view.h"
#include "cluster/config_access.h"
#include "common/log.h"
#include "metrics/http_server.h"
#include "metrics/metrics.h"
#include "resp/server.h"
#include "rpc/rpc_peers.h"
#include "slip/client.h"

namespace slip::cli {
namespace {

using nlohmann::json;

// A password nobody knows: what AUTH compares against when the configured
// one cannot be read (refusing everyone rather than admitting everyone).
std::string Unguessable() {
  char b[32];
  auth::RandomBytes(b, sizeof(b));
  return rpc::RpcPeers::HexEncode(std::string_view(b, sizeof(b)));
}

// The credentials, re-read at most once a second (AUTH and accepts come on
// the front door's I/O thread: no file reads per connection). Whether AUTH
// is required is decided once, at the start: a secret or password file that
// disappears later must not open the door to everyone.
class CredentialCache {
 public:
  explicit CredentialCache(ClusterCommandOptions o) : o_(std::move(o)), current_(FrontDoorCredentials(o_)) {
    required_ = !current_.empty();
    read_ = std::chrono::steady_clock::now();
  }
  std::vector<resp::ServerOptions::Credential> Get() {
    std::lock_guard<std::mutex> l(mu_);
    const auto now = std::chrono::steady_clock::now();
    if (now - read_ >= std::chrono::seconds(1)) {
      current_ = FrontDoorCredentials(o_);
      if (required_ && current_.empty()) current_ = {resp::ServerOptions::Credential{"default", Unguessable()}};
      read_ = now;
    }
    return current_;
  }

 private:
  const ClusterCommandOptions o_;
  std::mutex mu_;
  std::vector<resp::ServerOptions::Credential> current_;
  bool required_ = false;
  std::chrono::steady_clock::time_point read_;
};

metrics::Page Unavailable(const std::string& why) {
  return metrics::Page{.status = 503, .content_type = "text/plain; charset=utf-8", .body = why + "\n"};
}

class FrontDoorsImpl final : public FrontDoors {
 public:
  FrontDoorsImpl(const ClusterCommandOptions& o, node::NodeProcess* node) : o_(o), node_(node) {}
  ~FrontDoorsImpl() override {
    // The listeners first: nothing may ask the client or the node after.
    http_.clear();
    resp_.reset();
    client_.reset();
  }

  Status Start() {
    if (o_.resp_port > 65535 || o_.metrics_port > 65535 || o_.http_port > 65535) {
      return Status::InvalidArgument("a port above 65535");
    }
    if (o_.metrics_port != 0 && o_.metrics_port == o_.http_port) {
      return Status::InvalidArgument("--metrics-port and --http-port must differ (the web view serves /metrics too)");
    }
    if (o_.resp_port != 0 || o_.http_port != 0) {
      SLIP_ASSIGN_OR_RETURN(client_, Client::Open(ClientOptions{.dir = o_.dir, .zookeeper = o_.zookeeper, .provider = "",
                                                                .deadline = std::chrono::seconds(10),
                                                                .bind_address = o_.bind, .secret_file = o_.secret_file}));
    }
    if (o_.resp_port != 0) {
      resp::ServerOptions so;
      so.bind = o_.bind;
      so.port = static_cast<uint16_t>(o_.resp_port);
      so.credentials = [cache = std::make_shared<CredentialCache>(o_)] { return cache->Get(); };
      so.info = [id = o_.node] { return "slip_node:" + std::to_string(id) + "\r\n"; };
      SLIP_ASSIGN_OR_RETURN(resp_, resp::Server::Start(client_.get(), std::move(so)));
      logging::Info("RESP front door on {}:{}", o_.bind, resp_->port());
    }
    if (o_.metrics_port != 0) {
      SLIP_ASSIGN_OR_RETURN(auto h, metrics::HttpServer::Start(o_.bind, static_cast<uint16_t>(o_.metrics_port),
                                                               {{"/metrics", [this] { return Metrics(); }}}));
      logging::Info("metrics on http://{}:{}/metrics", o_.bind, h->port());
      http_.push_back(std::move(h));
    }
    if (o_.http_port != 0) {
      SLIP_ASSIGN_OR_RETURN(
          auto h, metrics::HttpServer::Start(o_.bind, static_cast<uint16_t>(o_.http_port),
                                             {{"/", [] { return metrics::Page{.status = 200, .content_type = "text/html; charset=utf-8", .body = WebViewPage()}; }},
                                              {"/metrics", [this] { return Metrics(); }},
                                              {"/api/cluster", [this] { return ClusterJson(); }}}));
      logging::Info("web view on http://{}:{}/", o_.bind, h->port());
      http_.push_back(std::move(h));
    }
    return Status::Ok();
  }

 private:
  // This node's STATS, asked on its own threads (within 2 s).
  Result<json> OwnStats() {
    auto p = std::make_shared<std::promise<std::string>>();
    auto f = p->get_future();
    node_->StatsAsync([p](std::string j) { p->set_value(std::move(j)); });
    if (f.wait_for(std::chrono::seconds(2)) != std::future_status::ready) {
      return Status::Timeout("the node did not answer STATS within 2 s");
    }
    try {
      json j = json::parse(f.get(), nullptr, false);
      if (j.is_discarded()) return Status::Corruption("the node's STATS is not JSON");
      return j;
    } catch (const std::future_error&) {
      return Status::Aborted("the node is stopping");
    }
  }

  metrics::Page Metrics() {
    auto stats = OwnStats();
    if (!stats.ok()) return Unavailable(stats.status().ToString());
    std::vector<metrics::Series> extra;
    if (resp_ != nullptr) {
      const resp::Server::Counters c = resp_->counters();
      extra.push_back({"slip_resp_connections", "gauge", "Open connections of the RESP front door", {{"", double(c.connected)}}});
      extra.push_back({"slip_resp_connections_total", "counter", "Connections the RESP front door accepted",
                       {{"", double(c.connections)}}});
      extra.push_back({"slip_resp_rejected_connections_total", "counter",
                       "Connections refused (too many clients)", {{"", double(c.rejected)}}});
      extra.push_back({"slip_resp_commands_total", "counter", "Commands the RESP front door ran", {{"", double(c.commands)}}});
      extra.push_back({"slip_resp_errors_total", "counter", "Error replies of the RESP front door", {{"", double(c.errors)}}});
    }
    return metrics::Page{.status = 200, .content_type = "text/plain; version=0.0.4; charset=utf-8",
                         .body = metrics::PrometheusText(*stats, extra)};
  }

  // The web view's poll: the configuration, and every configured node's
  // STATS or why it did not answer. One answer serves every poll within
  // half a second (several open pages, a node down that takes a second to
  // time out), computed by one thread at a time.
  metrics::Page ClusterJson() {
    std::lock_guard<std::mutex> l(cluster_mu_);
    const auto now = std::chrono::steady_clock::now();
    if (cluster_page_ && now - cluster_at_ < std::chrono::milliseconds(500)) return *cluster_page_;
    cluster_page_ = ComputeClusterJson();
    cluster_at_ = std::chrono::steady_clock::now();
    return *cluster_page_;
  }
  metrics::Page ComputeClusterJson() {
    if (store_ == nullptr) {
      auto store = cluster::OpenConfigStore(o_.dir, o_.zookeeper);
      if (!store.ok()) return Unavailable(store.status().ToString());
      store_ = std::move(*store);
    }
    auto c = store_->Load();
    if (!c.ok()) return Unavailable(c.status().ToString());
    auto answers = client_->NodeStatsEach();
    if (!answers.ok()) return Unavailable(answers.status().ToString());
    json nodes = json::array();
    for (auto& a : *answers) {
      json n = {{"node", a.node == Client::kPoolStatsId ? json("pool") : json(a.node)}, {"ok", a.stats.ok()}};
      json stats = a.stats.ok() ? json::parse(*a.stats, nullptr, false) : json();
      if (a.stats.ok() && !stats.is_discarded()) {
        n["stats"] = std::move(stats);
      } else {
        n["ok"] = false;
        n["error"] = a.stats.ok() ? std::string("its STATS is not JSON") : a.stats.status().ToString();
      }
      nodes.push_back(std::move(n));
    }
    const json out = {
        {"self", o_.node},
        {"now_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count()},
        {"config", json::parse(cluster::EncodeJson(c->config), nullptr, false)},
        {"nodes", std::move(nodes)},
    };
    return metrics::Page{.status = 200, .content_type = "application/json", .body = out.dump()};
  }

  const ClusterCommandOptions o_;
  node::NodeProcess* const node_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<resp::Server> resp_;
  std::vector<std::unique_ptr<metrics::HttpServer>> http_;
  std::mutex cluster_mu_;  // the web view's JSON:
  std::unique_ptr<cluster::ConfigStore> store_;
  std::optional<metrics::Page> cluster_page_;
  std::chrono::steady_clock::time_point cluster_at_;
};

}  // namespace

Result<std::unique_ptr<FrontDoors>> FrontDoors::Start(const ClusterCommandOptions& o, node::NodeProcess* node) {
  auto d = std::make_unique<FrontDoorsImpl>(o, node);
  SLIP_RETURN_IF_ERROR(d->Start());
  return std::unique_ptr<FrontDoors>(std::move(d));
}

std::string KeyHex(const auth::Key& key) {
  return rpc::RpcPeers::HexEncode(std::string_view(reinterpret_cast<const char*>(key.bytes.data()), key.bytes.size()));
}

std::vector<resp::ServerOptions::Credential> FrontDoorCredentials(const ClusterCommandOptions& o) {
  using Credential = resp::ServerOptions::Credential;
  if (!o.resp_password_file.empty()) {
    std::ifstream f(o.resp_password_file);
    std::vector<Credential> out;
    for (std::string line; f && std::getline(f, line);) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
      const size_t start = line.find_first_not_of(" \t");
      if (start == std::string::npos || line[start] == '#') continue;
      line.erase(0, start);
      const size_t space = line.find_first_of(" \t");
      if (space == std::string::npos) {
        out.push_back(Credential{"default", line});
      } else {
        const size_t pass = line.find_first_not_of(" \t", space);
        out.push_back(Credential{line.substr(0, space), line.substr(pass)});
      }
    }
    // Unreadable or empty: a password nobody knows (an empty list would
    // mean no AUTH at all).
    if (out.empty()) out.push_back(Credential{"default", Unguessable()});
    return out;
  }
  const std::string path = o.secret_file.empty() ? auth::SecretPath(o.dir) : o.secret_file;
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  if (ec) return {Credential{"default", Unguessable()}};  // cannot tell: refuse, never admit
  if (!exists) return {};
  auto ring = auth::ReadKeyringFile(path);
  if (!ring.ok()) return {Credential{"default", Unguessable()}};
  std::vector<Credential> out;
  for (const auto& k : ring->keys()) out.push_back(Credential{"default", KeyHex(k)});
  return out;
}

}  // namespace slip::cli
