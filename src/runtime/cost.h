// runtime/cost.h: the CPU costs of the steps protocol code takes, by name,
// for the simulator's cost model (docs/model.md).
//
// In the simulator a handler takes zero virtual time unless it says what it
// did: code calls Charge(Cost::kStorePut, value_bytes) where the work
// happens, and a SimRuntime running with a CostModel turns that into
// virtual time on the running executor's core (the handler's later sends
// and timers start that much later, and the core is busy meanwhile). In a
// real process, and in a simulation without a model, Charge() is a
// thread-local load and a branch: the real work is the cost.
//
// The inputs are named steps of the real code paths, not per-design knobs:
// every design pays the same price for the same step, and a design differs
// only in which steps it takes, how often, and on which executor.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "runtime/runtime.h"

namespace slip::runtime {

enum class Cost : uint8_t {
  // Transport (two-sided messages: RPC frames, replication sends).
  kMessageSend,     // a message handed to the transport: per message + per byte
  kMessageReceive,  // a message taken from the transport and dispatched
  // The RPC layer's own work on one call message at one end (its slot in a
  // frame, the session and dedup, dispatch to a handler or callback): paid
  // per message even when a frame carries several, while kMessageSend and
  // kMessageReceive are paid per frame (the transport's message).
  kRpcCall,
  // Charged by the runtime to whoever hands a parked executor work through
  // a socket (a message). With a core of its host idle, the whole wake-up
  // (scheduler, inter-processor interrupt, the idle core's exit, the woken
  // thread's return), all of it on the path, the woken thread's part
  // (kSwitchIn) charged to it; with every core busy only a hand-over,
  // kWakeupBusy: the woken thread waits for a core anyway and pays its own
  // part when it gets one. Hosts whose threads spin never pay either.
  kWakeup,
  kWakeupBusy,
  // Charged by the runtime to an executor at the start of a turn when it
  // lost its core: woken, and once per preemption of its spin since its
  // last turn (it was switched back in to spin the rest): its return into
  // the thread through its endpoints' wait (epoll, the provider's progress),
  // its caches refilled.
  kSwitchIn,
  // The same two parts for a wake-up inside one process, through an
  // eventfd or a futex (a Post to a parked executor, an answer handed to an
  // application thread blocked in a call): the waker's system call, and
  // the return of a thread that waits on no endpoint. Far cheaper than a
  // socket's: no transport runs on either side.
  kWakeupLocal,
  kSwitchInLocal,
  // Fabric (fabric/): a work request posted (doorbell; a software provider's
  // send path), a completion reaped, and the target side of a one-sided
  // operation (zero on an RDMA NIC; a software provider's progress thread).
  kFabricPost,
  kFabricCompletion,
  kFabricTarget,
  // Node and client code.
  kRequest,     // node: decode a client request, check the view, encode the reply
  kClientOp,    // client library: route, encode a request, decode its reply
  // An application thread's own side of a synchronous call (choosing the
  // operation and key, the call's promise, closure and queue, the answer
  // from its future; + per byte of a value it writes). Charged to the
  // application threads of synchronous clients only.
  kAppOp,
  kStorePut,    // store: encode an entry, append it, update the index (+ per byte)
  kStoreGet,    // store: index lookup and entry read (+ per byte)
  kDigest,      // backup: digest one replicated entry into its store (+ per byte)
  kChecksum,    // CRC32C over bytes (erda objects, tailwind entries): per byte
  // DINOMO's pool designs (dinomo/).
  kCacheLookup,  // a KVS node's adaptive cache: a lookup or an update (+ per byte of value copied)
  kMerge,        // the pool: merge one logged entry into the shared index (+ per byte)
  // RubbleDB's LSM engines (lsm/). Writing a table is paid whole where it
  // is written: a flush per table out of a MemTable, a compaction per merge
  // over the bytes it reads and writes.
  kLsmWrite,    // an entry's WAL record (or a follower's log of it) and MemTable insert (+ key and value bytes)
  kLsmGet,      // a point lookup: MemTables, then tables through Bloom filters and the block cache (+ value bytes)
  kFlush,       // a MemTable into a table (+ per byte of table written)
  kCompaction,  // a merge of tables into the next level (+ per byte read and written)
  kCount
};

constexpr size_t kCostCount = static_cast<size_t>(Cost::kCount);

// Stable names: the keys of model files and reports.
std::string_view CostName(Cost c);

// One named input: a fixed part and a per-byte part.
struct CostInput {
  Nanos per_op = 0;
  double per_byte = 0;  // nanoseconds per byte
};

struct CostModel {
  std::array<CostInput, kCostCount> inputs{};

  CostInput& operator[](Cost c) { return inputs[static_cast<size_t>(c)]; }
  const CostInput& operator[](Cost c) const { return inputs[static_cast<size_t>(c)]; }
  Nanos Of(Cost c, uint64_t bytes) const {
    const CostInput& in = (*this)[c];
    return in.per_op + static_cast<Nanos>(in.per_byte * static_cast<double>(bytes));
  }
};

// What the simulator's running handler has been charged (one per runtime
// thread; set only while a modelled handler runs).
struct CostMeter {
  const CostModel* model = nullptr;
  Nanos charged = 0;
  std::array<Nanos, kCostCount>* totals = nullptr;  // per input, for reports
  std::array<Nanos, kCostCount>* own = nullptr;     // the same, the running executor's
  // Whole steps charged by Charge() (not the parts ChargeBytes and
  // ChargeNanos add), the running executor's: fabric messages sent are its
  // kMessageSend steps.
  std::array<uint64_t, kCostCount>* own_steps = nullptr;
};

namespace detail {
inline thread_local CostMeter* t_meter = nullptr;
inline void Add(CostMeter& m, Cost c, Nanos n) {
  m.charged += n;
  if (m.totals != nullptr) (*m.totals)[static_cast<size_t>(c)] += n;
  if (m.own != nullptr) (*m.own)[static_cast<size_t>(c)] += n;
}
}  // namespace detail

// Charges the running handler for one `c` step over `bytes` bytes. A no-op
// outside a modelled simulation. Header-only, so any layer may charge
// without linking the runtime.
inline void Charge(Cost c, uint64_t bytes = 0) {
  CostMeter* m = detail::t_meter;
  if (m == nullptr) return;
  detail::Add(*m, c, m->model->Of(c, bytes));
  if (m->own_steps != nullptr) ++(*m->own_steps)[static_cast<size_t>(c)];
}

// Charges only the per-byte part of `c` (a message that rides in a frame
// whose fixed cost is already paid).
inline void ChargeBytes(Cost c, uint64_t bytes) {
  if (detail::t_meter == nullptr) return;
  const double per_byte = (*detail::t_meter->model)[c].per_byte;
  detail::Add(*detail::t_meter, c, static_cast<Nanos>(per_byte * static_cast<double>(bytes)));
}

// Charges `n` of input `c`: a part of its price (a wake-up split between
// waker and woken).
inline void ChargeNanos(Cost c, Nanos n) {
  if (detail::t_meter != nullptr && n > 0) detail::Add(*detail::t_meter, c, n);
}

}  // namespace slip::runtime
