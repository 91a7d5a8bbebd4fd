// The store contract suite on the PostgreSQL store, against the server that
// IDEM_TEST_POSTGRES_URI names (scripts/test.sh starts one; by hand:
// `export IDEM_TEST_POSTGRES_URI=$(scripts/postgres.sh start)`). Each test
// gets its own table (the suite's unique name), dropped afterwards, so
// tests and binaries running at once on one server do not meet. Without
// the variable every test skips, or fails under CI.

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "contract/store_contract.h"
#include "idem/open_store.h"
#include "postgres_test_util.h"

namespace {

idem::testing::StoreFactory PostgresFactory() {
  const std::string base = idem::testing::PostgresTestUri();
  return {
      .name = "postgres",
      .open = [base](const idem::testing::StoreTestContext& context)
          -> idem::Result<std::unique_ptr<idem::Store>> {
        // A long acquire timeout: the concurrency tests put 32 threads on
        // a pool of 8 on a loaded (or sanitized) machine. No sweeper:
        // the suite counts what PurgeExpired deletes.
        return idem::OpenStore(
            idem::testing::WithParams(base, "table=" + context.unique_name +
                                                "&acquire_timeout_ms=120000"
                                                "&statement_timeout_ms=60000"),
            {.clock = context.clock, .sweep_interval = idem::Duration::zero()});
      },
      .cleanup =
          [base](const idem::testing::StoreTestContext& context) {
            idem::testing::DropPostgresTable(base, context.unique_name);
          },
      .skip_reason = base.empty() ? std::string(idem::testing::kNoPostgres)
                                  : std::string()};
}

}  // namespace

IDEM_INSTANTIATE_STORE_CONTRACT(Postgres, PostgresFactory());
