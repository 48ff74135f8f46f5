// Log blocks as a recovery scan meets them (docs/formats/log_entry.md), an
// Erda object (docs/formats/erda.md) and a Tailwind buffer's scan. The
// selector byte picks which.
#include "erda/object.h"
#include "fuzz/fuzz.h"
#include "log/entry.h"
#include "replication/tailwind/format.h"

using namespace slip;

namespace {
const log::Limits kLimits{.max_key = 1024, .max_value = 1 << 16};
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto in = fuzz::Bytes(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      // Walk the buffer: a good block advances by its size, anything else
      // by the alignment (as the scan past a hole does); blocks of
      // multi-block entries go to an assembler in the order met.
      log::Assembler assembler;
      for (size_t pos = 0; pos + log::kHeaderSize <= in.size();) {
        auto d = log::DecodeBlock(in.subspan(pos), kLimits);
        const uint64_t intact = log::IntactHeaderBlockBytes(in.subspan(pos), kLimits);
        if (!d.status.ok()) {
          pos += log::kAlign;
          continue;
        }
        const log::BlockView& b = d.block;
        fuzz::Check(b.encoded_bytes > 0 && pos + b.encoded_bytes <= in.size(), "block runs past the buffer");
        fuzz::Check(intact == b.encoded_bytes, "a decoded block is not intact");
        fuzz::Check(b.seq < b.cnt, "block seq outside its entry");
        fuzz::Check(b.chunk.data() >= in.data() && b.chunk.data() + b.chunk.size() <= in.data() + in.size(),
                    "chunk outside the buffer");
        if (b.single()) {
          fuzz::Check(b.key().size() == b.key_len && b.value().size() == b.value_len, "key/value lengths");
        } else if (auto e = assembler.Add(b); e.ok()) {
          fuzz::Check(e->key.size() == b.key_len && e->value.size() == b.value_len, "assembled lengths");
        }
        pos += b.encoded_bytes;
      }
      break;
    }
    case 1: {
      auto o = erda::DecodeObject(in, kLimits);
      if (!o.ok()) break;
      const std::string again = erda::EncodeObject(o->type, o->key, o->value);
      auto p = erda::DecodeObject(fuzz::Bytes(again), kLimits);
      fuzz::Check(p.ok() && p->key == o->key && p->value == o->value, "an object re-encodes differently");
      break;
    }
    case 2: {
      const size_t n = replication::ScanTailwindBuffer(in, kLimits);
      fuzz::Check(n <= in.size(), "a Tailwind prefix longer than its buffer");
      break;
    }
  }
  return 0;
}

std::vector<std::string> SlipFuzzSeeds() {
  std::vector<std::string> seeds;
  std::string blocks;
  for (uint64_t v = 1; v <= 3; ++v) {
    const std::string value(v * 100, 'v');
    auto layout = log::PlanEntry(3, value.size(), v == 3 ? 128 : 4096);
    if (!layout.ok()) continue;
    auto e = log::EncodeEntry({log::EntryType::kPut, 1, v}, "key", value, *layout);
    blocks.append(reinterpret_cast<const char*>(e.data()), e.size());
  }
  seeds.push_back(fuzz::Tagged(0, blocks));
  seeds.push_back(fuzz::Tagged(1, erda::EncodeObject(erda::ObjectType::kPut, "key", "value")));
  // A Tailwind transfer: entries, then the checksum block closing them.
  replication::TailwindChain chain;
  std::string tw = blocks;
  chain.Absorb(fuzz::Bytes(tw));
  std::string sum(replication::kChecksumBlockBytes, '\0');
  chain.EncodeChecksum(reinterpret_cast<std::byte*>(sum.data()));
  seeds.push_back(fuzz::Tagged(2, tw + sum));
  return seeds;
}
