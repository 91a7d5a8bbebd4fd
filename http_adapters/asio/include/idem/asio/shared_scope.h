// Who a request's key belongs to, chosen explicitly: an adapter's scope
// option (ScopeResolver<Request>), and SharedScope(), the choice of a
// service whose callers may share one key namespace.
//
// A key replays only inside its scope (SEMANTICS.md, "scope"): the scope is
// what keeps caller A from receiving caller B's stored response. An adapter
// cannot guess it, so its Create refuses to start without a choice
// (RequireScope: kInvalidArgument naming `scope`). There are two:
//
//  - A resolver: a function from the request to the authenticated principal
//    (tenant + user, an API key's owner, a verified token's subject), or
//    nullopt for an anonymous request, which the route's `anonymous` policy
//    then decides (GuardOptions::anonymous).
//  - SharedScope(): every request is anonymous; under the default policy
//    (anonymous = shared) every caller shares the scope "" (a route with
//    anonymous = reject refuses every request with a key, one with bypass
//    runs them all unprotected). Safe only when every caller may see every
//    other caller's responses: a single-tenant service whose clients are
//    one party, an internal service behind a gateway that already confines
//    keys to one caller, tests. Anywhere else it lets a caller who sends
//    another caller's key (and the same body) receive that caller's stored
//    response, and lets a caller block or spoil another's key (409 while it
//    runs, 422 with another body).
//
// Nothing here depends on HTTP or Asio: an adapter for any request type (a
// gRPC adapter's ServerContext included) declares
// `ScopeResolver<ItsRequest>` as its scope option and calls RequireScope in
// its Create, so every adapter makes the same explicit choice and accepts
// the same SharedScope().
//
// Thread-safety: a ScopeResolver is a value; calling a const one from many
// threads is as safe as calling the function it holds.

#ifndef IDEM_ASIO_SHARED_SCOPE_H_
#define IDEM_ASIO_SHARED_SCOPE_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "idem/error.h"

namespace idem::asio {

// What SharedScope() returns; an adapter's scope option accepts it.
struct SharedScopeTag {
  explicit constexpr SharedScopeTag() = default;
};

// The explicit choice that every caller shares one key namespace (see
// above for when that is safe): every request is anonymous.
constexpr SharedScopeTag SharedScope() { return SharedScopeTag(); }

// An adapter's scope option: unset (Create refuses it), SharedScope(), or a
// resolver of `Request`. It must not block: it runs on the thread that
// serves the request.
template <typename Request>
class ScopeResolver {
 public:
  using Function = std::function<std::optional<std::string>(const Request&)>;

  // Unset: no choice made.
  ScopeResolver() = default;
  ScopeResolver(SharedScopeTag) : shared_(true) {}  // NOLINT: implicit.
  // Any callable taking the request and returning the scope or nullopt. An
  // empty function (nullptr) leaves the option unset.
  template <typename F, typename = std::enable_if_t<
                            std::is_constructible_v<Function, F> &&
                            !std::is_same_v<std::decay_t<F>, ScopeResolver> &&
                            !std::is_same_v<std::decay_t<F>, SharedScopeTag>>>
  ScopeResolver(F&& resolve)  // NOLINT: implicit, as std::function's.
      : resolve_(std::forward<F>(resolve)) {}

  // Whether a choice was made (a resolver, or SharedScope()).
  explicit operator bool() const { return shared_ || resolve_ != nullptr; }
  // Whether the choice is SharedScope().
  bool shared() const { return shared_; }

  // The request's scope; nullopt is anonymous (always, with SharedScope()
  // or unset).
  std::optional<std::string> operator()(const Request& request) const {
    if (resolve_ == nullptr) return std::nullopt;
    return resolve_(request);
  }

 private:
  Function resolve_;
  bool shared_ = false;
};

// For an adapter's Create: ok when `scope` is set, else kInvalidArgument
// naming `scope` and the two choices. `adapter` names the adapter in the
// message ("the Beast IdempotentHandler"), `option` the options field.
template <typename Request>
Status RequireScope(
    const ScopeResolver<Request>& scope, std::string_view adapter,
    std::string_view option = "IdempotentHandlerOptions::scope") {
  if (scope) return {};
  return MakeError(
      ErrorCode::kInvalidArgument,
      std::string(adapter) + " needs a `scope` option (" + std::string(option) +
          "): who a "
          "request's key belongs to, so that no caller receives another's "
          "stored response. Give a resolver that returns the authenticated "
          "principal, or idem::asio::SharedScope() when every caller may "
          "share one key namespace (idem/asio/shared_scope.h)");
}

}  // namespace idem::asio

#endif  // IDEM_ASIO_SHARED_SCOPE_H_
