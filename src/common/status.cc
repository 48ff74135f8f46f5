#include "common/status.h"

namespace slip {

std::string_view CodeName(Code c) {
  switch (c) {
    case Code::kOk: return "OK";
    case Code::kNotFound: return "NotFound";
    case Code::kCorruption: return "Corruption";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kIoError: return "IoError";
    case Code::kBusy: return "Busy";
    case Code::kTimeout: return "Timeout";
    case Code::kUnavailable: return "Unavailable";
    case Code::kStaleTerm: return "StaleTerm";
    case Code::kNoSpace: return "NoSpace";
    case Code::kTooLarge: return "TooLarge";
    case Code::kAborted: return "Aborted";
    case Code::kNotSupported: return "NotSupported";
    case Code::kUnauthenticated: return "Unauthenticated";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(CodeName(code_));
  if (!message_.empty()) {
    s += ": ";
    s += message_;
  }
  return s;
}

}  // namespace slip
