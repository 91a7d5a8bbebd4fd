#include "idem/asio/request_framing.h"

#include <algorithm>

#include "idem/asio/request_checks.h"
#include "idem/response.h"

namespace idem::asio {
namespace {

constexpr std::string_view kBadRequest = "bad_request";
constexpr std::string_view kHeaderTooLarge = "request_header_too_large";
// A chunk-size line (size and extensions) longer than this is refused.
constexpr std::size_t kChunkLineLimit = 1024;
// Hex digits of a chunk size: 15 keep it under 2^60.
constexpr std::size_t kChunkSizeDigits = 15;
// Digits of a Content-Length: 18 keep it under 10^18.
constexpr std::size_t kLengthDigits = 18;

bool IsTchar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) !=
         std::string_view::npos;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return IsTchar(static_cast<unsigned char>(c));
  });
}

bool IsOws(char c) { return c == ' ' || c == '\t'; }

// field-content (RFC 9110 §5.5): visible bytes, obs-text, SP and HTAB.
bool IsValueByte(unsigned char c) {
  return c == '\t' || (c >= 0x20 && c != 0x7f);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = static_cast<char>(c | 0x20);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

RequestFraming::RequestFraming(FramingLimits limits) : limits_(limits) {}

void RequestFraming::Append(std::string_view bytes) {
  if (rejection_) return;
  buf_.append(bytes);
  while (Step()) {
  }
}

std::string_view RequestFraming::Ready() const {
  return std::string_view(buf_).substr(0, ready_);
}

void RequestFraming::Consume(std::size_t n) {
  n = std::min(n, ready_);
  buf_.erase(0, n);
  ready_ -= n;
  scan_ -= n;
}

bool RequestFraming::Refuse(int status, std::string_view code,
                            std::string_view detail) {
  rejection_ = FramingRejection{status, std::string(code), std::string(detail),
                                target_, state_ == State::kHeader};
  return false;
}

std::optional<std::string_view> RequestFraming::NextLine(std::size_t max,
                                                         std::size_t* next) {
  const std::size_t lf = buf_.find('\n', scan_);
  if (lf == std::string::npos) {
    if (buf_.size() - scan_ > max) {
      if (state_ == State::kChunkSize) {
        Refuse(400, kBadRequest, "A chunk-size line is too long.");
      } else {
        Refuse(431, kHeaderTooLarge,
               "The request's header section is larger than this server "
               "accepts.");
      }
    }
    return std::nullopt;
  }
  if (lf - scan_ + 1 > max) {
    Refuse(431, kHeaderTooLarge,
           "The request's header section is larger than this server "
           "accepts.");
    return std::nullopt;
  }
  if (lf == scan_ || buf_[lf - 1] != '\r') {
    Refuse(400, kBadRequest,
           "A line of the request ends in a bare LF; HTTP/1.1 lines end in "
           "CRLF (RFC 9112 §2.2).");
    return std::nullopt;
  }
  const std::string_view line =
      std::string_view(buf_).substr(scan_, lf - 1 - scan_);
  if (line.find('\r') != std::string_view::npos) {
    Refuse(400, kBadRequest,
           "A line of the request has a CR that does not end it (RFC 9112 "
           "§2.2).");
    return std::nullopt;
  }
  *next = lf + 1;
  return line;
}

bool RequestFraming::Step() {
  if (rejection_) return false;
  switch (state_) {
    case State::kHeader: {
      std::size_t next = 0;
      const auto line = NextLine(limits_.header_bytes - section_bytes_, &next);
      if (!line) return false;
      section_bytes_ += next - scan_;
      return StepHeaderLine(*line, next);
    }
    case State::kBody:
    case State::kChunkData: {
      const std::uint64_t take =
          std::min<std::uint64_t>(remaining_, buf_.size() - scan_);
      scan_ += static_cast<std::size_t>(take);
      ready_ = scan_;
      remaining_ -= take;
      if (remaining_ > 0) return false;
      state_ = state_ == State::kBody ? State::kHeader : State::kChunkEnd;
      return true;
    }
    case State::kChunkEnd: {
      const std::string_view rest = std::string_view(buf_).substr(scan_);
      if (!rest.empty() && rest[0] != '\r') break;
      if (rest.size() < 2) return false;
      if (rest[1] != '\n') break;
      scan_ += 2;
      ready_ = scan_;
      state_ = State::kChunkSize;
      return true;
    }
    case State::kChunkSize:
      return StepChunkSize();
    case State::kTrailer:
      return StepTrailer();
  }
  return Refuse(400, kBadRequest, "A chunk's data is not followed by CRLF.");
}

bool RequestFraming::StepHeaderLine(std::string_view line, std::size_t next) {
  if (!request_line_seen_) {
    if (line.empty()) {
      // An empty line before a request line is skipped (RFC 9112 §2.2),
      // and not handed on: parsers differ on it.
      buf_.erase(scan_, next - scan_);
      return true;
    }
    request_line_seen_ = true;
    target_.clear();
    const std::size_t sp1 = line.find(' ');
    const std::size_t sp2 =
        sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos) {
      return Refuse(400, kBadRequest,
                    "The request line is not 'method target HTTP-version' "
                    "(RFC 9112 §3).");
    }
    const std::string_view method = line.substr(0, sp1);
    const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string_view version = line.substr(sp2 + 1);
    const bool target_ok =
        !target.empty() &&
        std::all_of(target.begin(), target.end(), [](char c) {
          const auto u = static_cast<unsigned char>(c);
          return u > 0x20 && u != 0x7f;
        });
    if (target_ok) target_ = target;
    if (!IsToken(method) || !target_ok) {
      return Refuse(400, kBadRequest,
                    "The request line is not 'method target HTTP-version' "
                    "(RFC 9112 §3).");
    }
    if (version != "HTTP/1.1" && version != "HTTP/1.0") {
      return Refuse(400, kBadRequest,
                    "This server speaks HTTP/1.1 and HTTP/1.0 only.");
    }
    if (method == "CONNECT") {
      return Refuse(400, kBadRequest, "This server is not a proxy: CONNECT.");
    }
    scan_ = next;
    return true;
  }
  if (line.empty()) return EndOfHeader(next);
  if (IsOws(line.front())) {
    return Refuse(400, kBadRequest,
                  "A header field is folded over lines (obs-fold), which "
                  "this server refuses (RFC 9112 §5.2).");
  }
  const std::size_t colon = line.find(':');
  const std::string_view name = line.substr(0, colon);
  if (colon == std::string_view::npos || !IsToken(name)) {
    const bool space = name.find_first_of(" \t") != std::string_view::npos;
    return Refuse(400, kBadRequest,
                  space ? "A header field name has whitespace in it or "
                          "before its colon (RFC 9112 §5.1)."
                        : "A header field is not 'name: value' with a token "
                          "for its name (RFC 9110 §5.1).");
  }
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && IsOws(value.front())) value.remove_prefix(1);
  while (!value.empty() && IsOws(value.back())) value.remove_suffix(1);
  if (!std::all_of(value.begin(), value.end(), [](char c) {
        return IsValueByte(static_cast<unsigned char>(c));
      })) {
    return Refuse(400, kBadRequest,
                  "A header field value has a control byte in it (RFC 9110 "
                  "§5.5).");
  }
  if (++fields_ > limits_.header_fields) {
    return Refuse(431, kHeaderTooLarge,
                  "The request has more header fields than this server "
                  "accepts.");
  }
  const std::size_t at = scan_ - ready_;
  const std::size_t value_at =
      at + static_cast<std::size_t>(value.data() - line.data());
  field_spans_.push_back({{at, name.size()}, {value_at, value.size()}});
  scan_ = next;
  return true;
}

bool RequestFraming::EndOfHeader(std::size_t next) {
  std::vector<HeaderView> headers;
  headers.reserve(field_spans_.size());
  const std::string_view section = std::string_view(buf_).substr(ready_);
  int lengths = 0;
  std::uint64_t length = 0;
  for (const auto& [name, value] : field_spans_) {
    headers.emplace_back(section.substr(name.first, name.second),
                         section.substr(value.first, value.second));
    if (!HeaderNameEquals(headers.back().first, "Content-Length")) continue;
    const std::string_view digits = headers.back().second;
    if (++lengths > 1 || digits.empty() || digits.size() > kLengthDigits ||
        !std::all_of(digits.begin(), digits.end(),
                     [](char c) { return c >= '0' && c <= '9'; })) {
      return Refuse(400, kBadRequest,
                    "The request's Content-Length is not one decimal number "
                    "(RFC 9112 §6.3).");
    }
    for (char c : digits) length = length * 10 + static_cast<unsigned>(c - '0');
  }
  if (auto rejected = CheckRequestHeaders(headers)) {
    return Refuse(400, rejected->code, rejected->detail);
  }
  const bool chunked =
      std::any_of(headers.begin(), headers.end(), [](const HeaderView& h) {
        return HeaderNameEquals(h.first, "Transfer-Encoding");
      });
  // The header section is whole and checked: handed on.
  scan_ = next;
  ready_ = next;
  request_line_seen_ = false;
  section_bytes_ = 0;
  fields_ = 0;
  field_spans_.clear();
  remaining_ = length;
  state_ = chunked          ? State::kChunkSize
           : remaining_ > 0 ? State::kBody
                            : State::kHeader;
  return true;
}

bool RequestFraming::StepChunkSize() {
  std::size_t next = 0;
  const auto line = NextLine(kChunkLineLimit, &next);
  if (!line) return false;
  std::size_t digits = 0;
  std::uint64_t size = 0;
  while (digits < line->size() && HexValue((*line)[digits]) >= 0) {
    size = size * 16 + static_cast<unsigned>(HexValue((*line)[digits]));
    ++digits;
  }
  std::string_view ext = line->substr(digits);
  while (!ext.empty() && IsOws(ext.front())) ext.remove_prefix(1);
  const bool ext_ok =
      ext.empty() ||
      (ext.front() == ';' && std::all_of(ext.begin(), ext.end(), [](char c) {
         return IsValueByte(static_cast<unsigned char>(c));
       }));
  if (digits == 0 || digits > kChunkSizeDigits || !ext_ok) {
    return Refuse(400, kBadRequest,
                  "A chunk-size line is not a hex size and extensions (RFC "
                  "9112 §7.1).");
  }
  scan_ = next;
  ready_ = next;
  remaining_ = size;
  section_bytes_ = 0;
  fields_ = 0;
  state_ = size > 0 ? State::kChunkData : State::kTrailer;
  return true;
}

bool RequestFraming::StepTrailer() {
  std::size_t next = 0;
  const auto line = NextLine(limits_.header_bytes - section_bytes_, &next);
  if (!line) return false;
  section_bytes_ += next - scan_;
  if (line->empty()) {
    scan_ = next;
    ready_ = next;
    section_bytes_ = 0;
    fields_ = 0;
    state_ = State::kHeader;
    return true;
  }
  // A trailer field is held to a header field's rules (it is never used as
  // one: the adapters drop it).
  const std::size_t colon = line->find(':');
  if (IsOws(line->front()) || colon == std::string_view::npos ||
      !IsToken(line->substr(0, colon)) ||
      !std::all_of(
          line->begin() + static_cast<std::ptrdiff_t>(colon), line->end(),
          [](char c) { return IsValueByte(static_cast<unsigned char>(c)); }) ||
      ++fields_ > limits_.header_fields) {
    return Refuse(400, kBadRequest,
                  "A field of the chunked body's trailer breaks the header "
                  "field rules (RFC 9112 §7.1.2).");
  }
  scan_ = next;
  ready_ = next;
  return true;
}

}  // namespace idem::asio
