#include "idem/route.h"

namespace idem {
namespace {

// Splits "/a/b" into "a", "b" one call at a time; `rest` starts after a '/'.
std::string_view NextSegment(std::string_view& rest) {
  const std::size_t slash = rest.find('/');
  std::string_view segment = rest.substr(0, slash);
  rest = slash == std::string_view::npos ? std::string_view()
                                         : rest.substr(slash + 1);
  return segment;
}

}  // namespace

Result<RoutePattern> RoutePattern::Parse(std::string_view pattern) {
  auto invalid = [&](std::string_view why) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "route pattern '" + std::string(pattern) + "': " + std::string(why));
  };
  if (pattern.empty() || pattern.front() != '/') {
    return invalid("must start with '/'");
  }
  RoutePattern result;
  result.text_ = std::string(pattern);
  std::string_view rest = pattern.substr(1);
  bool more = true;
  while (more) {
    more = rest.find('/') != std::string_view::npos;
    const std::string_view segment = NextSegment(rest);
    if (segment == "*") {
      if (more) return invalid("'*' must be the last segment");
      result.prefix_ = true;
      break;
    }
    if (!segment.empty() && segment.front() == '{') {
      if (segment.size() < 3 || segment.back() != '}') {
        return invalid("a parameter segment is '{name}'");
      }
      result.segments_.push_back({Kind::kParam, {}});
      continue;
    }
    if (segment.find_first_of("{}*") != std::string_view::npos) {
      return invalid("'{', '}' and '*' only form whole segments");
    }
    result.segments_.push_back({Kind::kLiteral, std::string(segment)});
  }
  return result;
}

bool RoutePattern::Matches(std::string_view path) const {
  if (path.empty() || path.front() != '/') return false;
  std::string_view rest = path.substr(1);
  bool more = true;  // Whether `rest` still holds a segment (maybe empty).
  for (const Segment& s : segments_) {
    if (!more) return false;
    more = rest.find('/') != std::string_view::npos;
    const std::string_view segment = NextSegment(rest);
    if (s.kind == Kind::kParam) {
      if (segment.empty()) return false;
    } else if (segment != s.literal) {
      return false;
    }
  }
  return prefix_ || !more;
}

const Route* RouteTable::Match(std::string_view method,
                               std::string_view target) const {
  const std::string_view path = target.substr(0, target.find('?'));
  for (const Route& route : routes_) {
    if (route.method == method && route.pattern.Matches(path)) return &route;
  }
  return nullptr;
}

}  // namespace idem
