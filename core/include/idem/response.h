// A framework-agnostic HTTP response: what a handler produced, what a store
// keeps and what a replay sends.
//
// Thread-safety: plain value.

#ifndef IDEM_RESPONSE_H_
#define IDEM_RESPONSE_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem {

using Header = std::pair<std::string, std::string>;
using Headers = std::vector<Header>;

struct Response {
  int status = 200;
  // In order; names keep the case they were given. Content-Length is never
  // stored: whoever writes the response computes it from `body`.
  Headers headers;
  std::string body;

  // First value of the header named `name` (ASCII case-insensitive).
  std::optional<std::string_view> FindHeader(std::string_view name) const;

  friend bool operator==(const Response&, const Response&) = default;
};

// ASCII case-insensitive equality, as HTTP field names compare.
bool HeaderNameEquals(std::string_view a, std::string_view b);

}  // namespace idem

#endif  // IDEM_RESPONSE_H_
