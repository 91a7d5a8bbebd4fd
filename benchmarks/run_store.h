// A fresh store for every benchmark run, derived from a store URI, and its
// removal after the run, so that no run meets another run's records: the
// store's descriptor (idem/store/store_descriptor.h) says how
// (StoreDescriptor::fresh_uri, remove: a subdirectory, a sibling file, a
// table, a key prefix, named idem_bench_<pid>_<run>). An in-memory store
// (neither durable nor shared) is sized by the caller instead:
// memory:?capacity=C.
//
// Thread-safety: plain functions; RemoveRunStore must not run while the
// store is open.

#ifndef IDEM_BENCHMARKS_RUN_STORE_H_
#define IDEM_BENCHMARKS_RUN_STORE_H_

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "idem/error.h"
#include "idem/store/store_descriptor.h"
#include "idem/store_uri.h"

namespace idem::bench {

// The URI of run `run` of a benchmark over `uri` (see above);
// `memory_capacity` is used for memory: only.
std::string RunStoreUri(std::string_view uri, int run,
                        std::size_t memory_capacity);

// Deletes what RunStoreUri's store left: the directory, the database file
// with its -wal/-shm, the table with its schema-version row, or the Redis
// keys of the run's prefix (purged through the store). Best effort:
// errors are ignored (a benchmark's temporary files are not worth failing
// over).
void RemoveRunStore(std::string_view run_uri);

// The descriptor of the store `uri` names, or nullptr.
const StoreDescriptor* StoreOf(std::string_view uri);

// Neither durable nor shared: its records live in the process.
bool InMemoryStore(const StoreDescriptor& store);

// The stores idem-bench runs without --idem_store_uris: every embedded
// store in `dir` (StoreDescriptor::local_uri), and every server store
// whose setup's variable (IDEM_TEST_POSTGRES_URI, ...) is set.
std::vector<std::string> DefaultStoreUris(const std::filesystem::path& dir);

// `uri` parsed (a redis-cluster host list rewritten as OpenStore does).
Result<StoreUri> ParseBenchUri(std::string_view uri);

// The scheme of `uri` ("memory", "rocksdb", ...), or "" when it does not
// parse.
std::string SchemeOf(std::string_view uri);

// `uri` with any password replaced by "***".
std::string Redacted(std::string_view uri);

}  // namespace idem::bench

#endif  // IDEM_BENCHMARKS_RUN_STORE_H_
