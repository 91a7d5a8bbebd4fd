// The PostgreSQL store's descriptor (idem/store/store_descriptor.h): how
// OpenStore, the contract suite and idem-bench find and set it up.

#include <libpq-fe.h>

#include <string>
#include <string_view>

#include "idem/postgres_store.h"
#include "idem/store/local_cache.h"
#include "idem/store/store_descriptor.h"
#include "idem/store_uri.h"

namespace idem {
namespace {

// Drops the table of a fresh store and its schema-version row.
void DropTable(std::string_view uri) {
  auto parsed = StoreUri::Parse(uri);
  if (!parsed) return;
  const std::string table = parsed->TakeString("table").value_or("");
  if (table.empty()) return;  // The default table is never a fresh one.
  const std::string conninfo(uri.substr(0, uri.find('?')));
  PGconn* conn = PQconnectdb(conninfo.c_str());
  if (PQstatus(conn) == CONNECTION_OK) {
    // The name comes from fresh_uri: letters, digits and '_' only.
    const std::string sql =
        "DROP TABLE IF EXISTS \"" + table +
        "\"; DELETE FROM idem_schema_versions WHERE table_name = '" + table +
        "'";
    PQclear(PQexec(conn, sql.c_str()));
  }
  PQfinish(conn);
}

}  // namespace

const StoreDescriptor& PostgresStoreDescriptor() {
  static const StoreDescriptor descriptor{
      .name = "postgres",
      .schemes = {"postgresql", "postgres"},
      .parameters = {"table", "pool", "acquire_timeout_ms", "connect_timeout_s",
                     "statement_timeout_ms", "sslmode", "create", "connect",
                     "local_cache", "local_cache_ttl_s", "local_cache_mb"},
      // The local cache (idem/store/local_cache.h) in front when the URI
      // asks for one.
      .open =
          [](StoreUri& uri, const StoreOptions& options) {
            return OpenWithLocalCache(uri, options,
                                      &PostgresStore::OpenFromUri);
          },
      .capabilities = {.name = "postgres",
                       .durable = true,
                       .shared_across_processes = true,
                       .async_calls = true},
      .fresh_uri =
          [](std::string_view uri, std::string_view name) {
            return WithUriParam(uri, "table", name);
          },
      .remove = &DropTable,
      // A long acquire timeout: the concurrency tests put 32 threads on a
      // pool of 8 on a loaded (or sanitized) machine.
      // The cached setup runs the suite with the local cache in front: it
      // must answer every row as the store does. Both run again through
      // the asynchronous calls (their batches).
      .setups = {{.label = "postgres",
                  .server_env = "IDEM_TEST_POSTGRES_URI",
                  .params = "acquire_timeout_ms=120000"
                            "&statement_timeout_ms=60000",
                  .through_async_calls = true},
                 {.label = "postgres_local_cache",
                  .server_env = "IDEM_TEST_POSTGRES_URI",
                  .params = "acquire_timeout_ms=120000"
                            "&statement_timeout_ms=60000&local_cache=1000",
                  .through_async_calls = true}},
  };
  return descriptor;
}

}  // namespace idem
