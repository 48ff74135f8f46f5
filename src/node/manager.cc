#include "node/manager.h"

#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "cluster/config_access.h"
#include "cluster/manager.h"
#include "node/node_process.h"
#include "runtime/thread_runtime.h"

namespace slip::node {

Status RunManager(const ManagerOptions& o, const std::atomic<bool>* stop) {
  SLIP_ASSIGN_OR_RETURN(auto store, cluster::OpenConfigStore(o.dir, o.zookeeper));
  runtime::ThreadRuntime rt;
  runtime::Executor* ex = rt.CreateExecutor("manager");
  cluster::ManagerOptions mo;
  mo.lease = o.lease;
  mo.holder = "manager-pid" + std::to_string(getpid());
  mo.clock = MachineNow;  // the clock the nodes' leases are held on
  mo.log = true;
  cluster::Manager manager(store.get(), ex, mo);

  std::promise<Status> stopped;
  auto result = stopped.get_future();
  ex->Post([&] { manager.Start(nullptr, [&](Status s) { stopped.set_value(std::move(s)); }); });
  SLIP_RETURN_IF_ERROR(rt.Start());
  Status s = Status::Ok();
  for (;;) {
    if (result.wait_for(std::chrono::milliseconds(50)) == std::future_status::ready) {
      s = result.get();
      break;
    }
    if (*stop) {
      std::promise<void> done;
      ex->Post([&] {
        manager.Stop();  // gives the lease up for a standby
        done.set_value();
      });
      done.get_future().wait();
      break;
    }
  }
  rt.Stop();
  return s;
}

}  // namespace slip::node
