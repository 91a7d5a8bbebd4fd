// idem-grpc-demo: the gRPC demo server (docs/GRPC.md, "The demo"): the
// Orders service of orders.proto with CreateOrder protected by idem::grpc.
//
//   idem-grpc-demo [--listen 127.0.0.1:50051] [--store URI] [--ttl SECONDS]
//                  [--lock-timeout SECONDS (fractions allowed)]
//                  [--lock-renewal SECONDS (fractions allowed; 0 = off)]
//                  [--lock-wait MILLISECONDS] [--threads N]
//                  [--instance NAME] [--no-idem] [--version]
//
// Prints "listening on HOST:PORT" (the port bound) once it serves and exits
// cleanly (calls in flight answered) on SIGINT or SIGTERM. The store is
// --store, else kDefaultStoreUri (RocksDB in ./var/idem-grpc). Exit status:
// 0 after a signal, 1 when the store cannot be opened or the address bound,
// 2 for bad flags (the message names the flag). Flags parse as idem-demo's
// (examples/flags).

#include <signal.h>

#include <iostream>
#include <string>

#include <grpcpp/grpcpp.h>
#include <boost/program_options.hpp>

#include "flags.h"
#include "grpc_demo.h"
#include "idem/version.h"
#include "serve.h"

namespace {

namespace po = boost::program_options;
namespace demo = idem::demo;

constexpr int kExitBadFlags = 2;

int BadFlags(const std::string& message) {
  std::cerr << "idem-grpc-demo: " << message << "\n"
            << "Try 'idem-grpc-demo --help'." << std::endl;
  return kExitBadFlags;
}

}  // namespace

int main(int argc, char** argv) {
  idem::grpc_demo::GrpcDemoOptions options;
  std::string listen = "127.0.0.1:50051";
  std::string store = std::string(idem::grpc_demo::kDefaultStoreUri);
  // Strings: flags.h parses them with range checks, so that no value wraps.
  std::string ttl = "86400";
  std::string lock_timeout = "60";
  std::string lock_renewal = "0";
  std::string lock_wait = "0";

  const std::string store_help =
      "idempotency store URI (default " +
      std::string(idem::grpc_demo::kDefaultStoreUri) +
      ", relative to the working directory; memory: forgets on exit)";
  po::options_description flags(
      "idem-grpc-demo: a gRPC server whose Orders.CreateOrder honours the "
      "idempotency-key metadata\nOptions");
  // clang-format off
  flags.add_options()
      ("help,h", "print this help and exit")
      ("version", "print idem's version and exit")
      ("listen", po::value(&listen)->value_name("HOST:PORT"),
       "address to listen on; port 0 picks a free one (default "
       "127.0.0.1:50051)")
      ("store", po::value(&store)->value_name("URI"), store_help.c_str())
      ("ttl", po::value(&ttl)->value_name("SECONDS"),
       "how long a key's record lives, at most 31536000 = 365 days "
       "(default 86400)")
      ("lock-timeout", po::value(&lock_timeout)->value_name("SECONDS"),
       "how long an in-progress call blocks its key, fractions allowed "
       "(0.3), at most 86400 and at most --ttl (default 60)")
      ("lock-renewal", po::value(&lock_renewal)->value_name("SECONDS"),
       "renew an in-progress call's lock this often while its handler "
       "runs; fractions allowed (0.3), below --lock-timeout; 0 = off "
       "(default 0)")
      ("lock-wait", po::value(&lock_wait)->value_name("MILLISECONDS"),
       "how long a duplicate waits for the first call before ABORTED, at "
       "most 3600000 (default 0)")
      ("threads", po::value(&options.threads)->value_name("N"),
       "threads that run the protected calls, their handlers and timers; "
       "gRPC polls on threads of its own (default 2)")
      ("instance", po::value(&options.instance)->value_name("NAME"),
       "instance name: Order.instance and part of order ids "
       "(default grpc-demo)")
      ("no-idem", "serve without idem (the benchmark baseline)");
  // clang-format on
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(flags).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return BadFlags(e.what());
  }
  if (vm.count("help")) {
    std::cout << flags << std::endl;
    return 0;
  }
  if (vm.count("version")) {
    std::cout << "idem-grpc-demo " << idem::Version() << " (gRPC "
              << grpc::Version() << ")" << std::endl;
    return 0;
  }
  auto address = demo::ParseListenFlag(listen);
  if (!address) return BadFlags(address.error().message());
  options.host = address->host;
  options.port = address->port;
  auto ttl_value = demo::ParseDurationFlag(demo::TtlFlag(), ttl);
  if (!ttl_value) return BadFlags(ttl_value.error().message());
  auto lock_timeout_value =
      demo::ParseDurationFlag(demo::LockTimeoutFlag(), lock_timeout);
  if (!lock_timeout_value) {
    return BadFlags(lock_timeout_value.error().message());
  }
  auto lock_renewal_value =
      demo::ParseDurationFlag(demo::LockRenewalFlag(), lock_renewal);
  if (!lock_renewal_value) {
    return BadFlags(lock_renewal_value.error().message());
  }
  if (auto below = demo::LockRenewalBelowTimeout(*lock_renewal_value,
                                                 *lock_timeout_value);
      !below) {
    return BadFlags(below.error().message());
  }
  auto lock_wait_value =
      demo::ParseDurationFlag(demo::LockWaitFlag(), lock_wait);
  if (!lock_wait_value) return BadFlags(lock_wait_value.error().message());
  if (auto threads = demo::CheckThreadsFlag(options.threads); !threads) {
    return BadFlags(threads.error().message());
  }
  if (options.instance.empty()) return BadFlags("--instance must not be empty");
  if (store.empty()) return BadFlags("--store must not be empty");
  options.store_uri = store;
  options.ttl = std::chrono::duration_cast<std::chrono::seconds>(*ttl_value);
  options.lock_timeout = *lock_timeout_value;
  options.lock_renewal = *lock_renewal_value;
  options.lock_wait =
      std::chrono::duration_cast<std::chrono::milliseconds>(*lock_wait_value);
  options.idem = vm.count("no-idem") == 0;

  // Signals are taken by sigwait, never by a handler on some server thread.
  const sigset_t signals = demo::BlockStopSignals();
  auto server = idem::grpc_demo::GrpcDemo::Create(options);
  if (!server) {
    demo::ReportCreateFailure(
        "idem-grpc-demo", server.error(),
        options.store_uri == idem::grpc_demo::kDefaultStoreUri,
        "rocksdb:./var/idem-grpc-2");
    return 1;
  }
  return demo::ServeUntilSignal("idem-grpc-demo", **server, signals);
}
