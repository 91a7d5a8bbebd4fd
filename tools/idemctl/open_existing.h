// How idemctl opens a store: only what already exists, changing nothing.
// The stores that could create or migrate something (rocksdb:, sqlite:,
// postgresql:) are opened with create=false, so a mistyped path, an empty
// directory or file, another application's SQLite database or a mistyped
// PostgreSQL table is a store error naming what is missing, never a new
// empty store; Redis creates nothing at open. No sweeper runs, and a store
// the application connects lazily is connected at once (idemctl's calls
// must not answer "not connected yet").
//
// Thread-safety: OpenExisting may be called from any thread.

#ifndef IDEM_TOOLS_IDEMCTL_OPEN_EXISTING_H_
#define IDEM_TOOLS_IDEMCTL_OPEN_EXISTING_H_

#include <memory>
#include <string>
#include <string_view>

#include "idem/error.h"
#include "idem/store.h"
#include "output.h"

namespace idem::idemctl {

// `uri` as idemctl opens it: without the parameters sweep_interval_s,
// create and connect (whatever their values), and with create=false for
// the stores that take it.
std::string ExistingOnly(std::string_view uri);

// Opens the store `uri` names as ExistingOnly says. On failure the error
// line is on `output` and *code is the exit status: kUsage for memory: and
// every kInvalidArgument, kStoreError otherwise (a missing store included).
Result<std::unique_ptr<Store>> OpenExisting(const std::string& uri,
                                            Output& output, int* code);

}  // namespace idem::idemctl

#endif  // IDEM_TOOLS_IDEMCTL_OPEN_EXISTING_H_
