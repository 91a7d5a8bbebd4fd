#include "serve.h"

#include <pthread.h>

#include <cstdio>
#include <filesystem>
#include <system_error>

namespace idem::demo {

sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

void ReportCreateFailure(std::string_view program, const Error& error,
                         bool default_store, std::string_view other_store) {
  std::cerr << program
            << ": cannot open the idempotency store: " << error.message()
            << std::endl;
  if (error.code() != ErrorCode::kUnavailable || !default_store) return;
  std::error_code ec;
  const std::filesystem::path cwd = std::filesystem::current_path(ec);
  std::cerr << program << ": is another " << program
            << " running in this directory"
            << (ec ? std::string() : " (" + cwd.string() + ")")
            << "? Give this one its own --store (e.g. " << other_store
            << ", or memory:)." << std::endl;
}

void PrintListening(const std::string& host, std::uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  std::printf("listening on %s%s%s:%u\n", v6 ? "[" : "", host.c_str(),
              v6 ? "]" : "", static_cast<unsigned>(port));
  std::fflush(stdout);
}

}  // namespace idem::demo
