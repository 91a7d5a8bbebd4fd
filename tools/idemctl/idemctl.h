// idemctl, the operator's tool: inspects, revokes and purges the records of
// any idem store named by URI, and counts them where the store can
// (SEMANTICS.md, "The operator's tool"; docs/OPERATIONS.md has the usage).
//
//   idemctl --store URI inspect --scope S --key K [--method M --path P]
//                               [--json] [--body]
//   idemctl --store URI revoke  --scope S --key K [--method M --path P]
//   idemctl --store URI revoke  --record-id HEX
//   idemctl --store URI purge   [--limit N]
//   idemctl --store URI stats   [--json]
//
// The store is opened with OpenStore, no sweeper, and without creating or
// migrating anything (open_existing.h): a store that does not exist is exit
// 3 naming what is missing. `memory:` is refused: a memory store lives
// inside its application's process. Every usage error is exit 2
// (command_line.h).
//
// Thread-safety: Run may be called from one thread at a time (CLI11 and
// the output streams are not shared).

#ifndef IDEM_TOOLS_IDEMCTL_IDEMCTL_H_
#define IDEM_TOOLS_IDEMCTL_IDEMCTL_H_

#include <ostream>

namespace idem::idemctl {

// The process's exit status.
enum ExitCode : int {
  kOk = 0,          // Found, or done.
  kNotFound = 1,    // No such record (inspect: none live; revoke: none).
  kUsage = 2,       // Bad arguments, number, URI, hex id or key; memory:.
  kStoreError = 3,  // Unreachable or missing store, a damaged record, ...
};

// Parses `argv` and runs the subcommand. Results go to `out`; every error
// is one line on `err`, "idemctl: ...", with any password of the store URI
// (or of any argument) replaced by "***". Returns the ExitCode.
int Run(int argc, const char* const* argv, std::ostream& out,
        std::ostream& err);

}  // namespace idem::idemctl

#endif  // IDEM_TOOLS_IDEMCTL_IDEMCTL_H_
