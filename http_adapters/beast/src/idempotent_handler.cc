#include "idem/beast/idempotent_handler.h"

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <vector>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include "idem/beast/convert.h"
#include "idem/beast/request_checks.h"
#include "idem/idempotency_key.h"
#include "idem/problem.h"
#include "renewal_timer.h"

namespace idem::beast {
namespace {

constexpr std::size_t kDefaultStoreThreads = 4;
constexpr std::chrono::milliseconds kDefaultQueueTimeout{5000};

// The store of IdempotentHandler::unavailable_: every call fails at once
// with kUnavailable, saying why. Never blocks.
class QueueTimeoutStore final : public Store {
 public:
  explicit QueueTimeoutStore(std::chrono::milliseconds timeout)
      : message_(
            "no store-call thread was free within the store-call queue "
            "timeout (" +
            std::to_string(timeout.count()) +
            " ms); the store was not called") {}
  Result<ClaimResult> Claim(const RecordId&, const Fingerprint&, TimePoint,
                            Duration, Duration) override {
    return MakeError(ErrorCode::kUnavailable, message_);
  }
  Result<bool> Complete(const RecordId&, const Token&,
                        const idem::Response&) override {
    return MakeError(ErrorCode::kUnavailable, message_);
  }
  Result<bool> Release(const RecordId&, const Token&) override {
    return MakeError(ErrorCode::kUnavailable, message_);
  }
  Result<bool> Revoke(const RecordId&) override {
    return MakeError(ErrorCode::kUnavailable, message_);
  }
  Result<bool> ExtendLock(const RecordId&, const Token&, TimePoint,
                          Duration) override {
    return MakeError(ErrorCode::kUnavailable, message_);
  }
  Result<std::optional<Record>> Inspect(const RecordId&, TimePoint) override {
    return MakeError(ErrorCode::kUnavailable, message_);
  }
  Result<std::size_t> PurgeExpired(TimePoint, std::size_t) override {
    return MakeError(ErrorCode::kUnavailable, message_);
  }
  StoreInfo Info() const override { return StoreInfo{.name = "unavailable"}; }

 private:
  const std::string message_;
};

}  // namespace

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
  if (options.store_queue_timeout.count() < 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "IdempotentHandler's store_queue_timeout must not be "
                     "negative");
  }
  return std::unique_ptr<IdempotentHandler>(new IdempotentHandler(
      std::move(guard), std::move(handler), std::move(options)));
}

IdempotentHandler::IdempotentHandler(std::shared_ptr<Guard> guard,
                                     Handler handler,
                                     IdempotentHandlerOptions options)
    : guard_(std::move(guard)),
      handler_(std::move(handler)),
      options_(std::move(options)) {
  // A store that never blocks is called inline: a hop to the pool and back
  // would only add latency.
  const bool pool = options_.store_calls == StoreCalls::kPool ||
                    (options_.store_calls == StoreCalls::kAuto &&
                     guard_->store().Info().calls_may_block);
  if (!pool) return;
  const StoreInfo info = guard_->store().Info();
  std::size_t threads = options_.store_threads;
  if (threads == 0) {
    threads = info.max_concurrent_calls > 0 ? info.max_concurrent_calls
                                            : kDefaultStoreThreads;
  }
  queue_timeout_ = options_.store_queue_timeout;
  if (queue_timeout_.count() == 0) {
    queue_timeout_ = info.acquire_timeout.count() > 0 ? info.acquire_timeout
                                                      : kDefaultQueueTimeout;
  }
  pool_threads_ = threads;
  pool_ = std::make_unique<asio::thread_pool>(threads);
  // Shares the guard's options, metrics and clock (non-owning: guard_
  // outlives it), so its answers are counted where the guard's are.
  GuardSetup setup;
  setup.store = std::make_shared<QueueTimeoutStore>(queue_timeout_);
  setup.options = guard_->options();
  setup.clock =
      std::shared_ptr<Clock>(std::shared_ptr<void>(), &guard_->clock());
  setup.metrics =
      std::shared_ptr<Metrics>(std::shared_ptr<void>(), &guard_->metrics());
  setup.observers = guard_->observers();
  setup.log = options_.log;
  auto unavailable = Guard::Create(std::move(setup));
  // The guard's own options were valid, so these are.
  if (unavailable) unavailable_ = std::move(*unavailable);
}

IdempotentHandler::~IdempotentHandler() {
  if (pool_) pool_->join();
}

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
  Decision d;
  {
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
    auto begin = [&] { return guard_->Begin(view, route.options); };
    // Switched off, Begin calls no store: inline, so that a busy pool cannot
    // turn a pass-through into a queue-timeout answer.
    if (pool_ && guard_->enabled()) {
      std::optional<Decision> begun = co_await OnPool(begin);
      if (begun) {
        d = std::move(*begun);
      } else {
        // Not started in time: answered without the store, as step 8.
        d = unavailable_->Begin(view, route.options);
      }
    } else {
      d = begin();
    }
  }

  if (d.action == Action::kWait) {
    // Polls on a timer: the connection's thread is free while it waits.
    asio::steady_timer timer(co_await asio::this_coro::executor);
    while (d.action == Action::kWait) {
      timer.expires_after(
          std::chrono::duration_cast<asio::steady_timer::duration>(d.retry_in));
      co_await timer.async_wait(asio::use_awaitable);
      auto resume = [&] { return guard_->Resume(std::move(d)); };
      if (pool_) {
        std::optional<Decision> resumed = co_await OnPool(resume);
        // `d` is untouched when the call did not start in time.
        d = resumed ? std::move(*resumed) : unavailable_->Resume(std::move(d));
      } else {
        d = resume();
      }
    }
  }

  switch (d.action) {
    case Action::kRespond:
      co_return ToBeast(d.response, version, keep_alive);
    case Action::kPassThrough:
      co_return co_await handler_(std::move(request));
    case Action::kExecute:
    case Action::kWait:
      break;
  }

  // With the route's lock_renewal, a timer renews the claim while the
  // handler runs; nothing is scheduled otherwise.
  std::shared_ptr<RenewalTimer> renewal;
  if (d.claim.lock_renewal() > Duration::zero()) {
    std::optional<asio::any_io_executor> store_calls;
    if (pool_) store_calls = pool_->get_executor();
    renewal = RenewalTimer::Start(co_await asio::this_coro::executor,
                                  d.claim.lease(), std::move(store_calls));
  }
  Response response;
  std::exception_ptr error;
  try {
    response = co_await handler_(std::move(request));
  } catch (...) {
    error = std::current_exception();
  }
  if (renewal) renewal->Stop();
  if (error) {
    // Released here rather than by the ClaimHandle's destructor so that the
    // store call happens off the I/O thread; then the server's own error
    // handling gets the exception.
    auto abandon = [&] {
      d.claim.Abandon();
      return true;
    };
    if (pool_) {
      if (!co_await OnPool(abandon)) {
        d.claim.Forget(
            "releasing a key was not started within the "
            "store-call queue timeout (" +
            std::to_string(queue_timeout_.count()) + " ms)");
      }
    } else {
      abandon();
    }
    std::rethrow_exception(error);
  }
  if (!response.has_content_length() && !response.chunked()) {
    PreparePayload(response);
  }
  // Stored before it is returned: a client that disconnects after this point
  // gets the replay when it retries. Only the headers the route stores are
  // copied.
  const idem::Response stored =
      FromBeast(response, route.options->stored_headers);
  auto finish = [&] { return d.claim.Finish(stored); };
  if (pool_) {
    if (!co_await OnPool(finish)) {
      d.claim.Forget(
          "storing the response was not started within the "
          "store-call queue timeout (" +
          std::to_string(queue_timeout_.count()) + " ms); sent unstored");
    }
  } else {
    finish();
  }
  co_return response;
}

}  // namespace idem::beast
