// Arena: bump allocation for data that lives and dies together — a
// MemTable's records and skiplist nodes. Each allocation costs a pointer
// bump instead of a malloc, and freeing is one pass over the blocks when the
// arena goes.
//
// Small requests are carved from blocks of kBlockSize bytes. A request too
// big to fit a block without wasting much of it (over a quarter) gets a block
// of its own, and the current block keeps serving small requests, so a large
// value wastes at most the alignment slack.
//
// Thread-safety: Allocate* need external synchronisation (one writer).
// MemoryUsage may be read from any thread at any time.
#pragma once

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace slip::lsm {

class Arena {
 public:
  static constexpr size_t kBlockSize = 4096;

  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // `bytes` > 0; the result has no particular alignment (records of bytes).
  char* Allocate(size_t bytes) {
    assert(bytes > 0);
    if (bytes <= remaining_) {
      char* p = ptr_;
      ptr_ += bytes;
      remaining_ -= bytes;
      return p;
    }
    return AllocateFallback(bytes, 1);
  }

  // `bytes` > 0; `align` a power of two. For objects (nodes with atomics).
  char* AllocateAligned(size_t bytes, size_t align = alignof(std::max_align_t)) {
    assert(bytes > 0 && align > 0 && (align & (align - 1)) == 0);
    const size_t pad = Padding(ptr_, align);
    if (bytes + pad <= remaining_) {
      char* p = ptr_ + pad;
      ptr_ += bytes + pad;
      remaining_ -= bytes + pad;
      return p;
    }
    return AllocateFallback(bytes, align);
  }

  // Bytes held from the system (blocks and their bookkeeping), not bytes
  // handed out: what the owner pays for, and so what decides when to seal.
  size_t MemoryUsage() const { return usage_.load(std::memory_order_relaxed); }

 private:
  static size_t Padding(const char* p, size_t align) {
    return (align - (reinterpret_cast<uintptr_t>(p) & (align - 1))) & (align - 1);
  }

  char* NewBlock(size_t bytes) {
    // for_overwrite: zeroing memory about to be written is wasted work.
    blocks_.push_back(std::make_unique_for_overwrite<char[]>(bytes));
    usage_.store(usage_.load(std::memory_order_relaxed) + bytes + sizeof(blocks_[0]), std::memory_order_relaxed);
    return blocks_.back().get();
  }

  char* AllocateFallback(size_t bytes, size_t align) {
    // Enough for any padding; new[] is already aligned to the default new
    // alignment, which covers every `align` the engine asks for.
    const size_t worst = bytes + align - 1;
    if (worst > kBlockSize / 4) {
      char* block = NewBlock(worst);
      return block + Padding(block, align);
    }
    // The rest of the current block (< a quarter of it) is abandoned.
    ptr_ = NewBlock(kBlockSize);
    remaining_ = kBlockSize;
    const size_t pad = Padding(ptr_, align);
    char* p = ptr_ + pad;
    ptr_ += bytes + pad;
    remaining_ -= bytes + pad;
    return p;
  }

  char* ptr_ = nullptr;
  size_t remaining_ = 0;
  std::vector<std::unique_ptr<char[]>> blocks_;
  // Atomic only so readers of the owner (ApproximateBytes) may ask while
  // the writer allocates; the writer alone stores it.
  std::atomic<size_t> usage_{0};
};

}  // namespace slip::lsm
