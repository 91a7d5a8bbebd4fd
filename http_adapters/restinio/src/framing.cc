#include "idem/restinio/framing.h"

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <random>
#include <string_view>

#include "idem/problem.h"
#include "idem/restinio/convert.h"

namespace idem::restinio {
namespace {

// The stand-in's field: `<secret> <status> <hex code> <hex detail> <hex
// target>`. Hex keeps every byte of it within what http-parser accepts.
constexpr std::string_view kField = "Idem-Framing-Refused";

constexpr char kHex[] = "0123456789abcdef";

std::string Hex(std::string_view s) {
  std::string out;
  out.reserve(2 * s.size());
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    out += kHex[u >> 4];
    out += kHex[u & 0xf];
  }
  return out;
}

std::optional<std::string> Unhex(std::string_view s) {
  if (s.size() % 2 != 0) return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < s.size(); i += 2) {
    const int hi = digit(s[i]);
    const int lo = digit(s[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

// 128 random bits, drawn once per process: the stand-in cannot be forged
// by a client, which never sees it.
const std::string& Secret() {
  static const std::string secret = [] {
    std::random_device device;
    std::string bytes;
    for (int i = 0; i < 4; ++i) {
      const std::uint32_t word = device();
      bytes.append(reinterpret_cast<const char*>(&word), sizeof(word));
    }
    return Hex(bytes);
  }();
  return secret;
}

// The next space-separated word of `s`, taken off it.
std::string_view Word(std::string_view& s) {
  const std::size_t space = s.find(' ');
  const std::string_view word = s.substr(0, space);
  s = space == std::string_view::npos ? std::string_view()
                                      : s.substr(space + 1);
  return word;
}

}  // namespace

std::optional<std::string> FramingStandIn::Bytes(
    const ::idem::asio::FramingRejection& rejection) {
  return "GET / HTTP/1.1\r\nHost: idem\r\n" + std::string(kField) + ": " +
         Secret() + " " + std::to_string(rejection.status) + " " +
         Hex(rejection.code) + " " + Hex(rejection.detail) + " " +
         Hex(rejection.target) + "\r\nConnection: close\r\n\r\n";
}

void FramedSocket::DiscardUnread() {
  if (rejection() == nullptr || !next_layer().is_open()) return;
  std::array<char, 16 * 1024> discard;
  for (std::size_t total = 0; total < (std::size_t{16} << 20);) {
    const ssize_t n = ::recv(next_layer().native_handle(), discard.data(),
                             discard.size(), MSG_DONTWAIT);
    if (n <= 0) break;
    total += static_cast<std::size_t>(n);
  }
}

bool AnswerFramingRejection(::restinio::request_t& request) {
  const auto field = request.header().try_get_field(kField);
  if (!field) return false;
  std::string_view rest(field->data(), field->size());
  const std::string_view secret = Word(rest);
  if (secret != Secret()) return false;
  const std::string_view status = Word(rest);
  const auto code = Unhex(Word(rest));
  const auto detail = Unhex(Word(rest));
  const auto target = Unhex(Word(rest));
  Problem problem;
  problem.status = status == "431" ? 431 : 400;
  problem.code = code ? std::string_view(*code) : "bad_request";
  problem.detail = detail ? *detail : "";
  const std::string_view path = target ? std::string_view(*target) : "";
  problem.instance = path.substr(0, path.find('?'));
  Send(request, MakeProblemResponse(problem), /*close=*/true);
  return true;
}

}  // namespace idem::restinio
