// idemctl's command line (CLI11): the options of every subcommand and the
// checks every value gets before any store is opened. One rule for every
// usage error: one line on stderr and exit 2 (kUsage), whether it is a
// number (decimal digits only, in range, no sign, exponent or overflow), a
// store URI whose syntax or port is wrong, an unknown subcommand (named)
// or a missing option.
//
// Thread-safety: ParseCommandLine may be called from one thread at a time.

#ifndef IDEM_TOOLS_IDEMCTL_COMMAND_LINE_H_
#define IDEM_TOOLS_IDEMCTL_COMMAND_LINE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "idem/idempotency_key.h"
#include "output.h"

namespace idem::idemctl {

enum class Command { kInspect, kRevoke, kPurge, kStats };

struct Args {
  Command command = Command::kStats;
  std::string store;
  // Which record: a key (with its scope and, for per-operation keys, its
  // method and route pattern) or a record id.
  std::string scope;
  std::string key;
  std::string method;
  std::string path;
  std::string record_id;
  std::size_t max_key_length = kDefaultMaxKeyLength;
  bool json = false;
  bool body = false;
  // inspect --response-keys FILE: opens sealed responses.
  std::string response_keys;
  std::uint64_t limit = 0;  // 0: no limit.
};

// Parses `argv` into `args`. nullopt: run args.command. Otherwise the exit
// status to return: kOk after --help (its text on `out`), kUsage after one
// line on `output`.
std::optional<int> ParseCommandLine(int argc, const char* const* argv,
                                    std::ostream& out, std::ostream& err,
                                    Output& output, Args& args);

}  // namespace idem::idemctl

#endif  // IDEM_TOOLS_IDEMCTL_COMMAND_LINE_H_
