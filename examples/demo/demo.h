// Demo: idem-demo assembled from its parts — a store, a Guard, the
// IdempotentHandler protecting POST /orders and POST /payments, DemoApp and
// HttpServer. main.cc
// only turns flags into DemoOptions; tests build a Demo in-process.
//
// Thread-safety: as HttpServer.

#ifndef IDEM_DEMO_DEMO_H_
#define IDEM_DEMO_DEMO_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "demo_app.h"
#include "http_server.h"
#include "idem/beast/idempotent_handler.h"
#include "idem/error.h"
#include "idem/guard.h"
#include "idem/response_keys.h"
#include "idem/store.h"
#include "transfers.h"

namespace idem::restinio {
class IdempotentHandler;  // idem/restinio/idempotent_handler.h
}  // namespace idem::restinio

namespace idem::demo {

class RestinioServer;  // http_server_restinio.h, built with RESTinio only.

// The HTTP server idem-demo runs on (--http): the same endpoints and flags
// on either.
enum class HttpFramework {
  kBeast,     // HttpServer and idem::beast. The default.
  kRestinio,  // RestinioServer and idem::restinio.
};

struct DemoOptions {
  // Default: kBeast.
  HttpFramework http = HttpFramework::kBeast;
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  // The store to open; see ResolveStoreUri.
  std::string store_uri;
  std::chrono::seconds ttl{24 * 3600};
  // Fractions of a second allowed (--lock-timeout 0.3).
  Duration lock_timeout = std::chrono::seconds(60);
  // GuardOptions::lock_renewal (--lock-renewal 0.3); zero: off.
  Duration lock_renewal = Duration::zero();
  std::chrono::milliseconds lock_wait{0};
  // How many bytes of orders GET /orders/<id> keeps (DemoApp; flag
  // --max-order-bytes, 0..DemoApp::kMaxOrderBytesLimit, 0 keeps none).
  // Default: 16 MiB.
  std::size_t max_order_bytes = DemoApp::kDefaultMaxOrderBytes;
  // I/O threads.
  int threads = 2;
  // HttpServerOptions::max_connections (0: derived from RLIMIT_NOFILE).
  std::size_t max_connections = 0;
  // Threads for store calls (unused with the in-memory store); 0 follows
  // the store (IdempotentHandlerOptions::store_threads).
  std::size_t store_threads = 0;
  // Where store calls run (IdempotentHandlerOptions::store_calls): kAuto
  // runs the memory store's inline and every other store's on the pool.
  beast::StoreCalls store_calls = beast::StoreCalls::kAuto;
  std::string instance = "demo";
  // false: the same server without idem (the benchmark baseline).
  bool idem = true;
  // GuardOptions::key_per_operation for both protected routes (flag
  // --key-per-operation): one key on /orders and /payments is two
  // operations. Default: off (the second answers 422).
  bool key_per_operation = false;
  // Where warnings and errors of the Guard go. Default: stderr.
  LogSink log;
  // How often the store's expired records are deleted in the background
  // (StoreOptions::sweep_interval; a `sweep_interval_s` in the store URI
  // wins); zero: never. Flag --sweep-interval SECONDS, 0..86400
  // (idem::kMaxSweepInterval).
  // Default: 60 s.
  std::chrono::seconds sweep_interval{60};
  // The state idem's switch starts in (GuardSetup::enabled; flag
  // --protection on|off): off, every protected route runs unprotected and
  // GET /stats says "protection": "off". Default: true (on).
  bool protection = true;
  // POST /transfers completes the record in its own transaction
  // (transfers.h); only with a SQL store. Flag --exactly-once.
  // Default: false.
  bool exactly_once = false;
  // GuardOptions::response_keys for every route (flag --response-keys
  // FILE). Default: null (stored responses are not sealed).
  std::shared_ptr<const ResponseKeyRing> response_keys;
  // GuardOptions::fingerprint_fields of POST /orders only (flag
  // --fingerprint-fields /item,...). Default: none (the whole body).
  std::vector<std::string> fingerprint_fields;
};

// The store default, in one place: RocksDB in ./var/idem, relative to the
// working directory (created on first start). Durable, so that a restarted
// demo still replays what it answered before, and the fastest durable store
// for one process per node (docs/STORES.md, "Which store"; the figures are
// in docs/BENCHMARKS.md). Its one limit: one process per directory, so a
// second demo in the same working directory fails at start-up naming the
// path; give it its own --store.
inline constexpr std::string_view kDefaultStoreUri = "rocksdb:./var/idem";

// --http: "beast" or "restinio" (when built with RESTinio);
// kInvalidArgument naming the choices otherwise.
Result<HttpFramework> ParseHttpFlag(std::string_view text);

// --store when given, else $IDEM_STORE when set and non-empty, else
// kDefaultStoreUri.
std::string ResolveStoreUri(const std::optional<std::string>& flag);

class Demo {
 public:
  // Opens options.store_uri, unless `store` is given (tests inject theirs).
  // Errors name the store URI with its password redacted.
  static Result<std::unique_ptr<Demo>> Create(
      DemoOptions options, std::shared_ptr<Store> store = nullptr);

  Status Start();
  std::uint16_t port() const;
  const std::string& host() const;
  void Shutdown();
  void Wait();

  DemoApp& app() { return *app_; }
  // Null with idem = false.
  Guard* guard() { return guard_.get(); }
  // Null with idem = false or on RESTinio.
  beast::IdempotentHandler* idempotent_handler() { return handler_.get(); }
  // Null with idem = false or on Beast.
  restinio::IdempotentHandler* restinio_handler() {
    return restinio_handler_.get();
  }
  // The Beast server; only with http = kBeast.
  HttpServer& server() { return *server_; }

 private:
  Demo() = default;
  // Stops the RESTinio server before its adapter goes.
 public:
  ~Demo();

 private:
  std::shared_ptr<Guard> guard_;
  std::unique_ptr<DemoApp> app_;
  std::unique_ptr<beast::IdempotentHandler> handler_;
  std::unique_ptr<Transfers> transfers_;
  // One of the two servers runs. RESTinio's server owns the I/O context the
  // RESTinio adapter runs its requests on, so it is declared before the
  // adapter and stopped (Shutdown, Wait) before the adapter goes.
  // shared_ptr: a build without RESTinio has no definitions of them.
  std::shared_ptr<RestinioServer> restinio_server_;
  std::shared_ptr<restinio::IdempotentHandler> restinio_handler_;
  // Declared last: destroyed first, so no request runs into a dead handler.
  std::unique_ptr<HttpServer> server_;
};

}  // namespace idem::demo

#endif  // IDEM_DEMO_DEMO_H_
