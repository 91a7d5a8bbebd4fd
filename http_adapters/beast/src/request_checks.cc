#include "idem/beast/request_checks.h"

#include <algorithm>
#include <vector>

#include "idem/asio/request_checks.h"
#include "idem/beast/convert.h"

namespace idem::beast {

std::optional<HeaderRejection> CheckRequestHeader(const RequestHeader& header) {
  const std::vector<HeaderView> headers = HeaderViews(header);
  return ::idem::asio::CheckRequestHeaders(headers);
}

HeaderFieldIdentities HeaderFieldIds(const RequestHeader& header) {
  HeaderFieldIdentities ids;
  for (const auto& field : header) ids.push_back(&field);
  std::sort(ids.begin(), ids.end());
  return ids;
}

void EraseTrailerFields(RequestHeader& header,
                        const HeaderFieldIdentities& header_fields) {
  for (auto it = header.begin(); it != header.end();) {
    const void* id = &*it;
    if (std::binary_search(header_fields.begin(), header_fields.end(), id)) {
      ++it;
    } else {
      it = header.erase(it);
    }
  }
}

}  // namespace idem::beast
