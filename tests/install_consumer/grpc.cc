// The gRPC adapter built against an installed idem (CMakeLists.txt,
// IDEM_CONSUMER_ADAPTERS=grpc; scripts/packages.sh builds it with
// pkg-config idem-grpc too): compiles idem::grpc's public headers, links
// its archive and gRPC, and runs a real server on 127.0.0.1 (port 0) with a
// real client: one call made twice with one idempotency-key runs the
// handler once, and the second answer is a replay.
#include <utility>  // Before Asio's coroutine headers; see idem/asio/handler.h.

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <idem/grpc/idempotent_methods.h>
#include <idem/guard.h>
#include <idem/memory_store.h>
#include <idem/store_uri.h>
#include <idem/version.h>

#include "counter.grpc.pb.h"

namespace v1 = idem::consumer::v1;

namespace {

int Fail(const char* what, const std::string& message) {
  std::fprintf(stderr, "grpc consumer: %s: %s\n", what, message.c_str());
  return 1;
}

class Counter final : public v1::Counter::CallbackService {
 public:
  explicit Counter(idem::grpc::CallbackMethod<v1::AddRequest, v1::AddReply> add)
      : add_(std::move(add)) {}
  grpc::ServerUnaryReactor* Add(grpc::CallbackServerContext* context,
                                const v1::AddRequest* request,
                                v1::AddReply* reply) override {
    return add_(context, request, reply);
  }

 private:
  idem::grpc::CallbackMethod<v1::AddRequest, v1::AddReply> add_;
};

}  // namespace

int main() {
  auto uri = idem::StoreUri::Parse("memory:?capacity=10");
  if (!uri) return Fail("store URI", uri.error().ToString());
  auto store = idem::MemoryStore::OpenFromUri(*uri, {});
  if (!store) return Fail("store", store.error().ToString());
  idem::GuardSetup setup;
  setup.store = std::move(*store);
  auto guard = idem::Guard::Create(std::move(setup));
  if (!guard) return Fail("guard", guard.error().ToString());
  // One namespace for every caller: this consumer has one (shared_scope.h).
  auto methods = idem::grpc::IdempotentMethods::Create(
      {.guard = std::move(*guard), .scope = idem::grpc::SharedScope()});
  if (!methods) return Fail("adapter", methods.error().ToString());
  int runs = 0;
  int total = 0;
  auto add = (*methods)->ProtectCallback<v1::AddRequest, v1::AddReply>(
      "/idem.consumer.v1.Counter/Add",
      [&](grpc::ServerContextBase&, const v1::AddRequest& request,
          v1::AddReply& reply) {
        ++runs;
        total += request.amount();
        reply.set_total(total);
        return grpc::Status::OK;
      });
  if (!add) return Fail("ProtectCallback", add.error().ToString());

  Counter service(std::move(*add));
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) return Fail("server", "cannot listen");

  auto stub = v1::Counter::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  bool ok = true;
  std::string replayed;
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(60));
    context.AddMetadata("idempotency-key", "consumer");
    v1::AddRequest request;
    request.set_amount(5);
    v1::AddReply reply;
    const grpc::Status status = stub->Add(&context, request, &reply);
    ok = ok && status.ok() && reply.total() == 5;
    const auto& trailers = context.GetServerTrailingMetadata();
    auto it = trailers.find("idempotent-replayed");
    replayed = it == trailers.end()
                   ? ""
                   : std::string(it->second.data(), it->second.size());
  }
  server->Shutdown();
  server->Wait();
  ok = ok && runs == 1 && replayed == "true";
  std::printf("adapter consumer (idem %s, grpc): %s\n", IDEM_VERSION,
              ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
