// PeerCaller over an RpcChannel: NodeIds resolve to the addresses in the
// current cluster configuration, so the replication, promotion and client
// code runs over the real transport unchanged. A node may have an entry per
// request worker (cluster::NodeInfo::workers): a call about a shard goes to
// the entry of the worker serving it, a read any worker serves to each in
// turn (EntryOf).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/hash.h"
#include "rpc/peer_caller.h"
#include "rpc/channel.h"
#include "runtime/runtime.h"

namespace slip::rpc {

class RpcPeers final : public PeerCaller {
 public:
  // `exec` is the channel's executor (answers to unknown nodes go through it).
  RpcPeers(RpcChannel* channel, runtime::Executor* exec, RpcChannel::CallOptions options = {})
      : channel_(channel), exec_(exec), options_(options) {}

  // The address of every node, from the newest configuration (executor
  // only). Configurations hold fabric addresses hex-encoded (they are
  // binary); undecodable ones are left out (calls to them: Unavailable).
  void SetAddresses(const std::map<NodeId, std::string>& hex) {
    std::map<NodeId, std::vector<std::string>> entries;
    for (const auto& [id, h] : hex) entries[id] = {h};
    SetEntries(entries, 0);
  }
  // Every node's entries in worker order (cluster::NodeInfo::Entries): a
  // call about shard s of `num_shards` goes to its worker's entry, an
  // any-worker read to each entry in turn, any other to the first
  // (EntryOf). A node with an undecodable entry is left out.
  void SetEntries(const std::map<NodeId, std::vector<std::string>>& hex, uint32_t num_shards) {
    num_shards_ = num_shards;
    entries_.clear();
    for (const auto& [id, list] : hex) {
      std::vector<std::string> raw;
      for (const std::string& h : list) {
        auto r = HexDecode(h);
        if (!r.ok()) break;
        raw.push_back(std::move(*r));
      }
      if (!raw.empty() && raw.size() == list.size()) entries_[id] = std::move(raw);
    }
  }

  static std::string HexEncode(std::string_view raw) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : raw) {
      out += kDigits[c >> 4];
      out += kDigits[c & 15];
    }
    return out;
  }
  static Result<std::string> HexDecode(std::string_view hex) {
    if (hex.size() % 2 != 0) return Status::InvalidArgument("odd-length hex address");
    auto nibble = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    std::string out;
    for (size_t i = 0; i < hex.size(); i += 2) {
      const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
      if (hi < 0 || lo < 0) return Status::InvalidArgument("not a hex address");
      out += static_cast<char>(hi << 4 | lo);
    }
    return out;
  }

  void Call(Target to, uint16_t method, std::string payload,
            std::function<void(Result<PeerResponse>)> done) override {
    auto it = entries_.find(to.node);
    Result<RpcChannel::Peer> peer =
        it == entries_.end()
            ? Result<RpcChannel::Peer>(Status::Unavailable("no address for node " + std::to_string(to.node)))
            : channel_->Connect(
                  it->second[EntryOf(to, num_shards_, static_cast<uint32_t>(it->second.size()), to.any_worker ? &turns_[to.node] : nullptr)]);
    if (!peer.ok()) {
      // Never inside Call (the PeerCaller contract).
      return exec_->Post([done = std::move(done), s = peer.status()] { done(s); });
    }
    channel_->Call(*peer, method, std::move(payload), options_,
                   [done = std::move(done)](Result<Response> r) {
                     if (!r.ok()) return done(r.status());
                     done(PeerResponse{r->status, std::move(r->payload)});
                   });
  }

 private:
  RpcChannel* channel_;
  runtime::Executor* exec_;
  RpcChannel::CallOptions options_;
  std::map<NodeId, std::vector<std::string>> entries_;  // raw, never empty
  uint32_t num_shards_ = 0;
  std::map<NodeId, uint64_t> turns_;  // per node, any-worker calls' next entry (EntryOf)
};

}  // namespace slip::rpc
