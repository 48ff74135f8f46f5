// RESP2, the Redis serialization protocol: the codec of Slipstream's
// Redis-protocol front door, so that redis-cli, redis-benchmark and every
// language's Redis client can talk to a cluster (docs/formats/resp.md).
//
// Requests are commands: arrays of bulk strings
// ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"), or inline lines ("GET k\r\n", what
// telnet sends; quoting as Redis's). Replies are simple strings, errors,
// integers, bulk strings (or null) and arrays.
//
// The parser is incremental: feed bytes as they arrive, take whole commands
// out in order; pipelined commands come out one by one from one Feed. Bytes
// that can never form a command fail the parser for good (a Redis server
// replies with the error and closes the connection). Every length is
// checked against the limits before anything is allocated for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace slip::resp {

struct Limits {
  size_t max_bulk = (16u << 20) + (64u << 10);  // one argument: a largest value, or key
  size_t max_args = 1u << 20;                   // arguments of one command (MSET of many keys)
  size_t max_line = 64u << 10;                  // an inline command, or a length line
};

using Command = std::vector<std::string>;

class Parser {
 public:
  explicit Parser(Limits limits = {}) : limits_(limits) {}
  // Limits for what is parsed from now on (a connection that authenticated
  // may send more than one that has not).
  void set_limits(Limits limits) { limits_ = limits; }

  void Feed(std::string_view bytes);
  // The next whole command; nullopt while more bytes are needed. A protocol
  // error (InvalidArgument, "Protocol error: ...") is final: every later
  // call returns it again.
  Result<std::optional<Command>> Next();
  // Bytes fed and not yet taken out as commands.
  size_t buffered() const { return buf_.size() - pos_; }
  // What the parser holds: those bytes and the arguments of the command
  // being assembled.
  size_t held() const { return buffered() + pending_bytes_; }

 private:
  // The line starting at pos_ without its CRLF (inline lines may end in a
  // bare LF); nullopt until its end arrived. Advances pos_ past it.
  Result<std::optional<std::string_view>> Line(bool inline_line);
  // Line(false) after the one-byte prefix at pos_ ('*' or '$'); pos_ stays
  // at the prefix while the line is incomplete.
  Result<std::optional<std::string_view>> LengthLine();
  Status Fail(std::string what);

  Limits limits_;
  std::string buf_;
  size_t pos_ = 0;
  // A multi-bulk command being assembled.
  Command pending_;
  size_t pending_bytes_ = 0;
  size_t remaining_ = 0;   // arguments still to come; 0: between commands
  int64_t bulk_len_ = -1;  // the next argument's length; -1: its $ line is next
  std::optional<Status> failed_;
};

// Splits an inline command as Redis does: arguments separated by blanks,
// "double quoted" with \" \\ \n \r \t \b \a \xHH escapes, 'single quoted'
// with \' only. InvalidArgument for unbalanced quotes.
Result<Command> SplitInline(std::string_view line);

// Replies, appended to `out`.
void AppendSimple(std::string* out, std::string_view s);  // "+s" (CR/LF become spaces)
void AppendError(std::string* out, std::string_view s);   // "-s": s starts with its kind, e.g. "ERR ..."
void AppendInteger(std::string* out, int64_t v);
void AppendBulk(std::string* out, std::string_view s);
void AppendNull(std::string* out);                       // the null bulk string, "$-1"
void AppendArray(std::string* out, size_t n);            // then n replies
// A command as a client sends it (an array of bulk strings).
void AppendCommand(std::string* out, const Command& args);

}  // namespace slip::resp
