// Erda's 8-byte index word (docs/papers/erda.md §2.1, §6.2): both the new
// and the old offset of a key's object, switched by one atomic store.
//
//   bit 63      flip: 1 = field 1 holds the new offset, 0 = field 2 does
//   bits 62..32 field 1 (31 bits)
//   bits 31..1  field 2 (31 bits)
//   bit 0       valid: the word is an entry only with this bit set, so the
//               all-zero word (a create that never became persistent) reads
//               as "absent", never as offset 0 (the paper's gap G4)
//
// Offsets count 8-byte units from the start of the key's log region (every
// object is 8-byte aligned), so a region addresses 16 GiB. Offset 0 is never
// an object: in the old slot it means "no older version".
//
// An update flips the bit and writes the new offset into the field the new
// flip value selects, so the former new offset becomes the old one without
// being written again: only the bit and one field change (4 of the 8 bytes,
// in the data-comparison-write model Table 1 counts).
#pragma once

#include <cstdint>

namespace slip::erda {

class IndexWord {
 public:
  static constexpr uint32_t kMaxOffset = (1u << 31) - 1;  // in 8-byte units
  static constexpr uint64_t kUnit = 8;

  constexpr IndexWord() = default;
  constexpr explicit IndexWord(uint64_t raw) : raw_(raw) {}

  // A fresh entry: `new_offset` new, no old. REQUIRES: 0 < new_offset <= kMaxOffset.
  static constexpr IndexWord Create(uint32_t new_offset) {
    return IndexWord((uint64_t{1} << 63) | (uint64_t{new_offset} << 32) | 1);
  }

  constexpr uint64_t raw() const { return raw_; }
  constexpr bool valid() const { return (raw_ & 1) != 0; }
  constexpr bool flip() const { return (raw_ >> 63) != 0; }
  constexpr uint32_t field1() const { return static_cast<uint32_t>(raw_ >> 32) & kMaxOffset; }
  constexpr uint32_t field2() const { return static_cast<uint32_t>(raw_ >> 1) & kMaxOffset; }
  constexpr uint32_t new_offset() const { return flip() ? field1() : field2(); }
  constexpr uint32_t old_offset() const { return flip() ? field2() : field1(); }

  // The word after an update to `new_offset`: the current new offset becomes
  // the old one. REQUIRES: valid(), 0 < new_offset <= kMaxOffset.
  constexpr IndexWord Updated(uint32_t new_offset) const {
    const bool f = !flip();
    return With(f, f ? new_offset : field1(), f ? field2() : new_offset);
  }
  // The word with its new offset replaced (the old one kept, no flip): what
  // cleaning writes when it moves the newest version, and what the paper's
  // reader-driven rollback writes (new := old).
  constexpr IndexWord WithNew(uint32_t new_offset) const {
    return flip() ? With(true, new_offset, field2()) : With(false, field1(), new_offset);
  }
  constexpr IndexWord WithOld(uint32_t old_offset) const {
    return flip() ? With(true, field1(), old_offset) : With(false, old_offset, field2());
  }

  friend constexpr bool operator==(IndexWord a, IndexWord b) { return a.raw_ == b.raw_; }

 private:
  static constexpr IndexWord With(bool flip, uint32_t f1, uint32_t f2) {
    return IndexWord((uint64_t{flip} << 63) | (uint64_t{f1 & kMaxOffset} << 32) |
                     (uint64_t{f2 & kMaxOffset} << 1) | 1);
  }

  uint64_t raw_ = 0;
};

}  // namespace slip::erda
