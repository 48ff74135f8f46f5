#include "client/erda_path.h"

#include <algorithm>

#include "common/hash.h"
#include "erda/bucket_table.h"
#include "erda/index_word.h"

namespace slip::client {

namespace {

constexpr size_t kMaxOneSidedEntry = 64 << 10;

rpc::PeerResponse Answer(Code status, uint64_t term, uint64_t version, std::string_view value) {
  return rpc::PeerResponse{status, proto::Encode(proto::KvResponse{term, version, value})};
}

}  // namespace

// What the client knows of one node: its one-sided endpoint and layout
// (from its latest grant) and its grants by shard.
struct ErdaPath::Node {
  bool have_layout = false;
  std::string address;
  fabric::PeerId peer = 0;
  fabric::RemoteMemory area, table;
  uint64_t area_offset = 0;
  uint32_t num_buckets = 0;
  uint32_t max_entry_bytes = 0;
  runtime::Nanos max_read = 0;
  struct Grant {
    uint64_t term = 0;
    runtime::Nanos until = 0;
  };
  std::map<uint32_t, Grant> grants;
};

struct ErdaPath::GetOp {
  rpc::NodeId node = 0;
  uint64_t term = 0;
  uint32_t shard = 0;
  std::string key;
  uint64_t hash = 0;
  Done done;
  runtime::Nanos started = 0;
  runtime::Nanos grant_until = 0;
  std::vector<erda::IndexWord> words;
  bool overflow = false;
  size_t word = 0;
  bool tried_old = false;
  bool damaged = false;
  std::vector<std::byte> buf;
};

struct ErdaPath::PutOp {
  rpc::NodeId node = 0;
  uint64_t term = 0;
  uint32_t shard = 0;
  std::string key, value;
  Done done;
  uint64_t reservation = 0;
  std::vector<std::byte> entry;  // the encoded block, alive until its WRITE completes
  uint64_t flush_word = 0;       // where the flushing READ lands
  int waiting = 0;               // completions still due (WRITE, READ)
  bool failed = false;
};

ErdaPath::ErdaPath(rpc::PeerCaller* peers, fabric::Endpoint* ep, runtime::Executor* exec, ErdaPathOptions options)
    : peers_(peers), ep_(ep), exec_(exec), options_(options), ops_(ep) {}

ErdaPath::~ErdaPath() = default;

bool ErdaPath::TakesPut(size_t key_len, size_t value_len) const {
  return log::kHeaderSize + key_len + value_len <= kMaxOneSidedEntry;
}

ErdaPath::Node& ErdaPath::NodeOf(rpc::NodeId node) {
  auto& n = nodes_[node];
  if (!n) n = std::make_unique<Node>();
  return *n;
}

bool ErdaPath::Poll() { return ops_.Poll(); }

Status ErdaPath::PostRead(Node& n, void* dst, size_t len, const fabric::RemoteMemory& mem, uint64_t offset,
                          std::function<void(Code)> fn) {
  SLIP_RETURN_IF_ERROR(ops_.Read(n.peer, dst, len, mem, offset, std::move(fn)));
  ++stats_.reads;
  return Status::Ok();
}

Status ErdaPath::PostWrite(Node& n, const void* src, size_t len, const fabric::RemoteMemory& mem, uint64_t offset,
                           std::function<void(Code)> fn) {
  SLIP_RETURN_IF_ERROR(ops_.Write(n.peer, src, len, mem, offset, std::move(fn)));
  ++stats_.writes;
  stats_.written_bytes += len;
  return Status::Ok();
}

void ErdaPath::WithGrant(rpc::NodeId node, uint64_t term, uint32_t shard, const Done& done,
                         std::function<void()> then) {
  Node& known = NodeOf(node);
  if (auto g = known.grants.find(shard);
      known.have_layout && g != known.grants.end() && g->second.term == term && exec_->Now() < g->second.until) {
    // Never inside the caller's call.
    return exec_->Post(std::move(then));
  }
  ++stats_.grants;
  const runtime::Nanos sent = exec_->Now();
  ++stats_.round_trips;
  peers_->Call(rpc::Target{node, shard}, static_cast<uint16_t>(proto::Method::kErdaGrant), proto::Encode(proto::ErdaGrantRequest{term, shard}),
               [this, node, shard, sent, done, then = std::move(then)](Result<rpc::PeerResponse> r) mutable {
                 if (!r.ok() || r->status != Code::kOk) return done(std::move(r));
                 auto g = proto::DecodeErdaGrantResponse(proto::AsBytes(r->payload));
                 if (!g.ok()) return done(g.status());
                 Node& n = NodeOf(node);
                 if (!n.have_layout || n.address != g->address) {
                   auto peer = ep_->AddPeer(g->address);
                   if (!peer.ok()) return done(peer.status());
                   n.peer = *peer;
                   n.address.assign(g->address);
                 }
                 n.have_layout = true;
                 n.area = fabric::RemoteMemory{g->area_addr, g->area_key, g->area_len};
                 n.table = fabric::RemoteMemory{g->table_addr, g->table_key, g->table_len};
                 n.area_offset = g->area_offset;
                 n.num_buckets = g->num_buckets;
                 n.max_entry_bytes = g->max_entry_bytes;
                 n.max_read = static_cast<runtime::Nanos>(g->max_read_ns);
                 // Counted from when the request left: the node's lease
                 // covered at least this much from when it answered.
                 n.grants[shard] = Node::Grant{g->term, sent + static_cast<runtime::Nanos>(g->grant_ns)};
                 then();
               });
}

// ---------------------------------------------------------------------------
// GET

void ErdaPath::Get(rpc::NodeId node, uint64_t term, uint32_t shard, const std::string& key, Done done) {
  ++stats_.gets;
  auto op = std::make_shared<GetOp>();
  op->node = node;
  op->term = term;
  op->shard = shard;
  op->key = key;
  op->hash = HashKey(key);
  op->done = std::move(done);
  WithGrant(node, term, shard, op->done, [this, op] { ReadWindow(op); });
}

void ErdaPath::ReadWindow(std::shared_ptr<GetOp> op) {
  Node& n = NodeOf(op->node);
  if (n.num_buckets == 0) return FallbackGet(op);  // the node has no table to read (erda-raw)
  op->started = exec_->Now();
  op->grant_until = n.grants[op->shard].until;
  op->buf.assign(erda::kWindowBytes, std::byte{0});
  const uint64_t offset = uint64_t{erda::BucketTable::HomeBucketOf(op->hash, n.num_buckets)} * erda::kBucketBytes;
  ++stats_.round_trips;
  Status s = PostRead(n, op->buf.data(), op->buf.size(), n.table, offset, [this, op](Code c) {
    if (c != Code::kOk) return FallbackGet(op);
    op->words = erda::BucketTable::WordsIn(op->buf, op->hash);
    op->overflow = erda::BucketTable::OverflowIn(op->buf);
    NextVersion(op);
  });
  if (!s.ok()) FallbackGet(op);
}

void ErdaPath::NextVersion(std::shared_ptr<GetOp> op) {
  Node& n = NodeOf(op->node);
  while (op->word < op->words.size()) {
    const erda::IndexWord w = op->words[op->word];
    const uint64_t units = op->tried_old ? w.old_offset() : w.new_offset();
    const uint64_t at = units * erda::IndexWord::kUnit;
    if (units != 0 && at >= n.area_offset && at + log::kHeaderSize <= n.area_offset + n.area.len) {
      const size_t len = static_cast<size_t>(std::min<uint64_t>(options_.first_read, n.area_offset + n.area.len - at));
      return ReadEntry(op, at, len);
    }
    if (!op->tried_old) {
      op->tried_old = true;
    } else {
      ++op->word;
      op->tried_old = false;
    }
  }
  // Nothing of the key checked out. Absent only if every version was
  // readable and the window has no key left out of the table.
  if (op->damaged || op->overflow) return FallbackGet(op);
  AnswerGet(op, Code::kNotFound, 0, {});
}

void ErdaPath::ReadEntry(std::shared_ptr<GetOp> op, uint64_t region_offset, size_t len) {
  Node& n = NodeOf(op->node);
  op->buf.assign(len, std::byte{0});
  ++stats_.round_trips;
  Status s = PostRead(n, op->buf.data(), len, n.area, region_offset - n.area_offset,
                      [this, op, region_offset, len](Code c) {
                        if (c != Code::kOk) return FallbackGet(op);
                        OnEntry(op, region_offset, len);
                      });
  if (!s.ok()) FallbackGet(op);
}

void ErdaPath::OnEntry(std::shared_ptr<GetOp> op, uint64_t region_offset, size_t requested) {
  Node& n = NodeOf(op->node);
  auto d = log::DecodeBlock(op->buf, options_.limits);
  if (!d.status.ok() && d.error == log::DecodeError::kTruncated) {
    // A block longer than the first READ: fetch it whole.
    const uint64_t bytes = log::IntactHeaderBlockBytes(op->buf, options_.limits);
    if (bytes > requested && region_offset + bytes <= n.area_offset + n.area.len) {
      return ReadEntry(op, region_offset, static_cast<size_t>(bytes));
    }
  }
  if (d.status.ok() && d.block.seq == 0 && (d.block.type == log::EntryType::kPut || d.block.type == log::EntryType::kDel)) {
    const log::BlockView& b = d.block;
    if (!b.single()) return FallbackGet(op);  // a multi-block entry: the server assembles it
    if (b.key() != op->key) {
      // Another key's entry (a fingerprint collision, or a place reused
      // since): not a version of ours; the next candidate.
      ++op->word;
      op->tried_old = false;
      return NextVersion(op);
    }
    if (op->tried_old) ++stats_.old_versions;
    if (b.type == log::EntryType::kDel) return AnswerGet(op, Code::kNotFound, b.version, {});
    return AnswerGet(op, Code::kOk, b.version, std::string(b.value()));
  }
  // Torn, zeroed (freed by the cleaner) or corrupt: try the old version.
  op->damaged = true;
  if (!op->tried_old) {
    op->tried_old = true;
  } else {
    ++op->word;
    op->tried_old = false;
  }
  NextVersion(op);
}

void ErdaPath::AnswerGet(std::shared_ptr<GetOp> op, Code status, uint64_t version, std::string value) {
  const runtime::Nanos now = exec_->Now();
  // The READs were served before `now`: inside the grant, and fast enough
  // that no segment they touched can have been freed and reused.
  if (now >= op->grant_until || now - op->started > NodeOf(op->node).max_read) return FallbackGet(op);
  ++stats_.one_sided_gets;
  op->done(Answer(status, op->term, version, value));
}

void ErdaPath::FallbackGet(std::shared_ptr<GetOp> op) {
  ++stats_.fallback_gets;
  ++stats_.round_trips;
  peers_->Call(rpc::Target::AnyWorker(op->node, op->shard), static_cast<uint16_t>(proto::Method::kGet),
               proto::Encode(proto::KvRequest{op->term, op->shard, op->key, {}}),
               [op](Result<rpc::PeerResponse> r) { op->done(std::move(r)); });
}

// ---------------------------------------------------------------------------
// PUT

void ErdaPath::Put(rpc::NodeId node, uint64_t term, uint32_t shard, const std::string& key, const std::string& value,
                   Done done) {
  ++stats_.puts;
  auto op = std::make_shared<PutOp>();
  op->node = node;
  op->term = term;
  op->shard = shard;
  op->key = key;
  op->value = value;
  op->done = std::move(done);
  // The grant brings the node's layout (where to write); writes themselves
  // are checked by the node at RESERVE and COMMIT.
  WithGrant(node, term, shard, op->done, [this, op] { Reserve(op); });
}

void ErdaPath::Reserve(std::shared_ptr<PutOp> op) {
  const runtime::Nanos sent = exec_->Now();
  ++stats_.round_trips;
  peers_->Call(rpc::Target{op->node, op->shard}, static_cast<uint16_t>(proto::Method::kErdaReserve),
               proto::Encode(proto::ErdaReserveRequest{op->term, op->shard, static_cast<uint32_t>(op->value.size()), op->key}),
               [this, op, sent](Result<rpc::PeerResponse> r) {
                 if (r.ok() && r->status == Code::kTooLarge) return FallbackPut(op);
                 if (!r.ok() || r->status != Code::kOk) return op->done(std::move(r));
                 auto res = proto::DecodeErdaReserveResponse(proto::AsBytes(r->payload));
                 if (!res.ok()) return op->done(res.status());
                 if (exec_->Now() - sent > static_cast<runtime::Nanos>(res->write_within_ns)) {
                   // Too late to write: the node may give the place up.
                   return op->done(Answer(Code::kUnavailable, op->term, 0, "the reservation came back too late to write"));
                 }
                 WriteEntry(op, *res);
               });
}

void ErdaPath::WriteEntry(std::shared_ptr<PutOp> op, const proto::ErdaReserveResponse& r) {
  Node& n = NodeOf(op->node);
  const log::EntryMeta meta{log::EntryType::kPut, static_cast<uint16_t>(op->shard), r.version};
  auto plan = log::PlanEntry(op->key.size(), op->value.size(), n.max_entry_bytes);
  if (!plan.ok() || plan->cnt != 1 || r.area_offset + plan->total_bytes > n.area.len) {
    // The node reserved what it was asked for; a mismatch means our view of
    // its layout is off. The reservation expires unused.
    return op->done(Answer(Code::kUnavailable, op->term, 0, "the reserved place does not fit the entry"));
  }
  op->reservation = r.reservation;
  op->entry = log::EncodeEntry(meta, op->key, op->value, *plan);
  op->waiting = 2;
  auto step = [this, op](Code c) {
    if (c != Code::kOk) op->failed = true;
    if (--op->waiting > 0) return;
    if (op->failed) {
      // Some of the entry may have landed; it is adopted only by COMMIT,
      // which we do not send: the write did not happen, but we cannot be
      // sure the node did not see it — outcome unknown.
      return op->done(Answer(Code::kUnavailable, op->term, 0, "the one-sided write failed"));
    }
    Commit(op);
  };
  ++stats_.round_trips;
  Status s = PostWrite(n, op->entry.data(), op->entry.size(), n.area, r.area_offset, step);
  if (!s.ok()) return op->done(Answer(Code::kUnavailable, op->term, 0, "one-sided write refused: " + s.ToString()));
  // On the same connection: completes once the WRITE is placed and persistent.
  s = PostRead(n, &op->flush_word, sizeof(op->flush_word), n.area, r.area_offset, step);
  if (!s.ok()) {
    op->failed = true;
    --op->waiting;  // the WRITE's completion finishes the op
  }
}

void ErdaPath::Commit(std::shared_ptr<PutOp> op) {
  ++stats_.one_sided_puts;
  ++stats_.round_trips;
  peers_->Call(rpc::Target{op->node, op->shard}, static_cast<uint16_t>(proto::Method::kErdaCommit),
               proto::Encode(proto::ErdaCommitRequest{op->term, op->shard, op->reservation, op->key}),
               [op](Result<rpc::PeerResponse> r) { op->done(std::move(r)); });
}

void ErdaPath::FallbackPut(std::shared_ptr<PutOp> op) {
  ++stats_.fallback_puts;
  ++stats_.round_trips;
  peers_->Call(rpc::Target{op->node, op->shard}, static_cast<uint16_t>(proto::Method::kPut),
               proto::Encode(proto::KvRequest{op->term, op->shard, op->key, op->value}),
               [op](Result<rpc::PeerResponse> r) { op->done(std::move(r)); });
}

}  // namespace slip::client
