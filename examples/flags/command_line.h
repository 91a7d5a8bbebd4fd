// The command line both demo servers share on boost::program_options: the
// lock flags (--ttl, --lock-timeout, --lock-renewal, --lock-wait: flags.h,
// LockFlagsText) declared one way, with help texts whose ranges and
// defaults come from the flags themselves (flags.h, GuardOptions); the
// parse with --help and --version; and the bad-flag message and exit
// status.
//
// Thread-safety: main's thread only.

#ifndef IDEM_DEMO_COMMAND_LINE_H_
#define IDEM_DEMO_COMMAND_LINE_H_

#include <optional>
#include <string>
#include <string_view>

#include <boost/program_options.hpp>

#include "flags.h"

namespace idem::demo {

// The exit status of a demo given a bad flag.
inline constexpr int kExitBadFlags = 2;

// What the help texts call a protected unit of work ("request", "call") and
// what a duplicate gets when its wait ends ("409", "ABORTED").
struct LockFlagsWords {
  std::string_view work;
  std::string_view busy_answer;
};

// Adds the four flags to `flags`, storing what is given in `text` (whose
// values are the defaults the help shows). `text` must outlive the parse.
void AddLockFlags(boost::program_options::options_description& flags,
                  LockFlagsText& text, const LockFlagsWords& words);

// Writes "<program>: <message>" and a pointer to --help to stderr; returns
// kExitBadFlags.
int BadFlags(std::string_view program, std::string_view message);

// Parses argv against `flags` into `vm`. Returns the status main exits
// with when it does not go on: kExitBadFlags after an unknown or malformed
// flag (BadFlags), 0 after --help (the flags printed) or --version
// (`version_line` printed); nullopt when main goes on.
std::optional<int> ParseCommandLine(
    int argc, char** argv,
    const boost::program_options::options_description& flags,
    std::string_view program, std::string_view version_line,
    boost::program_options::variables_map& vm);

}  // namespace idem::demo

#endif  // IDEM_DEMO_COMMAND_LINE_H_
