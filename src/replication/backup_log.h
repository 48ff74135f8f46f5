// BackupLog: the backup side of the one-sided replication designs — what a
// node does so that peers can make entries persistent in its PM without any
// of its workers taking part. It follows its design's registry entry
// (replication/registry.h: `receive`, `valid_prefix`):
//
//   rowan-kv   One b-log for all senders (docs/papers/rowan.md §2.2, §3.4): PM
//              segments are posted, in address order, as multi-receive
//              buffers of the replication endpoint; every sender's Send
//              lands at the next 64 B stride. The NIC role reposts: a posted
//              segment is *used* once the next one's first word is non-zero
//              (the RNIC moved on), and after a grace period (in-flight DMAs)
//              it goes to the digest. Receive completions are drained and
//              thrown away (Rowan's CQ ring that nobody reads).
//   rwrite-kv, batch-kv, share-kv, tailwind
//              A sender opens a private segment by RPC (REPL_OPEN), Writes
//              entries at offsets it chooses, and closes it (REPL_CLOSE)
//              once its writes completed; the closed segment goes to the
//              digest. Tailwind's buffers end every transfer with a running
//              checksum, and an open buffer is trusted only up to its valid
//              prefix (tailwind/format.h).
//
// The digest indexes landed entries where they lie (Store::DigestReceived)
// and seals the segment for the cleaner. CatchUp() indexes everything landed
// so far, used or not; a node calls it before it answers SHARD_TAIL or
// promotes itself, so no acknowledged entry is missing from what it shares.
//
// Fencing (docs/security.md, "Fencing"): one-sided access is a capability
// REPL_OPEN grants — over the authenticated control path, and only to a node
// that is the primary of a shard this node backs up (Fence() tells it the
// configuration). A private buffer is its own memory registration, so its
// key reaches that buffer and nothing else; a sender of a shared log gets a
// send token that must start every message it Sends (replication/seal.h)
// and a registration of its own to Read for persistence. When a sender
// loses a role it had (a new term made another node primary), Fence()
// revokes everything it was granted: its keys stop working at this NIC, so
// no write of its can be acknowledged any more, and its messages that land
// later are erased before the digest sees them. The segment area is never
// remotely writable as a whole, except for the erda family, whose clients
// write into reserved places of it.
//
// Roles and threads: Poll() is the NIC role (drives the endpoint: on software
// providers, peers' one-sided operations land only while it polls);
// DigestStep() the digest role, which several threads may take at once
// (Rowan's five digest threads): each step takes a different used segment,
// and the store digests segments concurrently (indexing is
// version-conditional, so their order does not matter). Open/Close/CatchUp
// are the control path, run by whichever worker got the RPC; Fence runs on
// the node's agent. All are thread-safe: every use of the endpoint
// (polling, CanBlock, the control path's registrations) holds mu_, as the
// provider's FI_THREAD_DOMAIN asks.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "fabric/fabric.h"
#include "proto/kv.h"
#include "replication/design.h"
#include "runtime/runtime.h"
#include "store/store.h"

namespace slip::replication {

struct Design;  // registry.h

struct BackupLogOptions {
  Protocol protocol = Protocol::kRowan;
  // rowan: segments kept posted that the NIC has not moved past yet.
  uint32_t posted_segments = 4;
  // rowan: how long a segment the NIC moved past may still receive DMAs
  // (the paper's 2 ms; senders retry anything slower).
  runtime::Nanos used_grace = 2 * runtime::kMillisecond;
  // Private buffers one sender (node) may hold open at once (Tailwind's
  // admission limit, per sender): beyond it REPL_OPEN is refused with Busy
  // and the sender retries. Shared log: the grants one sender may hold
  // (older ones are dropped). Per sender, so that a cluster's size does not
  // have to be known here: each of a sender's workers holds a buffer, and
  // briefly a second while it closes a full one (2 x 32 workers at most);
  // what bounds them all is the PM (out of segments: Busy too).
  uint32_t max_open_buffers = 64;
  // The store's PM is a file on a real filesystem: bytes peers place are in
  // the page cache, persistent only once msync'd. Senders are told so in
  // REPL_OPEN and ask with REPL_PERSIST (PersistLanded) before they
  // acknowledge. False where placement is persistence (PM, or the memory
  // durability class, where the PM file lives in tmpfs).
  bool persist_by_request = false;
  // Names this process among the node's restarts (a random number in a real
  // node; a counter in simulations). REPL_OPEN answers it; REPL_PERSIST must
  // carry it.
  uint64_t incarnation = 0;
  // Where send tokens come from: auth::RandomBytes unless set (the
  // simulator sets its seeded generator).
  std::function<uint64_t()> random;
};

// Who may replicate into this node in one configuration: for every node that
// is the primary of a shard this node backs up, those shards (ascending).
struct Senders {
  uint64_t term = 0;
  std::map<uint32_t, std::vector<uint32_t>> shards;
};

class BackupLog {
 public:
  // `ep` is this node's replication endpoint; the caller polls it only
  // through Poll(). Registers the store's segment area for remote access.
  static Result<std::unique_ptr<BackupLog>> Create(store::Store* store, fabric::Endpoint* ep,
                                                   const BackupLogOptions& options);
  ~BackupLog();

  // NIC role: drives the endpoint and (rowan) keeps segments posted.
  // Returns whether it did any work.
  bool Poll(runtime::Nanos now);
  // For the executor that parks the NIC role on the endpoint's wait fd:
  // Endpoint::CanBlock, under the lock every use of the endpoint takes (the
  // control path registers and deregisters on it from other threads).
  bool CanBlock();
  // Digest role: digests and seals one used or closed segment. Returns
  // whether there was one. Any number of threads may call it at once.
  Result<bool> DigestStep();
  // Indexes every entry landed so far, in used and still-open segments.
  Status CatchUp();

  // The configuration changed: from now on only `senders` may open, and a
  // sender that lost a shard it had is revoked (see "Fencing" above). Until
  // the first call any node may open (a node calls it with its first
  // configuration, before it serves). Idempotent.
  void Fence(const Senders& senders);

  // Control path. Refused with StaleTerm when the sender is the primary of
  // no shard this node backs up (Busy when the request's term is newer than
  // what this node knows: it may just be behind).
  Result<proto::ReplOpenResponse> Open(const proto::ReplOpenRequest& req);
  Status Close(const proto::ReplCloseRequest& req);
  // REPL_PERSIST: makes everything landed in the receive area so far
  // persistent (one msync of the area: only its dirty pages are written).
  // A no-op unless persist_by_request.
  Status PersistLanded(uint64_t incarnation);

  // An orderly stop, once no role runs and the endpoint is polled no more:
  // every segment peers were writing into is digested and sealed, so the
  // next recovery checks all of it strictly (docs/design-notes.md "Damage
  // on the media"). In the shared log what lies past the last screened
  // message — a message cut short, never acknowledged — is zeroed first.
  Status SealForStop();

  // The replication endpoint's address (REPL_OPEN's answer carries it).
  const std::string& address() const { return address_; }
  // The registration of the store's segment area on that endpoint, and the
  // store region offset of its byte 0.
  const fabric::MemoryRegion& area() const { return mr_; }
  uint64_t area_offset() const { return data_offset_; }

  struct Stats {
    uint64_t segments_posted = 0, segments_used = 0, segments_digested = 0;
    uint64_t buffers_opened = 0, buffers_closed = 0, opens_refused = 0;
    uint64_t completions_drained = 0;
    uint64_t persist_requests = 0;
    uint64_t senders_fenced = 0;     // senders whose grants Fence revoked
    uint64_t messages_rejected = 0;  // shared log: no valid seal, erased
  };
  Stats stats() const;

 private:
  // A segment peers write into.
  struct Segment {
    uint32_t id = 0;
    uint64_t limit = 0;     // private: bytes the sender reported (close)
    uint32_t sender = 0;    // private buffers
    runtime::Nanos full_at = -1;  // rowan: when the NIC was seen past it
    fabric::MemoryRegion mr;      // private: the buffer's own registration
  };
  // What one REPL_OPEN granted a sender of the shared log.
  struct SendGrant {
    uint32_t sender = 0;
    fabric::MemoryRegion flush;  // its own registration of flush_word_
    uint64_t seq = 0;            // order of granting
  };

  BackupLog(store::Store* store, fabric::Endpoint* ep, BackupLogOptions options);
  Status PostSegment();  // REQUIRES: mu_
  // Digests segment `id` from its cursor up to `limit` (tailwind: the
  // valid prefix below it). REQUIRES: digest_mu_ (shared), and no other
  // thread digesting `id`.
  Status DigestSome(uint32_t id, uint64_t limit, store::Store::ReceiveWalk walk);
  // Digests a used or closed segment whole and hands it to the cleaner.
  Status DigestAndSeal(const Segment& seg);  // REQUIRES: as DigestSome
  // Digests and seals the oldest used or closed segment nobody is
  // digesting; false if none. REQUIRES: digest_mu_ (shared).
  Result<bool> DigestNext();
  void PersistSegment(uint32_t id);
  // Drains the endpoint's completions; erases every message placed in the
  // shared log without a granted seal. REQUIRES: mu_
  size_t DrainCompletions();
  void Screen(const fabric::Completion& c);  // REQUIRES: mu_
  Status CheckSender(const proto::ReplOpenRequest& req) const;  // REQUIRES: mu_
  uint64_t NewToken();  // REQUIRES: mu_
  void DropOldestGrants(uint32_t sender);  // REQUIRES: mu_

  store::Store* const store_;
  fabric::Endpoint* const ep_;
  const BackupLogOptions options_;
  const Design& design_;
  // The segment area: remote read/write for the erda family's clients, else
  // local only (the shared log's multi-receive buffers need a descriptor).
  fabric::MemoryRegion mr_;
  // What shared-log senders Read to learn their Sends are persistent; each
  // grant registers it anew, so revoking one sender leaves the others be.
  alignas(64) std::byte flush_word_[64] = {};
  std::string address_;
  uint64_t data_offset_ = 0;  // region offset of the registration's byte 0

  // Lock order: digest_mu_, then mu_. Digest steps hold digest_mu_ shared
  // (each on a segment of its own); CatchUp and SealForStop exclusive, so
  // they see no segment half digested. The NIC role never waits for a
  // segment's digest: it takes only mu_.
  mutable std::shared_mutex digest_mu_;
  mutable std::mutex mu_;
  std::deque<Segment> posted_;            // rowan, in posting order
  std::map<uint32_t, Segment> open_;      // private buffers by segment id
  std::deque<Segment> to_digest_;         // used / closed
  std::set<uint32_t> digesting_;          // popped from to_digest_, not yet sealed
  Stats stats_;
  std::map<uint32_t, uint64_t> cursor_;   // digested bytes per segment
  // Shared log: per posted segment, where the last message the NIC role
  // screened ends; a catch-up digests no further.
  std::map<uint32_t, uint64_t> screened_;
  std::unordered_map<uint64_t, SendGrant> grants_;  // by send token
  uint64_t grant_seq_ = 0;
  std::optional<Senders> senders_;                  // none before the first Fence
};

}  // namespace slip::replication
