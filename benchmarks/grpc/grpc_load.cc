// idem-grpc-load: a closed-loop gRPC load on idem-grpc-demo's
// Orders.CreateOrder, for scripts/bench.sh's gRPC section
// (benchmarks/grpc/bench.sh).
//
//   idem-grpc-load --target 127.0.0.1:PORT [--in-flight 32] [--seconds 5]
//                  [--warmup 1] [--keys fresh|replay] [--replay-keys 1000]
//                  [--channels 4] [--label NAME]
//
// --in-flight unary calls are outstanding at any time (each completion
// starts the next call on the same slot), over --channels HTTP/2
// connections. fresh: every call carries a new idempotency-key; replay: the
// calls cycle over --replay-keys keys, each made once before the
// measurement, so that every measured call is a replay (against an
// idem-grpc-demo with idem; against --no-idem the same calls, the
// baseline). Calls completing during --warmup seconds are not counted; then
// every call completing within --seconds is.
//
// Prints one line of JSON to stdout:
//   {"label": ..., "keys": "fresh", "in_flight": 32, "channels": 4,
//    "seconds": 5.0, "calls": N, "calls_per_s": X, "p50_us": ..,
//    "p99_us": .., "errors": E, "replayed": R}
// errors: measured calls whose status was not OK; replayed: measured calls
// whose trailing metadata had idempotent-replayed: true. Exit status 0, 1
// when the server could not be reached or a replay-key call failed, 2 for
// bad flags.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>
#include <boost/program_options.hpp>

#include "orders.grpc.pb.h"

namespace {

namespace po = boost::program_options;
namespace v1 = ::idem::demo::v1;
using Clock = std::chrono::steady_clock;

constexpr auto kCallDeadline = std::chrono::seconds(30);

struct Shared {
  std::vector<std::unique_ptr<v1::Orders::Stub>> stubs;
  bool fresh = true;
  std::string key_prefix;  // Fresh keys: prefix + counter.
  std::vector<std::string> replay_keys;
  std::atomic<std::uint64_t> next{0};
  // 0: warm-up, 1: measuring, 2: stopping.
  std::atomic<int> phase{0};
  std::mutex mu;
  std::condition_variable stopped;
  int running = 0;
};

// One in-flight call at a time; its figures are its own (no lock).
class Slot {
 public:
  Slot(Shared& shared, v1::Orders::Stub* stub) : s_(shared), stub_(stub) {
    request_.set_item("book");
    request_.set_quantity(1);
  }

  void Start() {
    context_ = std::make_unique<grpc::ClientContext>();
    context_->set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    const std::uint64_t n = s_.next.fetch_add(1, std::memory_order_relaxed);
    context_->AddMetadata("idempotency-key",
                          s_.fresh ? s_.key_prefix + std::to_string(n)
                                   : s_.replay_keys[n % s_.replay_keys.size()]);
    measured_ = s_.phase.load(std::memory_order_acquire) == 1;
    started_ = Clock::now();
    stub_->async()->CreateOrder(context_.get(), &request_, &order_,
                                [this](grpc::Status status) { Done(status); });
  }

  std::vector<std::uint32_t> latencies_us;
  std::uint64_t errors = 0;
  std::uint64_t replayed = 0;

 private:
  void Done(const grpc::Status& status) {
    const auto took = Clock::now() - started_;
    // A call counts when it both started and ended in the measurement.
    if (measured_ && s_.phase.load(std::memory_order_acquire) == 1) {
      latencies_us.push_back(static_cast<std::uint32_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(took).count()));
      if (!status.ok()) ++errors;
      const auto& trailers = context_->GetServerTrailingMetadata();
      auto it = trailers.find("idempotent-replayed");
      if (it != trailers.end() && it->second == "true") ++replayed;
    }
    if (s_.phase.load(std::memory_order_acquire) < 2) {
      Start();
      return;
    }
    std::lock_guard lock(s_.mu);
    if (--s_.running == 0) s_.stopped.notify_all();
  }

  Shared& s_;
  v1::Orders::Stub* stub_;
  v1::CreateOrderRequest request_;
  v1::Order order_;
  std::unique_ptr<grpc::ClientContext> context_;
  bool measured_ = false;
  Clock::time_point started_;
};

std::string RandomHex() {
  std::random_device device;
  char text[17];
  std::snprintf(text, sizeof text, "%08x%08x", device(), device());
  return text;
}

// Makes each replay key's record: one call each, in parallel batches.
bool MakeReplayKeys(Shared& s) {
  for (std::size_t i = 0; i < s.replay_keys.size(); ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    context.AddMetadata("idempotency-key", s.replay_keys[i]);
    v1::CreateOrderRequest request;
    request.set_item("book");
    request.set_quantity(1);
    v1::Order order;
    const grpc::Status status =
        s.stubs[i % s.stubs.size()]->CreateOrder(&context, request, &order);
    if (!status.ok()) {
      std::cerr << "idem-grpc-load: making a replay key failed: "
                << status.error_code() << " " << status.error_message()
                << std::endl;
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // As idem-grpc-demo (examples/grpc_demo/main.cc): Debian's Abseil would
  // run its deadlock detector, a global lock per absl::Mutex acquisition,
  // in the client that shares the servers' cores.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::string target;
  std::string keys = "fresh";
  std::string label;
  int in_flight = 32;
  int channels = 4;
  int replay_key_count = 1000;
  double seconds = 5;
  double warmup = 1;
  po::options_description flags(
      "idem-grpc-load: closed-loop unary calls of Orders.CreateOrder\nOptions");
  // clang-format off
  flags.add_options()
      ("help,h", "print this help and exit")
      ("target", po::value(&target)->value_name("HOST:PORT"), "the server")
      ("in-flight", po::value(&in_flight)->value_name("N"),
       "calls outstanding at once (default 32)")
      ("channels", po::value(&channels)->value_name("N"),
       "HTTP/2 connections the calls spread over (default 4)")
      ("seconds", po::value(&seconds)->value_name("S"),
       "measurement time (default 5)")
      ("warmup", po::value(&warmup)->value_name("S"),
       "time before the measurement, not counted (default 1)")
      ("keys", po::value(&keys)->value_name("fresh|replay"),
       "a new key per call, or replays of --replay-keys keys (default fresh)")
      ("replay-keys", po::value(&replay_key_count)->value_name("N"),
       "keys the replay load cycles over (default 1000)")
      ("label", po::value(&label)->value_name("NAME"),
       "a name for the output line (default: --keys)");
  // clang-format on
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, flags), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "idem-grpc-load: " << e.what() << std::endl;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << flags << std::endl;
    return 0;
  }
  auto bad = [](const char* message) {
    std::cerr << "idem-grpc-load: " << message << std::endl;
    return 2;
  };
  if (target.empty()) return bad("--target HOST:PORT is required");
  if (keys != "fresh" && keys != "replay") {
    return bad("--keys wants fresh or replay");
  }
  if (in_flight < 1 || in_flight > 10000) {
    return bad("--in-flight must be between 1 and 10000");
  }
  if (channels < 1 || channels > 256) {
    return bad("--channels must be between 1 and 256");
  }
  if (replay_key_count < 1 || replay_key_count > 1000000) {
    return bad("--replay-keys must be between 1 and 1000000");
  }
  if (!(seconds > 0 && seconds <= 3600) || !(warmup >= 0 && warmup <= 3600)) {
    return bad("--seconds must be in (0, 3600] and --warmup in [0, 3600]");
  }
  if (label.empty()) label = keys;

  Shared s;
  s.fresh = keys == "fresh";
  s.key_prefix = "load-" + RandomHex() + "-";
  for (int i = 0; i < channels; ++i) {
    grpc::ChannelArguments args;
    // A distinct argument per channel: its own connection, not a shared
    // subchannel.
    args.SetInt("idem.load.channel", i);
    auto channel = grpc::CreateCustomChannel(
        target, grpc::InsecureChannelCredentials(), args);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                   std::chrono::seconds(30))) {
      std::cerr << "idem-grpc-load: cannot connect to " << target << std::endl;
      return 1;
    }
    s.stubs.push_back(v1::Orders::NewStub(channel));
  }
  if (!s.fresh) {
    for (int i = 0; i < replay_key_count; ++i) {
      s.replay_keys.push_back(s.key_prefix + "r" + std::to_string(i));
    }
    if (!MakeReplayKeys(s)) return 1;
  }

  std::vector<std::unique_ptr<Slot>> slots;
  for (int i = 0; i < in_flight; ++i) {
    slots.push_back(std::make_unique<Slot>(s, s.stubs[i % channels].get()));
  }
  s.running = in_flight;
  for (auto& slot : slots) slot->Start();
  std::this_thread::sleep_for(std::chrono::duration<double>(warmup));
  s.phase.store(1, std::memory_order_release);
  const auto measure_start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  s.phase.store(2, std::memory_order_release);
  const double measured =
      std::chrono::duration<double>(Clock::now() - measure_start).count();
  {
    std::unique_lock lock(s.mu);
    s.stopped.wait(lock, [&] { return s.running == 0; });
  }

  std::vector<std::uint32_t> all;
  std::uint64_t errors = 0;
  std::uint64_t replayed = 0;
  for (const auto& slot : slots) {
    all.insert(all.end(), slot->latencies_us.begin(), slot->latencies_us.end());
    errors += slot->errors;
    replayed += slot->replayed;
  }
  auto percentile = [&all](double q) -> std::uint32_t {
    if (all.empty()) return 0;
    const std::size_t at = std::min(
        all.size() - 1, static_cast<std::size_t>(q * (all.size() - 1) + 0.5));
    std::nth_element(all.begin(), all.begin() + static_cast<long>(at),
                     all.end());
    return all[at];
  };
  const std::uint32_t p50 = percentile(0.50);
  const std::uint32_t p99 = percentile(0.99);
  std::printf(
      "{\"label\": \"%s\", \"keys\": \"%s\", \"in_flight\": %d, "
      "\"channels\": %d, \"seconds\": %.3f, \"calls\": %zu, "
      "\"calls_per_s\": %.1f, \"p50_us\": %u, \"p99_us\": %u, "
      "\"errors\": %llu, \"replayed\": %llu}\n",
      label.c_str(), keys.c_str(), in_flight, channels, measured, all.size(),
      static_cast<double>(all.size()) / measured, p50, p99,
      static_cast<unsigned long long>(errors),
      static_cast<unsigned long long>(replayed));
  std::fflush(stdout);
  return 0;
}
