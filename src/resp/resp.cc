#include "resp/resp.h"

#include <cctype>
#include <charconv>

namespace slip::resp {
namespace {

// A length line's number: an optional '-', then 1..18 digits (no sign
// alone, no spaces, nothing after).
std::optional<int64_t> ParseLength(std::string_view s) {
  const bool neg = !s.empty() && s[0] == '-';
  const std::string_view digits = neg ? s.substr(1) : s;
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return neg ? -v : v;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool Blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

}  // namespace

void Parser::Feed(std::string_view bytes) {
  if (failed_) return;
  // Reclaim what was taken out once it outweighs what is left.
  if (pos_ > 4096 && pos_ * 2 > buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes);
}

Status Parser::Fail(std::string what) {
  failed_ = Status::InvalidArgument("Protocol error: " + std::move(what));
  pending_.clear();
  pending_bytes_ = 0;
  return *failed_;
}

Result<std::optional<std::string_view>> Parser::Line(bool inline_line) {
  const size_t nl = buf_.find('\n', pos_);
  if (nl == std::string::npos) {
    if (buf_.size() - pos_ > limits_.max_line) {
      return Fail(inline_line ? "too big inline request" : "too big count string");
    }
    return std::optional<std::string_view>();
  }
  if (nl - pos_ > limits_.max_line) return Fail(inline_line ? "too big inline request" : "too big count string");
  size_t end = nl;
  if (end > pos_ && buf_[end - 1] == '\r') {
    --end;
  } else if (!inline_line) {
    return Fail("a length line must end in CRLF");
  }
  std::string_view line(buf_.data() + pos_, end - pos_);
  pos_ = nl + 1;
  return std::optional<std::string_view>(line);
}

Result<std::optional<std::string_view>> Parser::LengthLine() {
  const size_t start = pos_;
  ++pos_;  // the '*' or '$'
  auto line = Line(false);
  if (line.ok() && !*line) pos_ = start;  // again from its prefix when more arrived
  return line;
}

Result<std::optional<Command>> Parser::Next() {
  if (failed_) return *failed_;
  for (;;) {
    if (remaining_ == 0) {
      if (pos_ == buf_.size()) return std::optional<Command>();
      if (buf_[pos_] != '*') {
        SLIP_ASSIGN_OR_RETURN(std::optional<std::string_view> line, Line(true));
        if (!line) return std::optional<Command>();
        auto args = SplitInline(*line);
        if (!args.ok()) return Fail("unbalanced quotes in request");
        if (args->empty()) continue;  // a blank line: no command
        // (Found by the fuzzer: an inline line within max_line can still
        // hold more arguments than a multi-bulk command may.)
        if (args->size() > limits_.max_args) return Fail("too many arguments in inline request");
        return std::optional<Command>(std::move(*args));
      }
      SLIP_ASSIGN_OR_RETURN(std::optional<std::string_view> line, LengthLine());
      if (!line) return std::optional<Command>();
      const std::optional<int64_t> n = ParseLength(*line);
      if (!n || *n > static_cast<int64_t>(limits_.max_args)) return Fail("invalid multibulk length");
      if (*n <= 0) continue;  // *0 and *-1 (a null array): no command, as in Redis
      remaining_ = static_cast<size_t>(*n);
      pending_.clear();
      pending_bytes_ = 0;
      pending_.reserve(std::min<size_t>(remaining_, 1024));
      continue;
    }
    if (bulk_len_ < 0) {
      if (pos_ == buf_.size()) return std::optional<Command>();
      if (buf_[pos_] != '$') {
        const char c = buf_[pos_];
        return Fail(std::string("expected '$', got '") + (std::isprint(static_cast<unsigned char>(c)) ? c : '?') + "'");
      }
      SLIP_ASSIGN_OR_RETURN(std::optional<std::string_view> line, LengthLine());
      if (!line) return std::optional<Command>();
      const std::optional<int64_t> len = ParseLength(*line);
      if (!len || *len < 0 || static_cast<uint64_t>(*len) > limits_.max_bulk) return Fail("invalid bulk length");
      bulk_len_ = *len;
      // Room for the whole argument now rather than by doublings as it
      // trickles in: its length was checked above.
      buf_.reserve(pos_ + static_cast<size_t>(bulk_len_) + 2);
    }
    const auto len = static_cast<size_t>(bulk_len_);
    if (buf_.size() - pos_ < len + 2) return std::optional<Command>();
    if (buf_[pos_ + len] != '\r' || buf_[pos_ + len + 1] != '\n') return Fail("a bulk string must end in CRLF");
    pending_.emplace_back(buf_, pos_, len);
    pending_bytes_ += len;
    pos_ += len + 2;
    bulk_len_ = -1;
    if (--remaining_ == 0) {
      pending_bytes_ = 0;
      return std::optional<Command>(std::move(pending_));
    }
  }
}

Result<Command> SplitInline(std::string_view line) {
  Command out;
  size_t i = 0;
  const size_t n = line.size();
  for (;;) {
    while (i < n && Blank(line[i])) ++i;
    if (i == n) return out;
    std::string arg;
    if (line[i] == '"') {
      ++i;
      for (;; ++i) {
        if (i == n) return Status::InvalidArgument("unbalanced quotes");
        const char c = line[i];
        if (c == '"') break;
        if (c == '\\' && i + 1 < n) {
          const char e = line[++i];
          if (e == 'x' && i + 2 < n && HexValue(line[i + 1]) >= 0 && HexValue(line[i + 2]) >= 0) {
            arg.push_back(static_cast<char>(HexValue(line[i + 1]) * 16 + HexValue(line[i + 2])));
            i += 2;
          } else {
            switch (e) {
              case 'n': arg.push_back('\n'); break;
              case 'r': arg.push_back('\r'); break;
              case 't': arg.push_back('\t'); break;
              case 'b': arg.push_back('\b'); break;
              case 'a': arg.push_back('\a'); break;
              default: arg.push_back(e); break;
            }
          }
          continue;
        }
        arg.push_back(c);
      }
      ++i;  // the closing quote, which must end the argument
      if (i < n && !Blank(line[i])) return Status::InvalidArgument("unbalanced quotes");
    } else if (line[i] == '\'') {
      ++i;
      for (;; ++i) {
        if (i == n) return Status::InvalidArgument("unbalanced quotes");
        if (line[i] == '\\' && i + 1 < n && line[i + 1] == '\'') {
          arg.push_back('\'');
          ++i;
          continue;
        }
        if (line[i] == '\'') break;
        arg.push_back(line[i]);
      }
      ++i;
      if (i < n && !Blank(line[i])) return Status::InvalidArgument("unbalanced quotes");
    } else {
      while (i < n && !Blank(line[i])) arg.push_back(line[i++]);
    }
    out.push_back(std::move(arg));
  }
}

void AppendSimple(std::string* out, std::string_view s) {
  out->push_back('+');
  for (char c : s) out->push_back(c == '\r' || c == '\n' ? ' ' : c);
  out->append("\r\n");
}

void AppendError(std::string* out, std::string_view s) {
  out->push_back('-');
  for (char c : s) out->push_back(c == '\r' || c == '\n' ? ' ' : c);
  out->append("\r\n");
}

void AppendInteger(std::string* out, int64_t v) {
  out->push_back(':');
  out->append(std::to_string(v));
  out->append("\r\n");
}

void AppendBulk(std::string* out, std::string_view s) {
  out->push_back('$');
  out->append(std::to_string(s.size()));
  out->append("\r\n");
  out->append(s);
  out->append("\r\n");
}

void AppendNull(std::string* out) { out->append("$-1\r\n"); }

void AppendArray(std::string* out, size_t n) {
  out->push_back('*');
  out->append(std::to_string(n));
  out->append("\r\n");
}

void AppendCommand(std::string* out, const Command& args) {
  AppendArray(out, args.size());
  for (const std::string& a : args) AppendBulk(out, a);
}

}  // namespace slip::resp
