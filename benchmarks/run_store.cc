// See run_store.h.

#include "run_store.h"

#include <unistd.h>

#include <filesystem>
#include <limits>
#include <string>
#include <system_error>

#include "idem/open_store.h"
#include "idem/store_uri.h"

#ifdef IDEM_BENCH_HAVE_POSTGRES
#include <libpq-fe.h>
#endif
#ifdef IDEM_BENCH_HAVE_REDIS
#include "idem/redis_store.h"
#endif

namespace idem::bench {
namespace {

// The query without parameter `name` (any value), "" or "?a=1&b=2".
std::string QueryWithout(std::string_view query, std::string_view name) {
  std::string out;
  if (!query.empty() && query.front() == '?') query.remove_prefix(1);
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view()
                                          : query.substr(amp + 1);
    const std::string_view key = param.substr(0, param.find('='));
    if (param.empty() || key == name) continue;
    out += out.empty() ? "?" : "&";
    out += param;
  }
  return out;
}

// A run's PostgreSQL table, or (with ':') its Redis key prefix.
std::string RunName(int run) {
  return "idem_bench_" + std::to_string(::getpid()) + "_" + std::to_string(run);
}

}  // namespace

Result<StoreUri> ParseBenchUri(std::string_view uri) {
#ifdef IDEM_BENCH_HAVE_REDIS
  return StoreUri::Parse(RedisStore::ClusterUriForParsing(uri));
#else
  return StoreUri::Parse(uri);
#endif
}

std::string SchemeOf(std::string_view uri) {
  auto parsed = ParseBenchUri(uri);
  return parsed ? parsed->scheme() : std::string();
}

std::string Redacted(std::string_view uri) { return RedactUri(uri); }

std::string RunStoreUri(std::string_view uri, int run,
                        std::size_t memory_capacity) {
  const std::string scheme = SchemeOf(uri);
  const std::size_t q = uri.find('?');
  std::string head(uri.substr(0, q));
  const std::string_view query =
      q == std::string_view::npos ? std::string_view() : uri.substr(q);
  const std::string tag = "run-" + std::to_string(run);
  if (scheme == "memory") {
    // Bounded by records only (the byte budget's default would stop a large
    // run halfway); 1 TiB is the largest max_bytes the store takes.
    return "memory:?capacity=" + std::to_string(memory_capacity) +
           "&max_bytes=1099511627776";
  }
  if (scheme == "rocksdb") {
    if (head.back() != '/') head += '/';
    return head + tag + std::string(query);
  }
  if (scheme == "sqlite") {
    // Before the extension of the file name, if it has one.
    const std::size_t slash = head.find_last_of("/:");
    const std::size_t dot = head.find_last_of('.');
    const std::size_t at =
        dot != std::string::npos && dot > slash ? dot : head.size();
    head.insert(at, "-" + tag);
    return head + std::string(query);
  }
  if (scheme == "postgresql" || scheme == "postgres") {
    const std::string rest = QueryWithout(query, "table");
    return head + (rest.empty() ? "?" : rest + "&") + "table=" + RunName(run);
  }
  if (scheme == "redis" || scheme == "redis-cluster") {
    const std::string rest = QueryWithout(query, "prefix");
    return head + (rest.empty() ? "?" : rest + "&") + "prefix=" + RunName(run) +
           ":";
  }
  return std::string(uri);
}

void RemoveRunStore(std::string_view run_uri) {
  auto parsed = ParseBenchUri(run_uri);
  if (!parsed) return;
  std::error_code ec;
  const std::string& scheme = parsed->scheme();
  if (scheme == "rocksdb") {
    std::filesystem::remove_all(parsed->path(), ec);
  } else if (scheme == "sqlite") {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      std::filesystem::remove(parsed->path() + suffix, ec);
    }
  } else if (scheme == "postgresql" || scheme == "postgres") {
#ifdef IDEM_BENCH_HAVE_POSTGRES
    const std::string table = parsed->TakeString("table").value_or("");
    if (table.rfind("idem_bench_", 0) != 0) return;  // Never a user's table.
    const std::string conninfo(run_uri.substr(0, run_uri.find('?')));
    PGconn* c = PQconnectdb(conninfo.c_str());
    if (PQstatus(c) == CONNECTION_OK) {
      const std::string sql =
          "DROP TABLE IF EXISTS \"" + table +
          "\"; DELETE FROM idem_schema_versions WHERE table_name = '" + table +
          "'";
      PQclear(PQexec(c, sql.c_str()));
    }
    PQfinish(c);
#endif
  } else if (scheme == "redis" || scheme == "redis-cluster") {
#ifdef IDEM_BENCH_HAVE_REDIS
    // Every record of the run's prefix has expired by the end of time, so
    // PurgeExpired deletes them all; the raw writes' plain keys are not
    // records (the purge stops at them) and expire on their own.
    const std::string prefix = parsed->TakeString("prefix").value_or("");
    if (prefix.rfind("idem_bench_", 0) != 0) return;  // Never a user's keys.
    auto store = OpenStore(run_uri);
    if (!store) return;
    (void)(*store)->PurgeExpired(TimePoint::max(),
                                 std::numeric_limits<std::size_t>::max());
#endif
  }
}

}  // namespace idem::bench
