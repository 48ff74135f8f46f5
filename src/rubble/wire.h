// The messages of RubbleDB's chains in a cluster (docs/formats/
// rubble_messages.md): what a replica passes to its successor (a write or
// an edit), how a head links a follower and seeds it, and a follower's
// report of the slots it holds. Values, no I/O; every decoder reports
// anything malformed as Corruption and never reads past its input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "lsm/db.h"

namespace slip::rubble {

// Every message names its shard, the sender's configuration term and the
// sender.
struct ChainHeader {
  uint32_t shard = 0;
  uint64_t term = 0;
  uint32_t sender = 0;
  bool operator==(const ChainHeader&) const = default;
};

// RUBBLE_APPLY: a write (its batch, sequence set, and the ticket saying
// where the head put it) or an edit, passed down the chain.
struct ChainItem {
  ChainHeader header;
  enum class Kind : uint8_t { kWrite = 1, kEdit = 2 };
  Kind kind = Kind::kWrite;
  lsm::WriteBatch batch;    // kWrite
  lsm::WriteTicket ticket;  // kWrite
  lsm::VersionEdit edit;    // kEdit
};
std::string EncodeItem(const ChainItem& item);
Result<ChainItem> DecodeItem(std::string_view bytes);

// RUBBLE_LINK: a head asks a follower where its slot image is. `fresh`:
// start over — a new, empty image of `slots` and an unseeded engine (a
// replica about to be seeded).
struct LinkRequest {
  ChainHeader header;
  bool fresh = false;
  uint32_t slot_count = 0;
  uint64_t slot_bytes = 0;
};
std::string EncodeLink(const LinkRequest& r);
Result<LinkRequest> DecodeLink(std::string_view bytes);

// Its answer: the image's path, and how far the follower is (its readable
// writes and applied edits; a fresh one: 0, 0).
struct LinkResponse {
  std::string image;
  uint64_t last_sequence = 0, last_edit = 0;
  bool operator==(const LinkResponse&) const = default;
};
std::string EncodeLinkResponse(const LinkResponse& r);
Result<LinkResponse> DecodeLinkResponse(std::string_view bytes);

// RUBBLE_SEED: part of a seed (EncodeSeed's bytes) at `offset`; the part
// ending at `total` makes the follower seed itself from the whole.
struct SeedChunk {
  ChainHeader header;
  uint64_t seed_id = 0;
  uint64_t offset = 0, total = 0;
  std::string_view bytes;
};
std::string EncodeSeedChunk(const SeedChunk& c);
Result<SeedChunk> DecodeSeedChunk(std::string_view bytes);

std::string EncodeSeed(const lsm::FollowerSeed& seed);
Result<lsm::FollowerSeed> DecodeSeed(std::string_view bytes);

// RUBBLE_SLOTS: a follower's tables are in exactly `slots`, with every
// edit up to `watermark` applied (rubble/ledger.h). Reports are numbered.
struct SlotReport {
  ChainHeader header;
  uint64_t number = 0, watermark = 0;
  std::vector<uint32_t> slots;
  bool operator==(const SlotReport&) const = default;
};
std::string EncodeSlotReport(const SlotReport& r);
Result<SlotReport> DecodeSlotReport(std::string_view bytes);

}  // namespace slip::rubble
