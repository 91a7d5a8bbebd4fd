#include "idem/beast/request_checks.h"

#include <iterator>
#include <vector>

#include "idem/asio/request_checks.h"
#include "idem/beast/convert.h"

namespace idem::beast {

std::optional<HeaderRejection> CheckRequestHeader(const RequestHeader& header) {
  const std::vector<HeaderView> headers = HeaderViews(header);
  return ::idem::asio::CheckRequestHeaders(headers);
}

std::size_t HeaderFieldCount(const RequestHeader& header) {
  return static_cast<std::size_t>(std::distance(header.begin(), header.end()));
}

void EraseTrailerFields(RequestHeader& header, std::size_t header_fields) {
  auto it = header.begin();
  for (std::size_t i = 0; i < header_fields && it != header.end(); ++i) ++it;
  while (it != header.end()) it = header.erase(it);
}

}  // namespace idem::beast
