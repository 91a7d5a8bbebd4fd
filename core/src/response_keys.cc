// ResponseKeyRing and the key file (response_keys.h).
#include "idem/response_keys.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

namespace idem {
namespace {

// Wipes a string's bytes (its capacity may hold more; the parse keeps none).
void Wipe(std::string& s) {
  if (!s.empty()) OPENSSL_cleanse(s.data(), s.size());
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view Trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

Error Invalid(std::string message) {
  return Error(ErrorCode::kInvalidArgument, std::move(message));
}

}  // namespace

bool ResponseKeyRing::ValidKeyId(std::string_view id) {
  if (id.empty() || id.size() > kMaxKeyIdLength) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
}

Result<std::shared_ptr<const ResponseKeyRing>> ResponseKeyRing::Create(
    std::vector<Key> keys) {
  auto wipe_all = [&keys] {
    for (Key& k : keys) OPENSSL_cleanse(k.bytes.data(), k.bytes.size());
  };
  if (keys.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "response keys: no keys");
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (!ValidKeyId(keys[i].id)) {
      wipe_all();
      return MakeError(ErrorCode::kInvalidArgument,
                       "response keys: key " + std::to_string(i + 1) +
                           " has a malformed id (1-64 characters of "
                           "A-Z a-z 0-9 . _ -)");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (keys[j].id == keys[i].id) {
        wipe_all();
        return MakeError(
            ErrorCode::kInvalidArgument,
            "response keys: key id \"" + keys[i].id + "\" is given twice");
      }
    }
  }
  // The vector's buffer moves into the ring: nothing is left to wipe.
  return std::shared_ptr<const ResponseKeyRing>(
      new ResponseKeyRing(std::move(keys)));
}

ResponseKeyRing::~ResponseKeyRing() {
  for (Key& k : keys_) OPENSSL_cleanse(k.bytes.data(), k.bytes.size());
}

const ResponseKeyRing::Key* ResponseKeyRing::Find(std::string_view id) const {
  for (const Key& k : keys_) {
    if (k.id == id) return &k;
  }
  return nullptr;
}

std::vector<std::string> ResponseKeyRing::ids() const {
  std::vector<std::string> out;
  out.reserve(keys_.size());
  for (const Key& k : keys_) out.push_back(k.id);
  return out;
}

Result<std::shared_ptr<const ResponseKeyRing>> ResponseKeyRing::Parse(
    std::string_view text) {
  std::vector<Key> keys;
  // Room for every line up front: a reallocation would leave copies of the
  // keys read so far in freed memory, unwiped.
  keys.reserve(
      static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 1);
  auto fail = [&keys](std::string message) {
    for (Key& k : keys) OPENSSL_cleanse(k.bytes.data(), k.bytes.size());
    return tl::unexpected<Error>(Invalid(std::move(message)));
  };
  std::size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const std::size_t end = text.find('\n');
    const std::string_view line =
        Trim(text.substr(0, end == std::string_view::npos ? text.size() : end));
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (line.empty() || line.front() == '#') continue;
    const std::string where = "line " + std::to_string(line_number) + ": ";
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      return fail(where + "expected id:64-hex-digits");
    }
    Key key;
    key.id = std::string(line.substr(0, colon));
    if (!ValidKeyId(key.id)) {
      return fail(where +
                  "malformed key id (1-64 characters of A-Z a-z 0-9 . _ -)");
    }
    const std::string_view hex = line.substr(colon + 1);
    if (hex.size() != 2 * kKeySize) {
      return fail(where + "the key must be 64 hex digits (32 bytes), got " +
                  std::to_string(hex.size()) + " characters");
    }
    for (std::size_t i = 0; i < kKeySize; ++i) {
      const int hi = HexDigit(hex[2 * i]);
      const int lo = HexDigit(hex[2 * i + 1]);
      if (hi < 0 || lo < 0) {
        OPENSSL_cleanse(key.bytes.data(), key.bytes.size());
        return fail(where + "the key has a character that is not a hex digit");
      }
      key.bytes[i] = static_cast<std::uint8_t>(hi << 4 | lo);
    }
    for (const Key& other : keys) {
      if (other.id == key.id) {
        OPENSSL_cleanse(key.bytes.data(), key.bytes.size());
        return fail(where + "key id \"" + key.id + "\" is given twice");
      }
    }
    keys.push_back(std::move(key));
    OPENSSL_cleanse(key.bytes.data(), key.bytes.size());  // The moved-from.
  }
  if (keys.empty()) return fail("no keys (one id:64-hex-digits per line)");
  return Create(std::move(keys));
}

Result<std::shared_ptr<const ResponseKeyRing>> ResponseKeyRing::LoadFile(
    const std::string& path) {
  const std::string where = "response key file " + path + ": ";
  // One descriptor for the check and the read, so the file checked is the
  // file read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    return MakeError(ErrorCode::kUnavailable,
                     where + "cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return MakeError(ErrorCode::kUnavailable,
                     where + "cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return MakeError(ErrorCode::kInvalidArgument, where + "not a regular file");
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o",
                  static_cast<unsigned>(st.st_mode & 0777));
    return MakeError(ErrorCode::kInvalidArgument,
                     where + "is accessible by group or others (mode " + mode +
                         "); keys must be readable by their owner only "
                         "(chmod 600)");
  }
  // A key file is a few lines; a huge one is a mistake, not a key ring.
  constexpr off_t kMaxKeyFile = 1 << 20;
  if (st.st_size > kMaxKeyFile) {
    ::close(fd);
    return MakeError(ErrorCode::kInvalidArgument,
                     where + "larger than 1 MiB: not a key file");
  }
  std::string text(static_cast<std::size_t>(st.st_size) + 1, '\0');
  std::size_t size = 0;
  for (;;) {
    if (size == text.size()) text.resize(text.size() * 2);
    const ssize_t n = ::read(fd, text.data() + size, text.size() - size);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      Wipe(text);
      return MakeError(ErrorCode::kUnavailable,
                       where + "cannot read: " + std::strerror(err));
    }
    size += static_cast<std::size_t>(n);
    if (size > static_cast<std::size_t>(kMaxKeyFile)) break;
  }
  ::close(fd);
  auto ring = Parse(std::string_view(text.data(), size));
  Wipe(text);
  if (!ring)
    return MakeError(ring.error().code(), where + ring.error().message());
  return ring;
}

}  // namespace idem
