#include "idem/beast/idempotent_handler.h"

#include <vector>

#include "idem/beast/convert.h"
#include "idem/beast/request_checks.h"
#include "idem/idempotency_key.h"
#include "idem/problem.h"

namespace idem::beast {

Result<std::unique_ptr<IdempotentHandler>> IdempotentHandler::Create(
    std::shared_ptr<Guard> guard, Handler handler,
    IdempotentHandlerOptions options) {
  if (!guard) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "IdempotentHandler needs a guard");
  }
  if (!handler) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "IdempotentHandler needs a request handler");
  }
  IDEM_RETURN_IF_ERROR(
      ::idem::asio::RequireScope(options.scope, "the Beast IdempotentHandler"));
  IDEM_ASSIGN_OR_RETURN(std::unique_ptr<::idem::asio::GuardCalls> calls,
                        ::idem::asio::GuardCalls::Create(guard, options));
  return std::unique_ptr<IdempotentHandler>(
      new IdempotentHandler(std::move(guard), std::move(handler),
                            std::move(options), std::move(calls)));
}

IdempotentHandler::IdempotentHandler(
    std::shared_ptr<Guard> guard, Handler handler,
    IdempotentHandlerOptions options,
    std::unique_ptr<::idem::asio::GuardCalls> calls)
    : guard_(std::move(guard)),
      handler_(std::move(handler)),
      options_(std::move(options)),
      calls_(std::move(calls)) {}

IdempotentHandler::~IdempotentHandler() = default;

Status IdempotentHandler::Protect(http::verb method, std::string_view pattern,
                                  std::shared_ptr<const GuardOptions> options) {
  IDEM_ASSIGN_OR_RETURN(RoutePattern parsed, RoutePattern::Parse(pattern));
  if (options) {
    // Validated here, once, and marked so: Begin does not validate them
    // again per request.
    IDEM_ASSIGN_OR_RETURN(options, Guard::MakeRouteOptions(*options));
  } else {
    options = guard_->shared_options();
  }
  routes_.Add(Route{std::string(http::to_string(method)), std::move(parsed),
                    std::move(options)});
  return {};
}

const Route* IdempotentHandler::BoundedRoute(
    const RequestHeader& header) const {
  // Switched off, idem bounds no body: the server's own limit applies.
  if (!guard_->enabled()) return nullptr;
  const Route* route =
      routes_.Match(ToStd(header.method_string()), ToStd(header.target()));
  if (route == nullptr) return nullptr;
  const bool has_key =
      header.find({kIdempotencyKeyHeader.data(),
                   kIdempotencyKeyHeader.size()}) != header.end();
  const bool bounded = Guard::BodyIsBounded(*route->options, has_key, [&] {
    return options_.scope && options_.scope(header).has_value();
  });
  return bounded ? route : nullptr;
}

std::uint64_t IdempotentHandler::BodyLimit(const RequestHeader& header) const {
  const Route* route = BoundedRoute(header);
  return route != nullptr ? route->options->max_request_body
                          : options_.default_body_limit;
}

boost::beast::error_code IdempotentHandler::ApplyBodyLimit(
    http::request_parser<http::string_body>& parser) const {
  // A request whose length is ambiguous must not be read at all.
  if (auto rejected = CheckRequestHeader(parser.get().base());
      rejected && rejected->code == "bad_request") {
    return http::error::bad_transfer_encoding;
  }
  const std::uint64_t limit = BodyLimit(parser.get().base());
  if (const auto length = parser.content_length(); length && *length > limit) {
    return http::error::body_limit;
  }
  parser.body_limit(limit);
  return {};
}

Response IdempotentHandler::TooLarge(const RequestHeader& header) {
  const std::string_view target = ToStd(header.target());
  std::optional<Response> response;
  if (const Route* route = BoundedRoute(header)) {
    std::optional<std::string> scope;
    if (options_.scope) scope = options_.scope(header);
    const std::vector<HeaderView> headers = HeaderViews(header);
    RequestView view;
    view.method = ToStd(header.method_string());
    view.target = target;
    view.route = route->pattern.text();
    view.headers = headers;
    view.body_too_large = true;
    if (scope) view.scope = *scope;
    // With body_too_large the Guard answers before it claims: no store call.
    Decision d = guard_->Begin(view, route->options);
    if (d.action == Action::kRespond) {
      response = ToBeast(d.response, header.version(), false);
    }
  }
  if (!response) {
    Problem problem;
    problem.status = 413;
    problem.code = problem_code::kRequestTooLarge;
    problem.detail = "The request body is larger than the " +
                     std::to_string(BodyLimit(header)) +
                     " bytes this server accepts.";
    problem.instance = target.substr(0, target.find('?'));
    response = ToBeast(MakeProblemResponse(problem), header.version(), false);
  }
  return std::move(*response);
}

asio::awaitable<Response> IdempotentHandler::HandleProtected(const Route& route,
                                                             Request request) {
  const unsigned version = request.version();
  const bool keep_alive = request.keep_alive();
  // Initialized from the co_await, not assigned: an assignment would keep
  // a second Decision in this frame (see GuardCalls, "Decide's and
  // Continue's steps").
  Decision d = co_await Decide(route, request);
  if (d.action == Action::kRespond) {
    co_return ToBeast(d.response, version, keep_alive);
  }
  co_return co_await Run(route, request, d);
}

asio::awaitable<Decision> IdempotentHandler::Decide(const Route& route,
                                                    const Request& request) {
  std::optional<std::string> scope;
  if (options_.scope) scope = options_.scope(request.base());
  const std::vector<HeaderView> headers = HeaderViews(request.base());
  RequestView view;
  view.method = ToStd(request.method_string());
  view.target = ToStd(request.target());
  view.route = route.pattern.text();
  view.headers = headers;
  view.body = request.body();
  if (scope) view.scope = *scope;
  co_return co_await calls_->Decide(view, route.options);
}

asio::awaitable<Response> IdempotentHandler::Run(const Route& route,
                                                 Request& request,
                                                 Decision& d) {
  switch (d.action) {
    case Action::kPassThrough:
      co_return co_await handler_(std::move(request));
    case Action::kRespond:  // HandleProtected's.
    case Action::kExecute:
    case Action::kWait:       // Decide ends every wait.
    case Action::kCallStore:  // Decide makes every store call.
      break;
  }
  // A claim-taking handler gets d.claim, valid until it completes.
  Response response =
      co_await calls_->Execute(d, handler_(std::move(request), d.claim));
  // Stored before it is returned: a client that disconnects after this point
  // gets the replay when it retries. Only the headers the route stores are
  // copied. After a completion in the handler's own committed transaction
  // (RunInTransaction, transaction.h) Finish makes no store call.
  const idem::Response stored =
      ToStored(response, &route.options->stored_headers);
  co_await calls_->Finish(d.claim, stored);
  co_return response;
}

}  // namespace idem::beast
