// A linearizability checker for histories of a key-value store (Wing & Gong,
// with Lowe's memoisation of visited states; keys are independent registers,
// so each key's sub-history is checked on its own — P-compositionality).
//
// An operation is a PUT, GET or DEL of one key with its invocation and
// response times (any clock where "a returned before b was invoked" means
// a.ret < b.inv) and what the client saw:
//   - PUT: acknowledged, or unknown (Timeout/Unavailable: it may take effect
//     at any point after its invocation, or never). A PUT refused outright
//     (StaleTerm, TooLarge) wrote nothing and is left out of the history.
//   - GET: the value read, or absent.
//   - DEL: found (deleted a value) or not found; or unknown.
//   - PUT_IF_ABSENT / PUT_IF_PRESENT (SET NX / XX): written (`found`) or
//     not (the condition did not hold: the register unchanged); or unknown
//     (then it wrote if, where it took effect, its condition held).
// A history is linearizable when some order of the acknowledged operations
// and some subset of the unknown ones, consistent with real time, explains
// every response with a sequential register.
//
// The search is exponential in the worst case; each key gets a budget of
// explored states, and a key that exhausts it is reported as unchecked, never
// as a violation.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace slip::sim {

struct Operation {
  enum class Kind : uint8_t { kPut, kGet, kDel, kPutIfAbsent, kPutIfPresent };
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

  Kind kind = Kind::kGet;
  std::string key;
  // PUT: the value written. GET: the value read, nullopt = absent.
  std::optional<std::string> value;
  bool found = false;    // DEL: the key had a value; PUT_IF_*: it wrote
  bool unknown = false;  // PUT/DEL: outcome unknown (no response, or an indeterminate error)
  int64_t invoke = 0;
  int64_t ret = 0;       // ignored when unknown
  uint32_t client = 0;
  // DEL: done, but it did not say whether the key had a value (DINOMO's
  // blind tombstone). Last, so that positional initialisers stay valid.
  bool found_unknown = false;
};

struct CheckResult {
  bool linearizable = true;
  uint64_t keys = 0, operations = 0;
  uint64_t unchecked_keys = 0;  // budget exhausted: no verdict
  uint64_t states = 0;          // explored, all keys
  std::string violation;        // the first non-linearizable key and its history
};

CheckResult CheckLinearizable(const std::vector<Operation>& history,
                              uint64_t state_budget_per_key = 2'000'000);

// A campaign's verdict on what its clients recorded: operations whose `ret`
// is kLeftOut (refused outright, or a read that got no answer) are dropped,
// the rest checked. "" when linearizable with every key checked, else why
// not. `checked` and `unknown` count what was checked.
inline constexpr int64_t kLeftOut = -1;
std::string Verdict(const std::vector<Operation>& recorded, uint64_t* checked, uint64_t* unknown);

}  // namespace slip::sim
