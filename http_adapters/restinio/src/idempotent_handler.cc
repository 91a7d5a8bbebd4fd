#include "idem/restinio/idempotent_handler.h"

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <vector>

#include <boost/asio/co_spawn.hpp>

#include "idem/asio/request_checks.h"
#include "idem/idempotency_key.h"
#include "idem/problem.h"
#include "idem/restinio/convert.h"
#include "idem/restinio/framing.h"

namespace idem::restinio {
namespace {

std::string_view PathOf(std::string_view target) {
  return target.substr(0, target.find('?'));
}

// The request as the Guard sees it: views into `request`, `headers` and
// `scope`, which must outlive it.
RequestView ViewOf(const ::restinio::request_t& request, std::string_view route,
                   std::span<const HeaderView> headers,
                   const std::optional<std::string>& scope) {
  RequestView view;
  view.method = request.header().method().c_str();
  view.target = request.header().request_target();
  view.route = route;
  view.headers = headers;
  view.body = request.body();
  if (scope) view.scope = *scope;
  return view;
}

// The answer to a handler that threw: the request's key was released, so a
// retry runs the handler again. The connection closes, as the Beast demo
// server's does after a handler error.
void SendHandlerFailed(::restinio::request_t& request) {
  SendProblem(request, 500, "internal_error", "The request handler failed.",
              /*close=*/true);
}

// A 413 when `request`'s body is over `limit`, the server's default limit.
bool TooLargeForServer(::restinio::request_t& request, std::uint64_t limit) {
  // RESTinio's own limit is the largest a protected route accepts; the
  // rest keep the default.
  if (request.body().size() <= limit) return false;
  SendProblem(request, 413, problem_code::kRequestTooLarge,
              "The request body is larger than the " + std::to_string(limit) +
                  " bytes this server accepts.",
              /*close=*/true);
  return true;
}

// Framing and credentials (idem/asio/request_checks.h): true when `request`
// was answered 400 with Connection: close. RESTinio's parser has already
// framed the body its way; closing keeps what followed from being read as
// another request.
bool Rejected(::restinio::request_t& request,
              std::span<const HeaderView> headers) {
  auto rejected = ::idem::asio::CheckRequestHeaders(headers);
  if (!rejected) return false;
  SendProblem(request, 400, rejected->code, std::move(rejected->detail),
              /*close=*/true);
  return true;
}

}  // namespace

Result<std::unique_ptr<IdempotentHandler>> IdempotentHandler::Create(
    std::shared_ptr<Guard> guard, boost::asio::any_io_executor executor,
    IdempotentHandlerOptions options) {
  if (!executor) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "the RESTinio IdempotentHandler needs an executor");
  }
  IDEM_RETURN_IF_ERROR(::idem::asio::RequireScope(
      options.scope, "the RESTinio IdempotentHandler"));
  IDEM_ASSIGN_OR_RETURN(std::unique_ptr<::idem::asio::GuardCalls> calls,
                        ::idem::asio::GuardCalls::Create(guard, options));
  return std::unique_ptr<IdempotentHandler>(
      new IdempotentHandler(std::move(guard), std::move(executor),
                            std::move(options), std::move(calls)));
}

IdempotentHandler::IdempotentHandler(
    std::shared_ptr<Guard> guard, boost::asio::any_io_executor executor,
    IdempotentHandlerOptions options,
    std::unique_ptr<::idem::asio::GuardCalls> calls)
    : guard_(std::move(guard)),
      executor_(std::move(executor)),
      options_(std::move(options)),
      calls_(std::move(calls)) {}

IdempotentHandler::~IdempotentHandler() = default;

Result<std::shared_ptr<const GuardOptions>> IdempotentHandler::RouteOptions(
    std::shared_ptr<const GuardOptions> options) const {
  // Validated here, once, and marked so: Begin does not validate them again
  // per request.
  if (options) return Guard::MakeRouteOptions(*options);
  return guard_->shared_options();
}

Status IdempotentHandler::Protect(::restinio::http_method_id_t method,
                                  std::string_view pattern, Handler handler,
                                  std::shared_ptr<const GuardOptions> options) {
  if (!handler) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "Protect needs a request handler");
  }
  IDEM_ASSIGN_OR_RETURN(RoutePattern parsed, RoutePattern::Parse(pattern));
  IDEM_ASSIGN_OR_RETURN(options, RouteOptions(std::move(options)));
  routes_.push_back(Entry{std::move(options), std::string(pattern),
                          std::move(handler), method.c_str(),
                          std::move(parsed)});
  return {};
}

::restinio::router::express_request_handler_t IdempotentHandler::Wrap(
    Handler handler, std::shared_ptr<const GuardOptions> options,
    std::string route) {
  if (!handler) throw std::invalid_argument("Wrap needs a request handler");
  auto checked = RouteOptions(std::move(options));
  if (!checked) throw std::invalid_argument(checked.error().message());
  wrapped_.push_back(
      Entry{std::move(*checked), std::move(route), std::move(handler), {}, {}});
  const Entry* entry = &wrapped_.back();
  return
      [this, entry](RequestHandle request, ::restinio::router::route_params_t) {
        return Handle(request, *entry);
      };
}

ChainHandlerFn IdempotentHandler::ChainHandler() {
  return [this](const RequestHandle& request) {
    // FramedSocket's stand-in for a request the framing rules refused.
    if (AnswerFramingRejection(*request)) return ::restinio::request_accepted();
    const auto& header = request->header();
    const std::string_view method = header.method().c_str();
    const std::string_view path = PathOf(header.request_target());
    for (const Entry& entry : routes_) {
      if (entry.method == method && entry.pattern->Matches(path)) {
        return Handle(request, entry);
      }
    }
    if (Rejected(*request, HeaderViews(*request))) {
      return ::restinio::request_accepted();
    }
    if (TooLargeForServer(*request, options_.default_body_limit))
      return ::restinio::request_accepted();
    return ::restinio::request_not_handled();
  };
}

std::uint64_t IdempotentHandler::BodyLimit() const {
  std::uint64_t limit = options_.default_body_limit;
  for (const auto* entries : {&routes_, &wrapped_}) {
    for (const Entry& entry : *entries) {
      limit = std::max(limit, entry.options->max_request_body);
    }
  }
  return limit;
}

std::chrono::milliseconds IdempotentHandler::RequestTimeoutNeeded() const {
  Duration wait{0};
  for (const auto* entries : {&routes_, &wrapped_}) {
    for (const Entry& entry : *entries) {
      wait = std::max(wait, entry.options->lock_wait);
    }
  }
  wait = std::max(wait, guard_->options().lock_wait);
  return std::chrono::ceil<std::chrono::milliseconds>(wait) +
         2 * calls_->queue_timeout();
}

Status IdempotentHandler::CheckRequestTimeout(
    std::chrono::steady_clock::duration handle_request_timeout) const {
  const std::chrono::milliseconds needed = RequestTimeoutNeeded();
  if (handle_request_timeout > needed) return {};
  return MakeError(
      ErrorCode::kInvalidArgument,
      "RESTinio's handle_request_timeout (" +
          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                             handle_request_timeout)
                             .count()) +
          " ms) must be longer than the longest lock_wait plus the "
          "store-call queue waits (" +
          std::to_string(needed.count()) + " ms) and the handler's own time");
}

::restinio::request_handling_status_t IdempotentHandler::Handle(
    const RequestHandle& request, const Entry& entry) {
  std::vector<HeaderView> headers = HeaderViews(*request);
  if (Rejected(*request, headers)) return ::restinio::request_accepted();
  // Switched off (Guard::SetEnabled), idem bounds no body: the server's
  // default limit applies, as on a route idem does not protect.
  if (!guard_->enabled() &&
      TooLargeForServer(*request, options_.default_body_limit)) {
    return ::restinio::request_accepted();
  }
  const bool straight = calls_->store_calls_inline() &&
                        entry.handler.synchronous() &&
                        entry.options->lock_wait.count() == 0;
  if (!straight) {
    boost::asio::co_spawn(executor_, HandleAsync(request, &entry),
                          [request](std::exception_ptr error) {
                            if (error) SendHandlerFailed(*request);
                          });
    return ::restinio::request_accepted();
  }
  // Guard::Run: Begin, the handler, Finish before the answer is sent; a
  // handler that throws has its key released by the claim's destructor.
  std::optional<std::string> scope;
  if (options_.scope) scope = options_.scope(*request);
  const RequestView view = ViewOf(*request, entry.route, headers, scope);
  RunInfo info;
  idem::Response response;
  try {
    // A claim-taking handler gets the claim (inactive when unprotected).
    response = guard_->Run(
        view,
        [&](ClaimHandle& claim) {
          return entry.handler.RunSynchronous(request, claim);
        },
        entry.options, &info);
  } catch (...) {
    SendHandlerFailed(*request);
    return ::restinio::request_accepted();
  }
  Send(*request, response, info.outcome == Outcome::kTooLarge);
  return ::restinio::request_accepted();
}

boost::asio::awaitable<Decision> IdempotentHandler::Decide(
    const RequestHandle& request, const Entry& entry) {
  std::optional<std::string> scope;
  if (options_.scope) scope = options_.scope(*request);
  const std::vector<HeaderView> headers = HeaderViews(*request);
  const RequestView view = ViewOf(*request, entry.route, headers, scope);
  co_return co_await calls_->Decide(view, entry.options);
}

boost::asio::awaitable<void> IdempotentHandler::HandleAsync(
    RequestHandle request, const Entry* entry) {
  // Initialized from the co_await, not assigned, and the request's view in
  // a frame of its own: this frame stays under 1 KiB (see GuardCalls,
  // "Decide's and Continue's steps").
  Decision d = co_await Decide(request, *entry);
  switch (d.action) {
    case Action::kRespond:
      Send(*request, d.response, d.outcome == Outcome::kTooLarge);
      co_return;
    case Action::kPassThrough:
      Send(*request, co_await entry->handler(request));
      co_return;
    case Action::kExecute:
    case Action::kWait:       // Decide ends every wait.
    case Action::kCallStore:  // Decide makes every store call.
      break;
  }
  // A claim-taking handler gets d.claim, valid until it completes.
  const idem::Response response =
      co_await calls_->Execute(d, entry->handler(request, d.claim));
  // Stored before it is sent: a client that disconnects after this point
  // gets the replay when it retries. After a completion in the handler's own
  // committed transaction (RunInTransaction, transaction.h) Finish makes no
  // store call.
  co_await calls_->Finish(d.claim, response);
  Send(*request, response);
}

}  // namespace idem::restinio
