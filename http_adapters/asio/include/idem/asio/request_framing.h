// RequestFraming: the framing rules every idem adapter's server holds a
// request to, checked on the raw bytes of a connection before any HTTP
// parser sees them, so that Beast's parser and RESTinio's (http-parser)
// accept exactly the same requests and frame them the same way.
//
// A request is refused (nothing of it reaches a parser or a handler) when
//   - a line ends in a bare LF, or has a CR that does not end it;
//   - its request line is not `method SP target SP HTTP/1.1` (or HTTP/1.0):
//     no version, HTTP/1.2, HTTP/2.0, two spaces, a method that is not a
//     token, a control byte or a space in the target;
//   - its method is CONNECT (these servers are no proxies, and parsers
//     disagree on what follows a CONNECT);
//   - a field name is not a token (`Content Length: 1`), or whitespace
//     comes between the name and the colon (`Idempotency-Key : v`, RFC 9112
//     §5.1 says a server must reject it);
//   - a field line starts with whitespace: obs-fold (RFC 9112 §5.2 allows
//     rejecting it; parsers unfold it differently, so one key read two ways
//     would be two keys);
//   - a field value holds a control byte other than HTAB;
//   - the request line and header section are over `header_bytes`, or it
//     has more than `header_fields` fields: 431;
//   - Content-Length is not one run of digits, or comes twice, or
//     Transfer-Encoding is anything but one `chunked`, or both are present,
//     or Authorization comes twice (CheckRequestHeaders, request_checks.h);
//   - a chunked body's framing is broken (a chunk size that is not hex, a
//     chunk not followed by CRLF, a trailer field breaking the rules above).
// Leading empty lines before a request line are skipped (RFC 9112 §2.2).
//
// The checker frames the body itself (Content-Length or chunked) to find
// where the next request starts; a header section is handed on only once it
// is whole and checked, so a refused request is refused before a parser has
// seen any of it, and everything before it was a whole, checked request.
//
// Thread-safety: one connection's reads, one thread at a time.

#ifndef IDEM_ASIO_REQUEST_FRAMING_H_
#define IDEM_ASIO_REQUEST_FRAMING_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::asio {

struct FramingLimits {
  // Most bytes of a request line and header section (and of a chunked
  // body's trailer), line ends included. Default: 16 KiB.
  std::size_t header_bytes = 16 * 1024;
  // Most header fields of a request (and of a trailer). Default: 100.
  std::size_t header_fields = 100;
};

// Why a request was refused: the answer's status (400 or 431), its problem
// code and detail (fixed sentences: nothing of the request), the request's
// target when its request line was read (for the problem's instance), and
// whether the refused bytes start a request (false: in a body or trailer,
// after its header section was handed on).
struct FramingRejection {
  int status = 400;
  std::string code;
  std::string detail;
  std::string target;
  bool at_request_start = true;
};

class RequestFraming {
 public:
  explicit RequestFraming(FramingLimits limits = {});

  // Takes bytes read from the connection and checks what it can.
  void Append(std::string_view bytes);

  // The bytes checked and ready for the HTTP parser (whole header sections,
  // body bytes), in order; Consume takes them.
  std::string_view Ready() const;
  void Consume(std::size_t n);

  // Set once a request was refused; no byte from it on is ever Ready.
  const std::optional<FramingRejection>& rejection() const {
    return rejection_;
  }

 private:
  enum class State {
    kHeader,     // Before or in a request line or header section.
    kBody,       // In a Content-Length body.
    kChunkSize,  // Before a chunk-size line.
    kChunkData,  // In a chunk's data.
    kChunkEnd,   // The CRLF after a chunk's data.
    kTrailer,    // In a chunked body's trailer section.
  };

  // Checks from scan_ on; false when it needs more bytes or refused.
  bool Step();
  bool StepHeaderLine(std::string_view line, std::size_t next);
  bool EndOfHeader(std::size_t next);
  bool StepChunkSize();
  bool StepTrailer();
  // The line from scan_ to its LF (CR excluded): nullopt when incomplete
  // (refused when over `max` bytes, or ending in a bare LF).
  std::optional<std::string_view> NextLine(std::size_t max, std::size_t* next);
  bool Refuse(int status, std::string_view code, std::string_view detail);

  FramingLimits limits_;
  std::string buf_;        // Bytes not consumed yet.
  std::size_t ready_ = 0;  // [0, ready_) is Ready.
  std::size_t scan_ = 0;   // Checked up to here.
  State state_ = State::kHeader;
  bool request_line_seen_ = false;
  std::uint64_t remaining_ = 0;  // Of a body or chunk.
  bool chunked_ = false;
  std::size_t section_bytes_ = 0;  // Of the header section or trailer.
  std::size_t fields_ = 0;
  std::string target_;
  // The header section's fields as offsets from ready_ (name, value).
  std::vector<std::pair<std::pair<std::size_t, std::size_t>,
                        std::pair<std::size_t, std::size_t>>>
      field_spans_;
  std::optional<FramingRejection> rejection_;
};

}  // namespace idem::asio

#endif  // IDEM_ASIO_REQUEST_FRAMING_H_
