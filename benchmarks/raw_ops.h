// The raw engine operation for a store URI: the one write of the database
// engine that a store is built on, with the store's own schema and options,
// so that a benchmark can put a store's Claim or Claim+Complete beside the
// cheapest thing the engine can do for it.
//
//   rocksdb:DIR?sync=B          one rocksdb::DB::Put of a fresh 32-byte key
//                               into an `idempotency` column family with the
//                               store's options; the value is a completed
//                               record (EncodeRecord) of BenchResponse().
//   sqlite:FILE?synchronous=S   one autocommit INSERT of a fresh row into the
//                               store's own table (created by opening the
//                               store), the same completed record; one
//                               connection per thread, like the store's pool.
//   postgresql://...?table=T&pool=P
//                               one prepared `INSERT .. ON CONFLICT (id) DO
//                               NOTHING` of the row a claim writes (an
//                               in-progress record) into the store's table T
//                               (created by opening the store), through a
//                               blocking pool of P connections (default 8,
//                               the store's default).
//   redis://... redis-cluster://...
//                               one `SET key value NX PX 60000` round trip
//                               of the key a claim of the id writes (the
//                               in-progress record as value), on the pooled
//                               connections of a store opened from the URI
//                               (RedisStoreTestPeer::SetIfAbsent).
// memory: has no engine below it, so no raw operation. Each engine's part
// is in its store's folder (backends/<name>/bench/<name>_raw_op.cc, named by
// idem_add_backend's BENCH_SOURCES); benchmarks/CMakeLists.txt generates
// the list of them (RawEngines).
//
// The raw operation writes where the URI says and leaves what it wrote there
// (a directory, a file, a table): the caller gives it a fresh place and
// removes it afterwards.
//
// Thread-safety: Write may be called concurrently, each caller with its own
// `thread` index in [0, threads) as given to OpenRawOp.

#ifndef IDEM_BENCHMARKS_RAW_OPS_H_
#define IDEM_BENCHMARKS_RAW_OPS_H_

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "idem/error.h"
#include "idem/record.h"
#include "idem/store_uri.h"
#include "idem/types.h"

namespace idem::bench {

class RawOp {
 public:
  virtual ~RawOp() = default;
  // Writes one fresh row/key `id`; an id already written is an error for the
  // embedded engines and a no-op for PostgreSQL (ON CONFLICT DO NOTHING)
  // and Redis (NX).
  virtual Status Write(const RecordId& id, int thread) = 0;
};

// One store's raw operation: the schemes it serves, and how it opens on a
// parsed URI (`full_uri`: the URI as given, to open the store itself) for
// up to `threads` writers.
struct RawEngine {
  std::vector<std::string_view> schemes;
  Result<std::unique_ptr<RawOp>> (*open)(StoreUri& uri,
                                         std::string_view full_uri,
                                         int threads) = nullptr;
};

// Every enabled store's engine (generated raw_engines.cc).
std::span<const RawEngine* const> RawEngines();

// For the engines: a record as a claim (in progress) or a completion (with
// BenchResponse()) leaves it, at kStart with a 24 h ttl and a 60 s lock.
Record BenchRecord(RecordState state);
// Opens the store of `uri` once, which creates its schema (SQLite's table,
// PostgreSQL's table and version row), so that the raw side writes into
// exactly the store's layout.
Status CreateSchema(std::string_view uri);

// Whether the scheme of `uri` has a raw operation (rocksdb, sqlite,
// postgresql, redis, redis-cluster; false for memory: and for what does not
// parse).
bool HasRawOp(std::string_view uri);

// Opens the engine at the place `uri` names for up to `threads` concurrent
// writers. Errors: kInvalidArgument for a URI without a raw operation or with
// a bad parameter; what the engine or OpenStore reports otherwise (an
// unreachable server is kUnavailable), naming the URI without its password.
Result<std::unique_ptr<RawOp>> OpenRawOp(std::string_view uri, int threads);

}  // namespace idem::bench

#endif  // IDEM_BENCHMARKS_RAW_OPS_H_
