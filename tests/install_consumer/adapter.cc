// An HTTP adapter built against an installed idem (CMakeLists.txt,
// IDEM_CONSUMER_ADAPTERS): compiles the adapter's public headers, links its
// archive and its dependencies (Boost, and RESTinio's fmt), and runs one
// request through it twice without a socket: the handler must run once
// and the second answer must be a replay.
//
// IDEM_CONSUMER_BEAST: idem::beast's AsyncHandle. IDEM_CONSUMER_RESTINIO:
// idem::restinio has no socket-less entry, so its checks are its set-up
// (Create, Protect, the limits RESTinio needs) and the chain handler's
// type; the request goes through the Guard the adapter holds.
#include <utility>  // Before Asio's coroutine headers; see idem/asio/handler.h.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include <idem/guard.h>
#include <idem/memory_store.h>
#include <idem/store_uri.h>
#include <idem/version.h>
#include <boost/asio/io_context.hpp>

#if defined(IDEM_CONSUMER_BEAST)
#include <idem/beast/idempotent_handler.h>
#elif defined(IDEM_CONSUMER_RESTINIO)
#include <idem/restinio/idempotent_handler.h>
#else
#error "define IDEM_CONSUMER_BEAST or IDEM_CONSUMER_RESTINIO"
#endif

namespace {

int Fail(const char* what, const idem::Error& error) {
  std::fprintf(stderr, "adapter consumer: %s: %s\n", what,
               error.ToString().c_str());
  return 1;
}

}  // namespace

int main() {
  auto uri = idem::StoreUri::Parse("memory:?capacity=10");
  if (!uri) return Fail("store URI", uri.error());
  auto store = idem::MemoryStore::OpenFromUri(*uri, {});
  if (!store) return Fail("store", store.error());
  idem::GuardSetup setup;
  setup.store = std::move(*store);
  auto created = idem::Guard::Create(std::move(setup));
  if (!created) return Fail("guard", created.error());
  const std::shared_ptr<idem::Guard> guard = std::move(*created);
  boost::asio::io_context ioc;
  int runs = 0;
  bool ok = false;

#if defined(IDEM_CONSUMER_BEAST)
  namespace http = boost::beast::http;
  // One namespace for every caller: this consumer has one (shared_scope.h).
  idem::beast::IdempotentHandlerOptions options;
  options.scope = idem::asio::SharedScope();
  auto handler = idem::beast::IdempotentHandler::Create(
      guard,
      [&runs](idem::beast::Request req) {
        ++runs;
        idem::beast::Response res(http::status::created, req.version());
        res.body() = "made";
        res.prepare_payload();
        return res;
      },
      options);
  if (!handler) return Fail("beast handler", handler.error());
  if (auto protect = (*handler)->Protect(http::verb::post, "/orders");
      !protect) {
    return Fail("Protect", protect.error());
  }
  std::string replayed;
  for (int i = 0; i < 2; ++i) {
    idem::beast::Request req(http::verb::post, "/orders", 11);
    req.set("Idempotency-Key", "consumer");
    req.body() = "{}";
    req.prepare_payload();
    (*handler)->AsyncHandle(ioc.get_executor(), std::move(req),
                            [&](std::exception_ptr e, idem::beast::Response r) {
                              if (e || r.result_int() != 201) return;
                              auto it = r.find("Idempotent-Replayed");
                              if (it != r.end()) {
                                replayed.assign(it->value().data(),
                                                it->value().size());
                              }
                            });
    ioc.run();
    ioc.restart();
  }
  ok = runs == 1 && replayed == "true";
  const char* name = "beast";
#else
  // One namespace for every caller: this consumer has one (shared_scope.h).
  idem::restinio::IdempotentHandlerOptions options;
  options.scope = idem::asio::SharedScope();
  auto handler = idem::restinio::IdempotentHandler::Create(
      guard, ioc.get_executor(), options);
  if (!handler) return Fail("restinio handler", handler.error());
  if (auto protect =
          (*handler)->Protect(restinio::http_method_post(), "/orders",
                              [&runs](idem::restinio::RequestHandle) {
                                ++runs;
                                return idem::Response{201, {}, "made"};
                              });
      !protect) {
    return Fail("Protect", protect.error());
  }
  const idem::restinio::ChainHandlerFn chain = (*handler)->ChainHandler();
  const bool limits =
      static_cast<bool>(chain) &&
      (*handler)->BodyLimit() == (std::uint64_t{8} << 20) &&
      (*handler)->CheckRequestTimeout(std::chrono::seconds(10)).has_value();
  // The Guard the adapter runs, on one request twice.
  const idem::HeaderView headers[] = {{"Idempotency-Key", "consumer"}};
  idem::RequestView request;
  request.method = "POST";
  request.target = "/orders";
  request.headers = headers;
  auto run = [&runs] {
    ++runs;
    return idem::Response{201, {}, "made"};
  };
  (*handler)->guard().Run(request, run);
  const idem::Response replay = (*handler)->guard().Run(request, run);
  ok =
      limits && runs == 1 && replay.FindHeader("Idempotent-Replayed") == "true";
  const char* name = "restinio";
#endif

  std::printf("adapter consumer (idem %s, %s): %s\n", IDEM_VERSION, name,
              ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
