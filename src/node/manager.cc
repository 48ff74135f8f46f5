#include "node/manager.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include "cluster/cluster_config.h"
#include "common/log.h"
#include "cluster/config_access.h"
#include "node/node_process.h"

namespace slip::node {
namespace {



}  // namespace

Status RunManager(const ManagerOptions& o, const std::atomic<bool>* stop) {
  SLIP_ASSIGN_OR_RETURN(auto store, cluster::OpenConfigStore(o.dir, o.zookeeper));
  const std::string me = "manager-pid" + std::to_string(getpid());
  const runtime::Nanos tick = o.lease / 4;
  cluster::Lease lease;
  for (;;) {
    auto l = store->AcquireLease("manager", me, o.lease, MachineNow());
    if (l.ok()) {
      lease = *l;
      break;
    }
    if (!l.status().Is(Code::kBusy)) return l.status();
    if (*stop) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::nanoseconds(tick));  // a standby
  }
  logging::Info("{}", "holding the manager lease (epoch " + std::to_string(lease.epoch) + ")");
  const runtime::Nanos started = MachineNow();
  std::map<uint32_t, bool> seen_alive;

  while (!*stop) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(tick));
    auto renewed = store->RenewLease(lease, o.lease, MachineNow());
    if (!renewed.ok()) {
      logging::Error("{}", "lost the manager lease: " + renewed.status().ToString());
      return Status::Aborted("lost the manager lease");
    }
    lease = *renewed;
    auto vc = store->Load();
    if (!vc.ok()) continue;
    for (const auto& [id, info] : vc->config.nodes) {
      if (info.state != cluster::NodeState::kUp) continue;
      const std::string name = "node-" + std::to_string(id);
      auto probe = store->AcquireLease(name, me, 1, MachineNow());
      if (!probe.ok()) {
        if (probe.status().Is(Code::kBusy)) seen_alive[id] = true;
        continue;
      }
      (void)store->ReleaseLease(*probe);
      const bool grace_over = MachineNow() - started > 3 * o.lease;
      if (!seen_alive[id] && !grace_over) continue;  // still booting
      // Its lease expired: replace it (one CAS; a conflict retries next tick).
      auto next = cluster::Reassign(vc->config, id);
      if (!next.ok()) {
        logging::Warn("{}", "cannot reassign node " + std::to_string(id) + ": " + next.status().ToString());
        continue;
      }
      auto w = store->CompareAndSwap(vc->version, *next);
      if (w.ok()) {
        logging::Info("{}", "node " + std::to_string(id) + " failed: term " + std::to_string(next->term));
        seen_alive[id] = false;
      }
      break;  // the stored version moved on either way
    }
  }
  (void)store->ReleaseLease(lease);
  return Status::Ok();
}

}  // namespace slip::node
