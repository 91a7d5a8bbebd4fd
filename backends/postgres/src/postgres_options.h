// The ranges of PostgresStoreOptions (postgres_store.h), checked once by
// OpenNamed for both ways in (options and URIs), and the name the store
// gives itself in messages; defined in postgres_store_uri.cc beside the
// URI parser, which reads its parameters with the same ranges.

#ifndef IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_OPTIONS_H_
#define IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_OPTIONS_H_

#include <chrono>
#include <cstddef>
#include <string>

#include "idem/error.h"
#include "idem/postgres_store_options.h"

namespace idem::postgres_internal {

inline constexpr std::size_t kMaxPool = 1024;
// Every duration option's maximum.
inline constexpr std::chrono::hours kMaxTimeout{1};

// "postgresql://user@host:port/dbname" (no password): how the store names
// itself in messages when opened without a URI.
std::string DisplayName(const PostgresStoreOptions& options);

// Errors: kInvalidArgument naming the first option out of range (table
// name, port, pool, acquire/connect/statement timeout), prefixed by
// `display`.
Status ValidateOptions(const PostgresStoreOptions& options,
                       const std::string& display);

}  // namespace idem::postgres_internal

#endif  // IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_OPTIONS_H_
