// The message network between simulated processes: latency, loss,
// partitions and slow nodes (the fabric under the one-sided designs gets the
// same faults).
#include "sim/world.h"

namespace slip::sim::detail {

void World::Call(runtime::Executor* from, NodeId from_node, uint64_t from_inc, rpc::Target target,
                 uint16_t method, std::string payload,
                 std::function<void(Result<rpc::PeerResponse>)> done, uint64_t* turn) {
  const NodeId to = target.node;
  struct State {
    bool finished = false;
    runtime::TimerId timer = 0;
    std::function<void(Result<rpc::PeerResponse>)> done;
  };
  auto st = std::make_shared<State>();
  st->done = std::move(done);
  // The caller must still be the same process when an answer comes back.
  auto caller_alive = [this, from_node, from_inc] {
    return IsClient(from_node) || (nodes_[from_node]->up && nodes_[from_node]->incarnation == from_inc);
  };
  st->timer = from->After(static_cast<Nanos>(o_.call_timeout_us) * kMicrosecond,
                          [st, caller_alive, to] {
                            if (st->finished || !caller_alive()) return;
                            st->finished = true;
                            st->done(Status::Timeout("no answer from node " + std::to_string(to)));
                          });
  // A dead process sends nothing (its executor's timers still fire here).
  if (!caller_alive()) return;
  if (to >= nodes_.size() || Cut(from_node, to) || rt_.Rng().Bernoulli(o_.drop_probability)) {
    runtime::Charge(runtime::Cost::kMessageSend, payload.size());
    runtime::Charge(runtime::Cost::kRpcCall);
    return;
  }
  Node* dst = nodes_[to].get();
  const uint64_t dst_inc = dst->incarnation;
  // The worker whose entry takes it, and answers.
  size_t entry = rpc::EntryOf(target, o_.shards, static_cast<uint32_t>(dst->workers.size()), turn);
  // Outside performance runs, callers sometimes hold an older
  // configuration's entries: one call about a shard in eight arrives at a
  // random worker and hops to its owner, so the fault campaigns drive that
  // path (WorkerPool::Handle) too.
  if (!o_.perf && target.shard && dst->workers.size() > 1 && rt_.Rng().Bernoulli(0.125)) {
    entry = rt_.Rng().Uniform(dst->workers.size());
  }
  runtime::Executor* at = dst->workers[entry];
  auto body = std::make_shared<std::string>(std::move(payload));
  Send(from, at, body->size(), Wire(body->size()) * Slowness(to), "deliver", method,
               [this, dst, dst_inc, entry, at, method, body, from, from_node, st, caller_alive] {
                 if (!dst->up || dst->incarnation != dst_inc) return;  // lost with the node
                 dst->live->parts->pool->Handle(
                     entry, method, proto::AsBytes(*body),
                     [this, dst, dst_inc, at, from, from_node, st, caller_alive](Code c, std::string p) {
                       if (!dst->up || dst->incarnation != dst_inc) return;
                       if (Cut(dst->id, from_node) || rt_.Rng().Bernoulli(o_.drop_probability)) {
                         runtime::Charge(runtime::Cost::kMessageSend, p.size());
                         runtime::Charge(runtime::Cost::kRpcCall);
                         return;
                       }
                       const size_t bytes = p.size();
                       auto resp = std::make_shared<rpc::PeerResponse>(
                           rpc::PeerResponse{c, std::move(p)});
                       Send(at, from, bytes, Wire(bytes) * Slowness(dst->id), "reply",
                                    static_cast<uint64_t>(c), [st, resp, from, caller_alive] {
                                      if (st->finished || !caller_alive()) return;
                                      st->finished = true;
                                      from->Cancel(st->timer);
                                      st->done(std::move(*resp));
                                    });
                     });
               });
}

// The transport's CPU (the cost model; free otherwise): the sender's to
// hand a message over, the receiver's to take it and dispatch it. In
// performance runs the messages one handler sends to one executor travel
// as one frame — the RPC layer puts every call a turn makes to a peer into
// one — so the frame pays the transport's fixed costs once and each
// message its bytes; the RPC layer's work is per message at both ends
// (kRpcCall), frame or not.
// The message flies once the send is done: after its CPU, including waking
// a parked receiver (which runs only once woken).
void World::Send(runtime::Executor* from, runtime::Executor* to, size_t bytes, Nanos flight, const char* label,
                 uint64_t tag, std::function<void()> fn) {
  rt_.ChargeWake(to);  // a parked receiver is woken by the send
  runtime::Charge(runtime::Cost::kRpcCall);
  if (!o_.perf) {
    runtime::Charge(runtime::Cost::kMessageSend, bytes);
    rt_.Schedule(rt_.Now() + flight, to, kEventNet, label, tag, [bytes, fn = std::move(fn)] {
      runtime::Charge(runtime::Cost::kMessageReceive, bytes);
      runtime::Charge(runtime::Cost::kRpcCall);
      fn();
    });
    return;
  }
  std::shared_ptr<Frame>& f = frames_[{from->id(), to->id()}];
  if (f != nullptr && f->turn == rt_.turn() && !f->sent) {
    runtime::ChargeBytes(runtime::Cost::kMessageSend, bytes);
    f->messages.push_back({bytes, std::move(fn)});
    return;
  }
  runtime::Charge(runtime::Cost::kMessageSend, bytes);
  f = std::make_shared<Frame>();
  f->turn = rt_.turn();
  f->messages.push_back({bytes, std::move(fn)});
  rt_.Schedule(rt_.Now() + flight, to, kEventNet, label, tag, [this, f, from] {
    f->sent = true;
    // A software provider acknowledges every fabric message — a frame: the
    // RPC layer sends a turn's calls to a peer as one (our tcp endpoints ask
    // for remote completion, OfiOptions::remote_completion): the receiver's
    // provider sends the ack as it takes the message, and the ack completes
    // the send at the sender, waking it if it has parked. Its CPU at both
    // ends is in the message costs (calibrated on a ping-pong that carries
    // the acks); what the model adds is the sender's turn and the wake-up,
    // decided as the ack is sent — on loopback, when it arrives (the send
    // runs the sender's socket callback). An RDMA NIC acknowledges in
    // hardware.
    if (o_.perf->software_nic) {
      rt_.ChargeWake(from);
      rt_.Schedule(rt_.Now() + Latency(), from, kEventNet, "ack", 0, [] {});
    }
    for (size_t i = 0; i < f->messages.size(); ++i) {
      if (i == 0) {
        runtime::Charge(runtime::Cost::kMessageReceive, f->messages[i].bytes);
      } else {
        runtime::ChargeBytes(runtime::Cost::kMessageReceive, f->messages[i].bytes);
      }
      runtime::Charge(runtime::Cost::kRpcCall);
    }
    for (auto& m : f->messages) m.fn();
  });
}

// A partition cuts `id` off from the CM and the other nodes: messages
// (Cut) and the replication fabric alike.
void World::Isolate(NodeId id, bool cut) {
  if (cut) {
    isolated_.insert(id);
  } else {
    isolated_.erase(id);
  }
  if (!fabric_) return;
  for (NodeId other = 0; other < nodes_.size(); ++other) {
    if (other == id) continue;
    if (cut) {
      fabric_->Partition(id, other);
    } else if (!isolated_.count(other)) {
      fabric_->Heal(id, other);
    }
  }
}

// A slow node answers slow_factor times later, on the fabric too.
void World::SetSlow(NodeId id, bool slow) {
  if (slow) {
    slow_.insert(id);
  } else {
    slow_.erase(id);
  }
  if (!fabric_) return;
  fabric::LinkFaults f = NetworkFaults();
  if (slow) f.extra_delay = (o_.slow_factor - 1) * static_cast<Nanos>(o_.latency_max_us) * kMicrosecond;
  fabric_->SetNodeFaults(id, f);
}

}  // namespace slip::sim::detail
