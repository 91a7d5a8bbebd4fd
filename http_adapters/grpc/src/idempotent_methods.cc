#include "idem/grpc/idempotent_methods.h"

#include <algorithm>
#include <future>
#include <string>

#include <boost/asio/post.hpp>

#include <google/protobuf/descriptor.h>

#include "adapter_state.h"
#include "method_core.h"
#include "stored_call.h"

namespace idem::grpc {
namespace {

tl::unexpected<Error> Invalid(std::string message) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(message));
}

// A gRPC metadata key as the wire carries it: lowercase letters, digits and
// "-_.", not empty.
bool ValidKey(std::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

Status CheckKeys(const std::vector<std::string>& keys, std::string_view field,
                 std::string_view method) {
  for (const std::string& key : keys) {
    if (!ValidKey(key)) {
      return Invalid("gRPC method " + std::string(method) + ": " +
                     std::string(field) + " has \"" + key +
                     "\", which is not a gRPC metadata key (lowercase "
                     "letters, digits, '-', '_', '.')");
    }
  }
  return {};
}

// The method `full_name` names in the generated pool, checked to be a unary
// method from `request` to `response`.
Status CheckMethod(std::string_view full_name,
                   const google::protobuf::Descriptor* request,
                   const google::protobuf::Descriptor* response) {
  const std::string name(full_name);
  const std::size_t slash = full_name.rfind('/');
  if (full_name.size() < 4 || full_name[0] != '/' || slash == 0 ||
      slash + 1 == full_name.size()) {
    return Invalid("gRPC method \"" + name +
                   "\" is not a full method name (/package.Service/Method)");
  }
  const std::string service(full_name.substr(1, slash - 1));
  const google::protobuf::ServiceDescriptor* s =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          service);
  const google::protobuf::MethodDescriptor* m =
      s ? s->FindMethodByName(std::string(full_name.substr(slash + 1)))
        : nullptr;
  if (m == nullptr) {
    return Invalid("gRPC method " + name +
                   " is not in the program's generated descriptors (a "
                   "misspelt name, or its .pb.cc is not linked)");
  }
  if (m->client_streaming() || m->server_streaming()) {
    return Invalid("gRPC method " + name +
                   " is streaming: idem protects unary methods only (a "
                   "stream has no single response to store)");
  }
  if (m->input_type() != request || m->output_type() != response) {
    return Invalid("gRPC method " + name + " takes " +
                   m->input_type()->full_name() + " and returns " +
                   m->output_type()->full_name() + ", not " +
                   request->full_name() + " and " + response->full_name());
  }
  return {};
}

}  // namespace

std::vector<::grpc::StatusCode> DefaultStoredStatuses() {
  using ::grpc::StatusCode;
  return {StatusCode::OK,
          StatusCode::INVALID_ARGUMENT,
          StatusCode::NOT_FOUND,
          StatusCode::ALREADY_EXISTS,
          StatusCode::PERMISSION_DENIED,
          StatusCode::FAILED_PRECONDITION,
          StatusCode::OUT_OF_RANGE,
          StatusCode::UNIMPLEMENTED};
}

Result<std::unique_ptr<IdempotentMethods>> IdempotentMethods::Create(
    IdempotentMethodsOptions options) {
  if (!options.guard) {
    return Invalid("the gRPC IdempotentMethods needs a guard");
  }
  IDEM_RETURN_IF_ERROR(
      ::idem::asio::RequireScope(options.scope, "the gRPC IdempotentMethods",
                                 "IdempotentMethodsOptions::scope"));
  if (!options.executor && options.threads == 0) {
    return Invalid(
        "the gRPC IdempotentMethods' threads must be positive (or give an "
        "executor)");
  }
  auto state = std::make_shared<AdapterState>();
  state->log = options.calls.log;
  IDEM_ASSIGN_OR_RETURN(
      state->calls,
      idem::asio::GuardCalls::Create(options.guard, std::move(options.calls)));
  state->guard = std::move(options.guard);
  state->scope = std::move(options.scope);
  if (options.executor) {
    state->executor = *options.executor;
  } else {
    state->pool = std::make_unique<net::thread_pool>(options.threads);
    state->executor = state->pool->get_executor();
  }
  return std::unique_ptr<IdempotentMethods>(
      new IdempotentMethods(std::move(state)));
}

IdempotentMethods::IdempotentMethods(std::shared_ptr<AdapterState> state)
    : state_(std::move(state)) {}

IdempotentMethods::~IdempotentMethods() {
  state_->WaitIdle();
  // The last calls may have ended on the executor's threads, and their
  // owners learnt so through gRPC's locks, which ThreadSanitizer cannot see
  // (gRPC is not instrumented as packaged). A round trip through the
  // executor orders those threads' last work before what follows (the
  // destruction of the store-call pool, the Guard), for it as it already
  // is. Only when calls ran there: its context ran then and keeps running
  // until this returns (IdempotentMethodsOptions::executor), whereas one
  // that never served a call may never have been run.
  if (state_->executor_used.load(std::memory_order_relaxed)) {
    std::promise<void> drained;
    net::post(state_->executor, [&drained] { drained.set_value(); });
    drained.get_future().wait();
  }
  // Every coroutine has finished its reactor; join the pool so that none of
  // its threads is still unwinding a call's frame.
  if (state_->pool) state_->pool->join();
}

Guard& IdempotentMethods::guard() { return *state_->guard; }

bool IdempotentMethods::store_calls_on_pool() const {
  return !state_->calls->store_calls_inline();
}

Result<ProtectedMethod> IdempotentMethods::Protect(
    std::string_view full_name, const google::protobuf::Descriptor* request,
    const google::protobuf::Descriptor* response, AnyHandler handler,
    MethodOptions options) {
  IDEM_RETURN_IF_ERROR(CheckMethod(full_name, request, response));
  if (!handler) {
    return Invalid("gRPC method " + std::string(full_name) +
                   " needs a handler");
  }
  IDEM_RETURN_IF_ERROR(CheckKeys(options.fingerprint_metadata,
                                 "fingerprint_metadata", full_name));
  IDEM_RETURN_IF_ERROR(CheckKeys(options.replayed_initial_metadata,
                                 "replayed_initial_metadata", full_name));
  IDEM_RETURN_IF_ERROR(CheckKeys(options.replayed_trailing_metadata,
                                 "replayed_trailing_metadata", full_name));
  for (::grpc::StatusCode code : options.stored_statuses) {
    if (code < ::grpc::StatusCode::OK ||
        code > ::grpc::StatusCode::UNAUTHENTICATED) {
      return Invalid("gRPC method " + std::string(full_name) +
                     ": stored_statuses has " +
                     std::to_string(static_cast<int>(code)) +
                     ", which is not a gRPC status code (0..16)");
    }
  }
  GuardOptions route = options.guard.value_or(state_->guard->options());
  route.stored_statuses = StoredStatusSet(options.stored_statuses);
  route.fingerprint_headers = options.fingerprint_metadata;
  route.fingerprint_body = BodyFingerprint::kRaw;
  // A message is protobuf, never JSON: JSON members cannot identify it (a
  // guard's fingerprint_fields meant for its HTTP routes would refuse every
  // call with idempotency_body_not_json).
  route.fingerprint_fields.clear();
  route.stored_headers.clear();  // The call's metadata is in the body.
  route.replay_header_name = std::string(kReplayedMetadata);
  route.replay_header_value = "true";
  auto made = Guard::MakeRouteOptions(std::move(route));
  if (!made) {
    return MakeError(made.error().code(), "gRPC method " +
                                              std::string(full_name) + ": " +
                                              made.error().message());
  }
  auto core = std::make_shared<MethodCore>();
  core->adapter = state_;
  core->full_name = std::string(full_name);
  core->route = std::move(*made);
  core->replayed_initial = std::move(options.replayed_initial_metadata);
  core->replayed_trailing = std::move(options.replayed_trailing_metadata);
  core->handler = std::move(handler);
  return ProtectedMethod(std::move(core));
}

}  // namespace idem::grpc
