// Checks of a request's header section that every server using the adapter
// needs before it reads the body, and the separation of a chunked body's
// trailer from the header section.
//
// Framing (RFC 9112 §6.1, §6.3): a request whose Transfer-Encoding is
// anything but a single `chunked` (`xchunked`, `chunked, identity`,
// `chunked, chunked`, `gzip, chunked`, an empty value), or that has both
// Transfer-Encoding and Content-Length, cannot be framed safely: a proxy in
// front may have read its body differently, and the bytes after it would be
// parsed as the next request (request smuggling). Such a request gets 400
// and the connection is closed; this server supports no transfer coding but
// chunked.
//
// Credentials: `Authorization` is a singleton field (RFC 9110 §11.6.2). Two
// of them are ambiguous (a proxy may check one, the scope resolver read the
// other), so such a request gets 400 rather than "the first wins".
//
// Trailers: Beast's parser appends a chunked body's trailer fields to the
// request's header. The Idempotency-Key, the scope and the fingerprint must
// come from the header section only (a trailer field must not be used as a
// header field, RFC 9110 §6.5.1), so a session records HeaderFieldIds
// after reading the header and calls EraseTrailerFields after the body.
// Beast files a trailer field next to the header field of the same name,
// not at the end, so the trailer is told apart by identity, not position.
//
// Thread-safety: pure functions.

#ifndef IDEM_BEAST_REQUEST_CHECKS_H_
#define IDEM_BEAST_REQUEST_CHECKS_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "idem/asio/request_checks.h"
#include "idem/beast/handler.h"

namespace idem::beast {

// Why a request header cannot be served (idem/asio/request_checks.h).
using HeaderRejection = ::idem::asio::HeaderRejection;

// The first reason (framing, then credentials) a request with `header`
// must get 400 and have its connection closed, or nullopt.
std::optional<HeaderRejection> CheckRequestHeader(const RequestHeader& header);

// The identity of every field of `header` (repeats included), sorted:
// the addresses of Beast's field elements, which stay put while fields are
// added or erased around them.
using HeaderFieldIdentities = std::vector<const void*>;
HeaderFieldIdentities HeaderFieldIds(const RequestHeader& header);

// Erases every field of `header` that is not among `header_fields` (from
// HeaderFieldIds before the body was read): what a chunked body's trailer
// added, wherever Beast filed it.
void EraseTrailerFields(RequestHeader& header,
                        const HeaderFieldIdentities& header_fields);

}  // namespace idem::beast

#endif  // IDEM_BEAST_REQUEST_CHECKS_H_
