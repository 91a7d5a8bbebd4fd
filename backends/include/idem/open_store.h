// OpenStore: a Store from a URI, over the backends this build of idem has.
//
// Link idem::stores to get every enabled backend; link a single backend
// (idem::memory, ...) and call its typed Open() to get only that one.
//
// Thread-safety: OpenStore may be called from any thread.

#ifndef IDEM_OPEN_STORE_H_
#define IDEM_OPEN_STORE_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "idem/error.h"
#include "idem/store.h"

namespace idem {

// Opens the store `uri` names (SEMANTICS.md, "Stores, chosen by URI"), with
// a background sweeper (sweeper.h) that deletes its expired records every
// options.sweep_interval (default 60 s; the URI parameter
// `sweep_interval_s`, 0..86400, accepted by every scheme, overrides it; 0 =
// no sweeper). The sweeper lives as long as the returned store and is
// stopped by its destructor; FindSweeper(*store) gives its stats. Several
// processes sharing one SQLite file or PostgreSQL table may each sweep it.
// Errors, each naming the URI with its password redacted:
//  - kInvalidArgument: not a URI, an unknown scheme or one this build lacks,
//    an unknown or malformed parameter (`sweep_interval_s` out of range), a
//    negative options.sweep_interval;
//  - kUnavailable: the store cannot be reached or opened (held by another
//    process, server down);
//  - what the backend's own Open returns otherwise.
Result<std::unique_ptr<Store>> OpenStore(std::string_view uri,
                                         const StoreOptions& options = {});

// Schemes compiled into this build, e.g. {"memory", "rocksdb"}.
std::vector<std::string> AvailableStoreSchemes();

}  // namespace idem

#endif  // IDEM_OPEN_STORE_H_
