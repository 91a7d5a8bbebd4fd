// Routes: which requests an adapter protects, and with which options. Any
// adapter uses these; the method is the request's method as sent ("POST").
//
// A pattern is a path split at '/'; each segment is one of
//   - a literal ("orders"), compared byte for byte;
//   - a parameter ("{id}"), matching exactly one non-empty segment;
//   - a final "*", matching the rest of the path (zero or more segments),
//     which makes the pattern a prefix match.
// Examples: "/orders" (exact), "/tenants/{tenant}/orders", "/api/v1/*".
// Paths are matched without their query string and without decoding, so a
// pattern names the path as clients send it.
//
// Thread-safety: RoutePattern and RouteTable are immutable once built and may
// be read from any number of threads; RouteTable::Add is not synchronized and
// belongs before serving starts.

#ifndef IDEM_ROUTE_H_
#define IDEM_ROUTE_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "idem/error.h"
#include "idem/guard_options.h"

namespace idem {

class RoutePattern {
 public:
  // kInvalidArgument when the pattern does not start with '/', has an empty
  // or unclosed "{...}" segment, or has "*" anywhere but as the last segment.
  static Result<RoutePattern> Parse(std::string_view pattern);

  // `path` is the request target up to (not including) any '?'.
  bool Matches(std::string_view path) const;

  const std::string& text() const { return text_; }

 private:
  enum class Kind { kLiteral, kParam };
  struct Segment {
    Kind kind;
    std::string literal;
  };
  RoutePattern() = default;

  std::string text_;
  std::vector<Segment> segments_;
  bool prefix_ = false;
};

// One protected route: a method, a pattern and the options its requests get.
struct Route {
  // Compared byte for byte with the request's method (methods are
  // case-sensitive): "POST", not "post".
  std::string method;
  RoutePattern pattern;
  // Never null once in a RouteTable.
  std::shared_ptr<const GuardOptions> options;
};

// Routes in the order they were added; the first match wins.
class RouteTable {
 public:
  void Add(Route route) { routes_.push_back(std::move(route)); }

  // The first route for `method` whose pattern matches the path of `target`
  // (the query is ignored), or nullptr. A linear scan: tables are small, and
  // an unprotected request pays only these comparisons.
  const Route* Match(std::string_view method, std::string_view target) const;

  bool empty() const { return routes_.empty(); }

 private:
  std::vector<Route> routes_;
};

}  // namespace idem

#endif  // IDEM_ROUTE_H_
