// A program built against an installed idem (see CMakeLists.txt; the
// package stage of scripts/test.sh also builds it with pkg-config). It
// checks that the headers it compiled with and the library it links are
// one version, opens the store named by argv[1] (default
// memory:?capacity=10) and runs one request through a Guard twice: the
// handler must run once and the second run must be a replay.
//
// IDEM_CONSUMER_STORES: the store is opened by OpenStore (idem::stores);
// otherwise by one store's own OpenFromUri, so that the store's one -dev
// package is all the program needs: IDEM_CONSUMER_HEADER names its header
// (<idem/sqlite_store.h>) and IDEM_CONSUMER_CLASS its class
// (idem::SqliteStore), both derived from the store's name by CMakeLists.txt.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include <idem/guard.h>
#include <idem/version.h>

#if defined(IDEM_CONSUMER_STORES)
#include <idem/open_store.h>
#elif defined(IDEM_CONSUMER_HEADER) && defined(IDEM_CONSUMER_CLASS)
#include <idem/store_uri.h>

#include IDEM_CONSUMER_HEADER
using StoreClass = IDEM_CONSUMER_CLASS;
#else
#error "define IDEM_CONSUMER_STORES, or IDEM_CONSUMER_HEADER and _CLASS"
#endif

namespace {

idem::Result<std::unique_ptr<idem::Store>> Open(std::string_view uri) {
#if defined(IDEM_CONSUMER_STORES)
  return idem::OpenStore(uri);
#else
  IDEM_ASSIGN_OR_RETURN(idem::StoreUri parsed, idem::StoreUri::Parse(uri));
  return StoreClass::OpenFromUri(parsed, {});
#endif
}

}  // namespace

int main(int argc, char** argv) {
  if (idem::Version() != IDEM_VERSION) {
    std::fprintf(stderr, "install consumer: headers %s, library %.*s\n",
                 IDEM_VERSION, static_cast<int>(idem::Version().size()),
                 idem::Version().data());
    return 1;
  }
  const std::string_view uri = argc > 1 ? argv[1] : "memory:?capacity=10";
  auto store = Open(uri);
  if (!store) {
    std::fprintf(stderr, "%s\n", store.error().ToString().c_str());
    return 1;
  }
  idem::GuardSetup setup;
  setup.store = std::move(*store);
  // Stores shared with other runs (a PostgreSQL table, a Redis database)
  // keep the record briefly only.
  setup.options.ttl = std::chrono::minutes(1);
  auto guard = idem::Guard::Create(std::move(setup));
  if (!guard) {
    std::fprintf(stderr, "%s\n", guard.error().ToString().c_str());
    return 1;
  }
  // A key of its own per run: a durable store remembers earlier runs' keys.
  const std::string key =
      "consumer-" +
      std::to_string(
          std::chrono::system_clock::now().time_since_epoch().count());
  const idem::HeaderView headers[] = {{"Idempotency-Key", key}};
  idem::RequestView request;
  request.method = "POST";
  request.target = "/orders";
  request.headers = headers;
  request.scope = "";
  int runs = 0;
  auto handler = [&] {
    ++runs;
    return idem::Response{201, {{"Content-Type", "text/plain"}}, "made"};
  };
  (*guard)->Run(request, handler);
  const idem::Response replay = (*guard)->Run(request, handler);
  const bool ok = runs == 1 && replay.status == 201 &&
                  replay.FindHeader("Idempotent-Replayed") == "true";
  const std::string scheme(uri.substr(0, uri.find(':')));
  std::printf("install consumer (idem %s, %s): %s\n", IDEM_VERSION,
              scheme.c_str(), ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
