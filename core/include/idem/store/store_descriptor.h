// A store's descriptor: what the rest of idem needs to know about a backend
// besides its own header. OpenStore (open_store.h) finds the backend of a
// URI's scheme here and opens it; the contract suite (idem::testing) and
// idem-bench make fresh, empty stores of it from here. A new backend writes
// one function that returns its descriptor and names it in its
// CMakeLists.txt (idem_add_backend's DESCRIPTOR); idem::stores' registry
// (store_registry.h) is generated from the enabled backends' names, so no
// table lists the stores and nothing relies on static initializers.
//
// Thread-safety: a descriptor is an immutable value; its functions may be
// called from any thread.

#ifndef IDEM_STORE_STORE_DESCRIPTOR_H_
#define IDEM_STORE_STORE_DESCRIPTOR_H_

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "idem/error.h"
#include "idem/store.h"
#include "idem/store_uri.h"

namespace idem {

// One configuration the contract suite runs a backend in (a test-name
// suffix each), and the stores idem-bench runs by default.
struct StoreTestSetup {
  // Test-name suffix: letters, digits and '_', e.g. "sqlite_full".
  std::string_view label;
  // For a store on a server: the environment variable that names the test
  // server's URI, e.g. "IDEM_TEST_POSTGRES_URI". The suite skips without it
  // (fails under CI); idem-bench runs the store when it is set. Empty for an
  // embedded store, whose URI is StoreDescriptor::local_uri's.
  std::string_view server_env;
  // Query parameters this setup adds to its fresh store's URI, e.g.
  // "synchronous=full"; "" for none.
  std::string_view params;
  // Whether the contract suite also runs this setup through the store's
  // asynchronous calls (a `<label>_async` setup,
  // idem/testing/through_async_calls.h): for a setup whose store has
  // them (StoreInfo::async_calls). Default: false.
  bool through_async_calls = false;
};

struct StoreDescriptor {
  // The backend's folder and library: backends/<name>, idem::<name>, and
  // its section of docs/STORES.md.
  std::string_view name;
  // The URI schemes it opens, lowercase: {"postgresql", "postgres"}.
  std::vector<std::string_view> schemes;
  // Every query parameter its URIs take (OpenStore's own
  // `sweep_interval_s` aside): OpenStore rejects any other one, naming
  // these.
  std::vector<std::string_view> parameters;
  // Rewrites a URI of one of its schemes that RFC 3986 does not allow into
  // one StoreUri parses (the Redis Cluster host list); nullptr when every
  // URI parses as given. Must return any other URI unchanged.
  std::string (*rewrite_uri)(std::string_view uri) = nullptr;
  // Opens the store a parsed URI of one of its schemes names (the backend's
  // OpenFromUri), starting no sweeper: OpenStore adds it.
  Result<std::unique_ptr<Store>> (*open)(StoreUri& uri,
                                         const StoreOptions& options) = nullptr;
  // What every store of this backend is (StoreInfo's name, durable,
  // shared_across_processes, calls_may_block), and async_calls when its
  // default URI's store has them (which setups the contract suite runs
  // through them is StoreTestSetup::through_async_calls); the pool-sized
  // fields are an opened store's own (Store::Info()).
  StoreInfo capabilities;

  // For tests and benchmarks.
  // An embedded store: the URI of a store in the empty directory `dir`;
  // nullptr for a store on a server (StoreTestSetup::server_env).
  std::string (*local_uri)(const std::filesystem::path& dir) = nullptr;
  // The URI of a fresh, empty store beside the store of `uri`, told apart
  // by `name` (a lowercase letter, then lowercase letters, digits and '_'):
  // a subdirectory, a sibling file, table=<name>, prefix=<name>:. Keeps
  // `uri`'s other parameters.
  std::string (*fresh_uri)(std::string_view uri,
                           std::string_view name) = nullptr;
  // Deletes what the store of a fresh_uri(…, name) URI left (its files,
  // its table, its keys); best effort, errors ignored. Must not run while
  // that store is open. nullptr when nothing outlives the store (memory).
  void (*remove)(std::string_view fresh_uri) = nullptr;
  // The configurations the contract suite runs; at least one.
  std::vector<StoreTestSetup> setups;
};

}  // namespace idem

#endif  // IDEM_STORE_STORE_DESCRIPTOR_H_
