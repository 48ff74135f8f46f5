#include "runtime/cost.h"

namespace slip::runtime {

std::string_view CostName(Cost c) {
  switch (c) {
    case Cost::kMessageSend: return "message_send";
    case Cost::kMessageReceive: return "message_receive";
    case Cost::kRpcCall: return "rpc_call";
    case Cost::kWakeup: return "wakeup";
    case Cost::kWakeupBusy: return "wakeup_busy";
    case Cost::kSwitchIn: return "switch_in";
    case Cost::kWakeupLocal: return "wakeup_local";
    case Cost::kSwitchInLocal: return "switch_in_local";
    case Cost::kFabricPost: return "fabric_post";
    case Cost::kFabricCompletion: return "fabric_completion";
    case Cost::kFabricTarget: return "fabric_target";
    case Cost::kRequest: return "request";
    case Cost::kClientOp: return "client_op";
    case Cost::kAppOp: return "app_op";
    case Cost::kStorePut: return "store_put";
    case Cost::kStoreGet: return "store_get";
    case Cost::kDigest: return "digest";
    case Cost::kChecksum: return "checksum";
    case Cost::kCacheLookup: return "cache_lookup";
    case Cost::kMerge: return "merge";
    case Cost::kLsmWrite: return "lsm_write";
    case Cost::kLsmGet: return "lsm_get";
    case Cost::kFlush: return "flush";
    case Cost::kCompaction: return "compaction";
    case Cost::kCount: break;
  }
  return "?";
}

}  // namespace slip::runtime
