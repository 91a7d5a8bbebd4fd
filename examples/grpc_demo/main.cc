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

#include <string>

#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>
#include <boost/program_options.hpp>

#include "command_line.h"
#include "flags.h"
#include "grpc_demo.h"
#include "idem/version.h"
#include "serve.h"

namespace {

namespace po = boost::program_options;
namespace demo = idem::demo;

constexpr char kProgram[] = "idem-grpc-demo";

int BadFlags(const std::string& message) {
  return idem::demo::BadFlags(kProgram, message);
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built without NDEBUG, so every absl::Mutex that gRPC
  // locks also runs Abseil's deadlock detector: a process-wide graph of
  // lock orders behind one global spin lock. That serializes gRPC's threads
  // and, on 2 cores, cost a protected call about a quarter of its
  // throughput (docs/GRPC.md, "Abseil's deadlock detection"). It is a
  // debugging aid, off in Abseil's release builds: off here, before gRPC
  // starts, for --no-idem alike.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  idem::grpc_demo::GrpcDemoOptions options;
  std::string listen = "127.0.0.1:50051";
  std::string store = std::string(idem::grpc_demo::kDefaultStoreUri);
  // Strings: flags.h parses them with range checks, so that no value wraps.
  demo::LockFlagsText lock_flags;

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
      ("store", po::value(&store)->value_name("URI"), store_help.c_str());
  demo::AddLockFlags(flags, lock_flags,
                     {.work = "call", .busy_answer = "ABORTED"});
  flags.add_options()
      ("threads", po::value(&options.threads)->value_name("N"),
       "threads that run the protected calls, their handlers and timers; "
       "gRPC polls on threads of its own (default 2)")
      ("instance", po::value(&options.instance)->value_name("NAME"),
       "instance name: Order.instance and part of order ids "
       "(default grpc-demo)")
      ("no-idem", "serve without idem (the benchmark baseline)");
  // clang-format on
  po::variables_map vm;
  if (auto exit_status = demo::ParseCommandLine(
          argc, argv, flags, kProgram,
          std::string(kProgram) + " " + std::string(idem::Version()) +
              " (gRPC " + grpc::Version() + ")",
          vm)) {
    return *exit_status;
  }
  auto address = demo::ParseListenFlag(listen);
  if (!address) return BadFlags(address.error().message());
  options.host = address->host;
  options.port = address->port;
  auto locks = demo::ParseLockFlags(lock_flags);
  if (!locks) return BadFlags(locks.error().message());
  if (auto threads = demo::CheckThreadsFlag(options.threads); !threads) {
    return BadFlags(threads.error().message());
  }
  if (options.instance.empty()) return BadFlags("--instance must not be empty");
  if (store.empty()) return BadFlags("--store must not be empty");
  options.store_uri = store;
  options.ttl = locks->ttl;
  options.lock_timeout = locks->lock_timeout;
  options.lock_renewal = locks->lock_renewal;
  options.lock_wait = locks->lock_wait;
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
