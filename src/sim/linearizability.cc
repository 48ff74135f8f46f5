#include "sim/linearizability.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace slip::sim {
namespace {

constexpr int kAbsent = -1;

// One key's sub-history, values interned to small ints.
class KeyChecker {
 public:
  KeyChecker(std::vector<const Operation*> ops, uint64_t budget) : ops_(std::move(ops)), budget_(budget) {
    std::sort(ops_.begin(), ops_.end(),
              [](const Operation* a, const Operation* b) { return a->invoke < b->invoke; });
    std::unordered_map<std::string, int> ids;
    for (const Operation* op : ops_) {
      int id = kAbsent;
      if (op->value) id = ids.emplace(*op->value, static_cast<int>(ids.size())).first->second;
      value_id_.push_back(id);
      if (!op->unknown) ++known_;
    }
    words_ = (ops_.size() + 63) / 64;
  }

  // 1 linearizable, 0 not, -1 budget exhausted.
  int Check() {
    std::vector<uint64_t> done(words_, 0);
    return Search(done, kAbsent, 0);
  }
  uint64_t states() const { return states_; }

 private:
  int64_t Ret(size_t i) const { return ops_[i]->unknown ? Operation::kNever : ops_[i]->ret; }
  static bool Has(const std::vector<uint64_t>& s, size_t i) { return s[i / 64] >> (i % 64) & 1; }

  // The register after op i runs on `value`, or nullopt if op i's response
  // cannot be explained there.
  std::optional<int> Apply(size_t i, int value) const {
    const Operation& op = *ops_[i];
    switch (op.kind) {
      case Operation::Kind::kPut:
        return value_id_[i];
      case Operation::Kind::kGet:
        if (value != value_id_[i]) return std::nullopt;
        return value;
      case Operation::Kind::kDel:
        if (!op.unknown && !op.found_unknown && op.found != (value != kAbsent)) return std::nullopt;
        return kAbsent;
      case Operation::Kind::kPutIfAbsent:
      case Operation::Kind::kPutIfPresent: {
        const bool holds = (value == kAbsent) == (op.kind == Operation::Kind::kPutIfAbsent);
        if (!op.unknown && op.found != holds) return std::nullopt;
        return holds ? value_id_[i] : value;
      }
    }
    return std::nullopt;
  }

  int Search(std::vector<uint64_t>& done, int value, size_t linearized_known) {
    if (linearized_known == known_) return 1;
    if (++states_ > budget_) return -1;
    std::string memo(reinterpret_cast<const char*>(done.data()), done.size() * 8);
    memo.append(reinterpret_cast<const char*>(&value), sizeof value);
    if (!seen_.insert(std::move(memo)).second) return 0;

    // Real time: an op may go next only if it was invoked before every
    // pending acknowledged op returned.
    int64_t min_ret = Operation::kNever;
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (!Has(done, i)) min_ret = std::min(min_ret, Ret(i));
    }
    bool exhausted = false;
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (Has(done, i)) continue;
      if (ops_[i]->invoke > min_ret) break;  // sorted by invoke
      auto next = Apply(i, value);
      if (!next) continue;
      done[i / 64] |= uint64_t{1} << (i % 64);
      const int r = Search(done, *next, linearized_known + (ops_[i]->unknown ? 0 : 1));
      done[i / 64] &= ~(uint64_t{1} << (i % 64));
      if (r == 1) return 1;
      if (r == -1) exhausted = true;
    }
    return exhausted ? -1 : 0;
  }

  std::vector<const Operation*> ops_;
  std::vector<int> value_id_;
  size_t known_ = 0, words_ = 0;
  uint64_t budget_, states_ = 0;
  std::unordered_set<std::string> seen_;
};

std::string Describe(const std::vector<const Operation*>& ops) {
  std::vector<const Operation*> sorted = ops;
  std::sort(sorted.begin(), sorted.end(),
            [](const Operation* a, const Operation* b) { return a->invoke < b->invoke; });
  std::string out;
  for (const Operation* op : sorted) {
    out += "  client " + std::to_string(op->client) + " [" + std::to_string(op->invoke) + ", " +
           (op->unknown ? std::string("?") : std::to_string(op->ret)) + "] ";
    switch (op->kind) {
      case Operation::Kind::kPut: out += "put " + op->value.value_or("") + (op->unknown ? " (unknown)" : " ok"); break;
      case Operation::Kind::kGet: out += "get -> " + (op->value ? *op->value : std::string("absent")); break;
      case Operation::Kind::kPutIfAbsent:
      case Operation::Kind::kPutIfPresent:
        out += std::string(op->kind == Operation::Kind::kPutIfAbsent ? "put-if-absent " : "put-if-present ") +
               op->value.value_or("") + (op->unknown ? " (unknown)" : op->found ? " written" : " not written");
        break;
      case Operation::Kind::kDel:
        out += std::string("del -> ") + (op->unknown         ? "unknown"
                                         : op->found_unknown ? "done"
                                         : op->found         ? "found"
                                                             : "not found");
        break;
    }
    out += "\n";
  }
  return out;
}

}  // namespace

CheckResult CheckLinearizable(const std::vector<Operation>& history, uint64_t state_budget_per_key) {
  std::map<std::string, std::vector<const Operation*>> by_key;
  for (const Operation& op : history) by_key[op.key].push_back(&op);
  CheckResult result;
  result.operations = history.size();
  for (auto& [key, ops] : by_key) {
    ++result.keys;
    KeyChecker checker(ops, state_budget_per_key);
    const int verdict = checker.Check();
    result.states += checker.states();
    if (verdict == -1) {
      ++result.unchecked_keys;
    } else if (verdict == 0 && result.linearizable) {
      result.linearizable = false;
      result.violation = "key " + key + " has no linearization:\n" + Describe(ops);
    }
  }
  return result;
}

std::string Verdict(const std::vector<Operation>& recorded, uint64_t* checked, uint64_t* unknown) {
  std::vector<Operation> kept;
  for (const Operation& op : recorded) {
    if (op.ret == kLeftOut) continue;
    kept.push_back(op);
    if (op.unknown) ++*unknown;
  }
  *checked = kept.size();
  const CheckResult r = CheckLinearizable(kept);
  if (!r.linearizable) return "not linearizable: " + r.violation;
  if (r.unchecked_keys != 0) return std::to_string(r.unchecked_keys) + " keys unchecked";
  return "";
}

}  // namespace slip::sim
