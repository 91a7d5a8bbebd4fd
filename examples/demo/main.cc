// idem-demo: the demo server of SEMANTICS.md ("The demo server").
//
//   idem-demo [--listen 127.0.0.1:8080] [--store URI] [--ttl SECONDS]
//             [--lock-timeout SECONDS (fractions allowed)]
//             [--lock-renewal SECONDS (fractions allowed; 0 = off)]
//             [--lock-wait MILLISECONDS]
//             [--threads N] [--store-calls auto|inline|pool]
//             [--store-threads N] [--max-connections N]
//             [--instance NAME] [--sweep-interval SECONDS]
//             [--key-per-operation]
//             [--exactly-once]
//             [--http beast|restinio] [--protection on|off]
//             [--response-keys FILE] [--fingerprint-fields /a,/b/c]
//
// Prints "listening on HOST:PORT" once it accepts connections and exits
// cleanly (in-flight requests answered) on SIGINT or SIGTERM. The store is
// --store, else $IDEM_STORE, else kDefaultStoreUri (RocksDB in ./var/idem).
// Exit status: 0 after a signal, 1 when the store cannot be opened (held by
// another process, say) or the address bound, 2 for bad flags (a duration
// out of its range included: flags.h).

#include <signal.h>
#include <unistd.h>

#include <optional>
#include <string>

#include <boost/program_options.hpp>

#include "command_line.h"
#include "demo.h"
#include "flags.h"
#include "idem/version.h"
#include "serve.h"
#include "stored_responses.h"

namespace {

namespace po = boost::program_options;

constexpr char kProgram[] = "idem-demo";

#if IDEM_DEMO_WITH_RESTINIO
constexpr char kHttpHelp[] =
    "the HTTP server: beast (Boost.Beast) or restinio (RESTinio); the same "
    "endpoints on either (default beast)";
#else
constexpr char kHttpHelp[] =
    "the HTTP server: beast (Boost.Beast; this build has no RESTinio) "
    "(default beast)";
#endif

int BadFlags(const std::string& message) {
  return idem::demo::BadFlags(kProgram, message);
}

}  // namespace

int main(int argc, char** argv) {
  idem::demo::DemoOptions options;
  std::string listen = "127.0.0.1:8080";
  // Strings: flags.h parses them with range checks, so that no value wraps.
  idem::demo::LockFlagsText lock_flags;
  std::string store_calls = "auto";
  int store_threads = 0;
  long long max_connections = 0;
  long long max_order_bytes =
      static_cast<long long>(idem::demo::DemoApp::kDefaultMaxOrderBytes);
  std::string sweep_interval = "60";
  std::string http = "beast";
  std::string protection = "on";

  const std::string store_help =
      "idempotency store URI (default: $IDEM_STORE, else " +
      std::string(idem::demo::kDefaultStoreUri) +
      ", relative to the working directory; memory: forgets on exit)";
  po::options_description flags(
      "idem-demo: an HTTP server whose POST /orders and POST /payments "
      "honour Idempotency-Key\nOptions");
  // clang-format off
  flags.add_options()
      ("help,h", "print this help and exit")
      ("version", "print idem-demo's version (the idem library's) and exit")
      ("listen", po::value(&listen)->value_name("HOST:PORT"),
       "address to listen on; port 0 picks a free one (default 127.0.0.1:8080)")
      ("store", po::value<std::string>()->value_name("URI"),
       store_help.c_str());
  idem::demo::AddLockFlags(flags, lock_flags,
                           {.work = "request", .busy_answer = "409"});
  flags.add_options()
      ("threads", po::value(&options.threads)->value_name("N"),
       "I/O threads (default 2)")
      ("store-calls", po::value(&store_calls)->value_name("MODE"),
       "where store calls run: inline on the I/O threads, on a pool of "
       "--store-threads threads, or auto = inline for memory:, else pool "
       "(default auto)")
      ("store-threads", po::value(&store_threads)->value_name("N"),
       "threads of the store-call pool; 0 = the store's connection pool "
       "size, else 4 (default 0)")
      ("max-connections", po::value(&max_connections)->value_name("N"),
       "most connections open at once; 0 = half the open-file limit, at most "
       "10000 (default 0)")
      ("max-order-bytes", po::value(&max_order_bytes)->value_name("BYTES"),
       "bytes of orders kept for GET /orders/<id>, oldest forgotten first; "
       "0 keeps none, at most 68719476736 (default 16777216)")
      ("instance", po::value(&options.instance)->value_name("NAME"),
       "instance name, sent as X-Demo-Instance and part of order ids (default demo)")
      ("sweep-interval", po::value(&sweep_interval)->value_name("SECONDS"),
       "how often expired records are deleted from the store in the "
       "background; 0 = never (default 60)")
      ("key-per-operation",
       "the method and route are part of a key's record: one key on POST "
       "/orders and POST /payments is two operations (default: off, the "
       "second answers 422)")
      ("exactly-once", "POST /transfers completes the idempotency record in "
       "its own SQL transaction (sqlite: and postgresql: stores only)")
      ("http", po::value(&http)->value_name("SERVER"), kHttpHelp)
      ("protection", po::value(&protection)->value_name("on|off"),
       "whether idem protects POST /orders, /payments and /transfers from "
       "the start; off, every request runs its handler unprotected "
       "(counted as unprotected; GET /stats says \"protection\": \"off\") "
       "(default on)")
      ("response-keys", po::value<std::string>()->value_name("FILE"),
       "seal stored responses (AES-256-GCM) with these keys: one id:64-hex "
       "per line, the first seals, every one opens; the file must be "
       "readable by its owner only (chmod 600)")
      ("fingerprint-fields", po::value<std::string>()->value_name("POINTERS"),
       "POST /orders: only these JSON members (comma-separated RFC 6901 "
       "pointers, e.g. /item,/customer/id) identify a request; a retry that "
       "differs elsewhere replays (default: the whole body)")
      ("no-idem", "serve without idem (the benchmark baseline)");
  // clang-format on
  po::variables_map vm;
  if (auto exit_status = idem::demo::ParseCommandLine(
          argc, argv, flags, kProgram,
          std::string(kProgram) + " " + std::string(idem::Version()), vm)) {
    return *exit_status;
  }
  auto address = idem::demo::ParseListenFlag(listen);
  if (!address) return BadFlags(address.error().message());
  options.host = address->host;
  options.port = address->port;
  auto locks = idem::demo::ParseLockFlags(lock_flags);
  if (!locks) return BadFlags(locks.error().message());
  auto sweep_value = idem::demo::ParseDurationFlag(
      idem::demo::SweepIntervalFlag(), sweep_interval);
  if (!sweep_value) return BadFlags(sweep_value.error().message());
  options.sweep_interval =
      std::chrono::duration_cast<std::chrono::seconds>(*sweep_value);
  if (auto threads = idem::demo::CheckThreadsFlag(options.threads); !threads) {
    return BadFlags(threads.error().message());
  }
  if (store_threads < 0 || store_threads > 1024) {
    return BadFlags("--store-threads must be between 0 and 1024");
  }
  options.store_threads = static_cast<std::size_t>(store_threads);
  if (max_connections < 0 || max_connections > 10'000'000) {
    return BadFlags("--max-connections must be between 0 and 10000000");
  }
  options.max_connections = static_cast<std::size_t>(max_connections);
  if (max_order_bytes < 0 || static_cast<unsigned long long>(max_order_bytes) >
                                 idem::demo::DemoApp::kMaxOrderBytesLimit) {
    return BadFlags("--max-order-bytes must be between 0 and 68719476736");
  }
  options.max_order_bytes = static_cast<std::size_t>(max_order_bytes);
  if (store_calls == "auto") {
    options.store_calls = idem::beast::StoreCalls::kAuto;
  } else if (store_calls == "inline") {
    options.store_calls = idem::beast::StoreCalls::kInline;
  } else if (store_calls == "pool") {
    options.store_calls = idem::beast::StoreCalls::kPool;
  } else {
    return BadFlags("--store-calls wants auto, inline or pool, got '" +
                    store_calls + "'");
  }
  auto framework = idem::demo::ParseHttpFlag(http);
  if (!framework) return BadFlags(framework.error().message());
  options.http = *framework;
  auto protection_value = idem::demo::ParseProtectionFlag(protection);
  if (!protection_value) return BadFlags(protection_value.error().message());
  options.protection = *protection_value;
  options.ttl = locks->ttl;
  options.lock_timeout = locks->lock_timeout;
  options.lock_renewal = locks->lock_renewal;
  options.lock_wait = locks->lock_wait;
  options.idem = vm.count("no-idem") == 0;
  options.key_per_operation = vm.count("key-per-operation") > 0;
  std::optional<std::string> store_flag;
  if (vm.count("store")) store_flag = vm["store"].as<std::string>();
  options.store_uri = idem::demo::ResolveStoreUri(store_flag);
  options.exactly_once = vm.count("exactly-once") != 0;
  if (vm.count("response-keys")) {
    auto keys =
        idem::demo::LoadResponseKeysFlag(vm["response-keys"].as<std::string>());
    if (!keys) return BadFlags(keys.error().message());
    options.response_keys = std::move(*keys);
  }
  if (vm.count("fingerprint-fields")) {
    auto fields = idem::demo::ParseFingerprintFieldsFlag(
        vm["fingerprint-fields"].as<std::string>());
    if (!fields) return BadFlags(fields.error().message());
    options.fingerprint_fields = std::move(*fields);
  }
  if (options.exactly_once &&
      (!options.idem || !idem::demo::IsSqlStoreUri(options.store_uri))) {
    return BadFlags(
        "--exactly-once needs a SQL store (--store sqlite:PATH or "
        "postgresql://...) and idem on (no --no-idem); the store's scheme is "
        "'" +
        options.store_uri.substr(0, options.store_uri.find(':')) + "'");
  }

  // Signals are taken by sigwait, never by a handler on some server thread.
  const sigset_t signals = idem::demo::BlockStopSignals();
  auto demo = idem::demo::Demo::Create(options);
  if (!demo) {
    idem::demo::ReportCreateFailure(
        "idem-demo", demo.error(),
        options.store_uri == idem::demo::kDefaultStoreUri,
        "rocksdb:./var/idem-2");
    return 1;
  }
  return idem::demo::ServeUntilSignal("idem-demo", **demo, signals);
}
