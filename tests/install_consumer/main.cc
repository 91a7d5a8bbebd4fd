// Opens a store by URI and runs one request through a Guard twice: the
// second run must be a replay.
#include <cstdio>

#include <idem/guard.h>
#include <idem/open_store.h>

int main() {
  auto store = idem::OpenStore("memory:?capacity=10");
  if (!store) {
    std::fprintf(stderr, "%s\n", store.error().ToString().c_str());
    return 1;
  }
  idem::GuardSetup setup;
  setup.store = std::move(*store);
  auto guard = idem::Guard::Create(std::move(setup));
  if (!guard) return 1;
  const idem::HeaderView headers[] = {{"Idempotency-Key", "k1"}};
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
  std::printf("install consumer: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
