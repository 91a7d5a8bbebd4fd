// A fresh store for every benchmark run, derived from a store URI, and its
// removal after the run, so that no run meets another run's records.
//
//   memory:...               memory:?capacity=C (C chosen by the caller; the
//                            URI's own parameters are replaced)
//   rocksdb:DIR?p            rocksdb:DIR/run-N?p        (a subdirectory)
//   sqlite:DIR/F.db?p        sqlite:DIR/F-run-N.db?p    (a sibling file)
//   postgresql://...?p       the same server with table=idem_bench_<pid>_N
//                            (any table= given is replaced, never touched)
//   redis://...?p,           the same server(s) with
//   redis-cluster://...?p    prefix=idem_bench_<pid>_N: (any prefix= given
//                            is replaced, never touched)
//
// Thread-safety: plain functions; RemoveRunStore must not run while the
// store is open.

#ifndef IDEM_BENCHMARKS_RUN_STORE_H_
#define IDEM_BENCHMARKS_RUN_STORE_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "idem/error.h"
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

// `uri` parsed (a redis-cluster host list rewritten as OpenStore does).
Result<StoreUri> ParseBenchUri(std::string_view uri);

// The scheme of `uri` ("memory", "rocksdb", ...), or "" when it does not
// parse.
std::string SchemeOf(std::string_view uri);

// `uri` with any password replaced by "***".
std::string Redacted(std::string_view uri);

}  // namespace idem::bench

#endif  // IDEM_BENCHMARKS_RUN_STORE_H_
