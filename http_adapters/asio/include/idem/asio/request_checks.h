// Checks of a request's header section that every server using an idem
// adapter needs before it trusts the request, on any framework.
//
// Framing (RFC 9112 §6.1, §6.3): a request whose Transfer-Encoding is
// anything but a single `chunked` (`xchunked`, `chunked, identity`,
// `chunked, chunked`, `gzip, chunked`, an empty value), or that has both
// Transfer-Encoding and Content-Length, cannot be framed safely: a proxy in
// front may have read its body differently, and the bytes after it would be
// parsed as the next request (request smuggling). Such a request gets 400
// and the connection is closed.
//
// Credentials: `Authorization` is a singleton field (RFC 9110 §11.6.2). Two
// of them are ambiguous (a proxy may check one, the scope resolver read the
// other), so such a request gets 400 rather than "the first wins".
//
// Thread-safety: pure functions.

#ifndef IDEM_ASIO_REQUEST_CHECKS_H_
#define IDEM_ASIO_REQUEST_CHECKS_H_

#include <optional>
#include <span>
#include <string>

#include "idem/guard.h"

namespace idem::asio {

// Why a request header cannot be served: the problem code and a sentence for
// the 400 problem's detail.
struct HeaderRejection {
  std::string code;  // "bad_request" (framing) or "authorization_ambiguous".
  std::string detail;
};

// The first reason (framing, then credentials) a request with `headers`
// (every header field, repeats included, trailers excluded) must get 400
// and have its connection closed, or nullopt.
std::optional<HeaderRejection> CheckRequestHeaders(
    std::span<const HeaderView> headers);

}  // namespace idem::asio

#endif  // IDEM_ASIO_REQUEST_CHECKS_H_
