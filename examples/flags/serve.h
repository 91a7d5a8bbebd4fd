// What both demo servers' main does around its server, apart from their
// main.cc (idem-demo's, idem-grpc-demo's) so that both do it one way: stop
// signals taken by sigwait, the hint when the default store is held by
// another process, the "listening on HOST:PORT" line a supervisor or test
// waits for, and the shutdown.
//
// Thread-safety: main's thread only.

#ifndef IDEM_DEMO_SERVE_H_
#define IDEM_DEMO_SERVE_H_

#include <signal.h>

#include <cstdint>
#include <iostream>
#include <string>
#include <string_view>

#include "idem/error.h"

namespace idem::demo {

// Blocks SIGINT and SIGTERM in the calling thread, so that every thread it
// starts afterwards inherits the mask and only ServeUntilSignal's sigwait
// takes them. Call before any thread starts.
sigset_t BlockStopSignals();

// Writes to stderr why `program` could not create its server (`error`,
// opening its store) and, when the store is the default one (one directory
// per working directory) and is held (kUnavailable), the likely cause: a
// second `program` started beside the first, which wants its own --store
// (e.g. `other_store`).
void ReportCreateFailure(std::string_view program, const Error& error,
                         bool default_store, std::string_view other_store);

// Writes "listening on HOST:PORT" (an IPv6 host in brackets) to stdout and
// flushes it at once: a supervisor or test reading a pipe waits for it.
void PrintListening(const std::string& host, std::uint16_t port);

// Starts `server` (its Start, host, port, Shutdown and Wait), says where it
// listens, waits for one of `signals` (BlockStopSignals) and shuts it down.
// Returns main's exit status: 0, or 1 when Start failed (said on stderr).
template <typename Server>
int ServeUntilSignal(std::string_view program, Server& server,
                     const sigset_t& signals) {
  if (auto started = server.Start(); !started) {
    std::cerr << program << ": " << started.error().message() << std::endl;
    return 1;
  }
  PrintListening(server.host(), server.port());
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  server.Shutdown();
  server.Wait();
  return 0;
}

}  // namespace idem::demo

#endif  // IDEM_DEMO_SERVE_H_
