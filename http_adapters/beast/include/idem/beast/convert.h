// Conversions between Beast messages and idem's framework-agnostic types.
//
// Thread-safety: pure functions.

#ifndef IDEM_BEAST_CONVERT_H_
#define IDEM_BEAST_CONVERT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/beast/handler.h"
#include "idem/guard.h"
#include "idem/response.h"

namespace idem::beast {

// Beast's string_view is boost::string_view in Boost 1.74.
inline std::string_view ToStd(boost::beast::string_view s) {
  return {s.data(), s.size()};
}

// Every header of `header` as views into it, in order, repeats included.
std::vector<HeaderView> HeaderViews(const RequestHeader& header);

// The handler's response as idem stores it: status, every header, body.
idem::Response FromBeast(const Response& response);
// The same with only the headers named in `headers` (case-insensitive).
idem::Response FromBeast(const Response& response,
                         const std::vector<std::string>& headers);

// response.prepare_payload(), except that a 1xx, 204 or 304 answer gets no
// Content-Length (RFC 9110 §8.6: a 204 must not have one; on a 304 it would
// describe the unsent representation). Its body must be empty (Beast throws
// std::invalid_argument otherwise).
void PreparePayload(Response& response);

// What the adapter gives ClaimHandle::Finish for the handler's `response`,
// the one conversion of the stored form (IdempotentHandler and
// RunInTransaction, transaction.h, both use it): `response` is framed first
// as it will be sent (PreparePayload unless it has a Content-Length or is
// chunked), then its status, the headers `stored_headers` names (every
// header when null: the Guard keeps only the route's stored_headers either
// way) and its body.
idem::Response ToStored(Response& response,
                        const std::vector<std::string>* stored_headers);

// An idem response (a problem or a replay) as a Beast message for a request
// of HTTP `version` (11 for 1.1) and keep-alive wish, with Content-Length
// computed from the body.
Response ToBeast(const idem::Response& response, unsigned version,
                 bool keep_alive);

}  // namespace idem::beast

#endif  // IDEM_BEAST_CONVERT_H_
