// Transfers (transfers.h): the HTTP side of POST /transfers and GET
// /transfers/count; the SQL side is in transfers_database.cc.

#include "transfers.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>

#include "idem/beast/convert.h"
#include "idem/problem.h"
#include "idem/sweeper.h"
#include "transfers_database.h"

namespace idem::demo {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;

constexpr std::string_view kTransfers = "/transfers";
constexpr std::string_view kCount = "/transfers/count";

std::string_view PathOf(const beast::Request& request) {
  const std::string_view target = beast::ToStd(request.target());
  return target.substr(0, target.find('?'));
}

idem::Response ProblemOf(int status, std::string_view code,
                         std::string detail) {
  Problem p;
  p.status = status;
  p.code = code;
  p.detail = std::move(detail);
  p.instance = kTransfers;
  return MakeProblemResponse(p);
}

std::uint64_t RandomNonce() {
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) ^ rd();
}

}  // namespace

struct Transfers::Pool {
  explicit Pool(std::size_t threads) : pool(threads) {}
  asio::thread_pool pool;
  const std::uint64_t nonce = RandomNonce();
  std::atomic<std::uint64_t> next{1};
};

bool IsSqlStoreUri(std::string_view store_uri) {
  return store_uri.starts_with("sqlite:") ||
         store_uri.starts_with("postgresql:") ||
         store_uri.starts_with("postgres:");
}

Result<Transfers::SqlStore> Transfers::OpenSqlStore(
    std::string_view store_uri, const StoreOptions& options) {
  Duration sweep = options.sweep_interval;
  LocalCacheOptions cache;
  cache.clock = options.clock;
  IDEM_ASSIGN_OR_RETURN(std::unique_ptr<Store> typed,
                        OpenTypedSqlStore(store_uri, sweep, &cache));
  if (!typed) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "not a SQL store: " +
                         std::string(store_uri.substr(0, store_uri.find(':'))));
  }
  SqlStore opened;
  opened.typed = typed.get();
  SweeperOptions sweeper;
  sweeper.interval = sweep;
  sweeper.clock = options.clock;
  sweeper.log = options.log;
  // The Guard's store: the local cache in front when the URI asks for one
  // (the typed store itself otherwise); `typed` stays the store's own.
  IDEM_ASSIGN_OR_RETURN(auto cached,
                        LocalCacheStore::Wrap(std::move(typed), cache));
  IDEM_ASSIGN_OR_RETURN(auto swept,
                        WithSweeper(std::move(cached), std::move(sweeper)));
  opened.store = std::move(swept);
  return opened;
}

Result<std::unique_ptr<Transfers>> Transfers::Create(
    std::shared_ptr<Guard> guard, std::string_view store_uri, Options options,
    Store* sql_store) {
  std::unique_ptr<Store> own;
  if (sql_store == nullptr && IsSqlStoreUri(store_uri)) {
    // A store instance of its own on the same file or table.
    Duration sweep{};
    IDEM_ASSIGN_OR_RETURN(own, OpenTypedSqlStore(store_uri, sweep));
  }
  Store* store = sql_store != nullptr ? sql_store : own.get();
  IDEM_ASSIGN_OR_RETURN(std::unique_ptr<Database> db,
                        OpenTransfersDatabase(store, store_uri));
  if (options.threads == 0) {
    const std::size_t served = store ? store->Info().max_concurrent_calls : 0;
    options.threads = served != 0 ? served : 4;
  }
  if (!db && options.exactly_once) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "--exactly-once needs a SQL store (sqlite: or "
                     "postgresql:), not " +
                         guard->store().Info().name);
  }
  return std::unique_ptr<Transfers>(new Transfers(
      std::move(guard), std::move(options), std::move(own), std::move(db)));
}

Transfers::Transfers(std::shared_ptr<Guard> guard, Options options,
                     std::unique_ptr<Store> store, std::unique_ptr<Database> db)
    : guard_(std::move(guard)),
      options_(std::move(options)),
      store_(std::move(store)),
      db_(std::move(db)),
      pool_(std::make_unique<Pool>(options_.threads)) {
  // The claim-taking completion form of handler.h: the blocking SQL runs on
  // the pool and the request resumes on its connection's executor. The
  // claim stays valid until `done` is called.
  blocking_ = [this](beast::Request request, ClaimHandle& claim,
                     beast::Responder done) {
    asio::post(pool_->pool, [this, request = std::move(request), &claim,
                             done = std::move(done)]() mutable {
      try {
        done(Serve(request, claim));
      } catch (...) {
        done.Fail(std::current_exception());
      }
    });
  };
}

Transfers::~Transfers() { pool_->pool.join(); }

bool Transfers::Matches(const beast::Request& request) {
  const std::string_view path = PathOf(request);
  return path == kTransfers || path == kCount;
}

asio::thread_pool& Transfers::pool() { return pool_->pool; }

asio::awaitable<beast::Response> Transfers::Handle(beast::Request request) {
  ClaimHandle unprotected;
  co_return co_await Handle(std::move(request), unprotected);
}

asio::awaitable<beast::Response> Transfers::Handle(beast::Request request,
                                                   ClaimHandle& claim) {
  const std::string_view path = PathOf(request);
  const http::verb want = path == kCount ? http::verb::get : http::verb::post;
  const unsigned version = request.version();
  const bool keep_alive = request.keep_alive();
  if (!db_) {
    co_return beast::ToBeast(
        ProblemOf(501, "demo_no_sql_store",
                  "This store has no SQL transaction to join: /transfers needs "
                  "a sqlite: or postgresql: store."),
        version, keep_alive);
  }
  if (request.method() != want) {
    beast::Response res =
        beast::ToBeast(ProblemOf(405, "method_not_allowed",
                                 "This path does not accept this method."),
                       version, keep_alive);
    res.set(http::field::allow, want == http::verb::get ? "GET" : "POST");
    co_return res;
  }
  co_return co_await blocking_(std::move(request), claim);
}

beast::Response Transfers::Serve(const beast::Request& request,
                                 ClaimHandle& claim) {
  return PathOf(request) == kCount ? Count(request) : Post(request, claim);
}

beast::Response Transfers::Count(const beast::Request& request) {
  auto n = db_->Count();
  idem::Response res;
  if (n) {
    nlohmann::ordered_json j;
    j["count"] = *n;
    res.status = 200;
    res.headers.emplace_back("Content-Type", "application/json");
    res.body = j.dump();
  } else {
    res = ProblemOf(500, "demo_transfers_failed", n.error().message());
  }
  return beast::ToBeast(res, request.version(), request.keep_alive());
}

beast::Response Transfers::Post(const beast::Request& request,
                                ClaimHandle& claim) {
  Crash crash = Crash::kNone;
  if (auto it = request.find("X-Demo-Crash"); it != request.end()) {
    const std::string_view value = beast::ToStd(it->value());
    if (value == "before_commit") crash = Crash::kBeforeCommit;
    if (value == "after_commit") crash = Crash::kAfterCommit;
  }
  if (options_.count_run) options_.count_run();
  char id[48];
  std::snprintf(id, sizeof id, "t%016llx-%llu",
                static_cast<unsigned long long>(pool_->nonce),
                static_cast<unsigned long long>(pool_->next.fetch_add(1)));
  nlohmann::ordered_json j;
  j["id"] = id;
  j["instance"] = options_.instance;
  idem::Response created;
  created.status = 201;
  created.headers = {{"Content-Type", "application/json"},
                     {"Location", std::string("/transfers/") + id},
                     {"X-Demo-Instance", options_.instance}};
  created.body = j.dump();
  const unsigned version = request.version();
  const bool keep_alive = request.keep_alive();
  // Without --exactly-once the record is completed afterwards, by the
  // adapter's Finish, as for /orders: the transaction holds the row only.
  ClaimHandle unprotected;
  auto done = db_->Insert(options_.exactly_once ? claim : unprotected, id,
                          request.body(),
                          beast::ToBeast(created, version, keep_alive), crash);
  if (done) return std::move(*done);
  if (options_.log) options_.log(LogLevel::kError, done.error().message());
  return beast::ToBeast(
      ProblemOf(500, "demo_transfers_failed", "The transfer was not written."),
      version, keep_alive);
}

}  // namespace idem::demo
