// The stored form of a response (stored_response.h): the envelope, zstd
// compression and AES-256-GCM sealing.
#include "idem/stored_response.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <zstd.h>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace idem {
namespace {

constexpr std::string_view kVersion = "v1";
constexpr std::string_view kAdPrefix = "idem-stored-response-v1";
constexpr std::size_t kNonceSize = 12;  // 96 bits, GCM's natural nonce.
constexpr std::size_t kTagSize = 16;
// A payload lists the stored headers (a handful); more is not ours.
constexpr std::uint32_t kMaxHeaders = 1024;

void PutU32(std::string& out, std::uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 8), static_cast<char>(v)};
  out.append(b, 4);
}

bool GetU32(std::string_view& in, std::uint32_t& v) {
  if (in.size() < 4) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  v = std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 |
      std::uint32_t{p[2]} << 8 | std::uint32_t{p[3]};
  in.remove_prefix(4);
  return true;
}

std::string EncodePayload(const Response& r) {
  std::size_t size = 4 + r.body.size();
  for (const Header& h : r.headers)
    size += 8 + h.first.size() + h.second.size();
  std::string out;
  out.reserve(size);
  PutU32(out, static_cast<std::uint32_t>(r.headers.size()));
  for (const Header& h : r.headers) {
    PutU32(out, static_cast<std::uint32_t>(h.first.size()));
    out += h.first;
    PutU32(out, static_cast<std::uint32_t>(h.second.size()));
    out += h.second;
  }
  out += r.body;
  return out;
}

bool DecodePayload(std::string_view in, Response& r) {
  std::uint32_t count = 0;
  if (!GetU32(in, count) || count > kMaxHeaders) return false;
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint32_t len = 0;
    Header h;
    if (!GetU32(in, len) || len > in.size()) return false;
    h.first = std::string(in.substr(0, len));
    in.remove_prefix(len);
    if (!GetU32(in, len) || len > in.size()) return false;
    h.second = std::string(in.substr(0, len));
    in.remove_prefix(len);
    r.headers.push_back(std::move(h));
  }
  r.body = std::string(in);
  return true;
}

std::string AssociatedData(const RecordId& id, const Fingerprint& fp,
                           int status, std::string_view header_value) {
  std::string ad(kAdPrefix);
  ad += id.view();
  ad += fp.view();
  PutU32(ad, static_cast<std::uint32_t>(status));
  ad += header_value;
  return ad;
}

struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;

const EVP_CIPHER* Aes256Gcm() {
  // Fetched once: the implicit fetch of EVP_aes_256_gcm() costs a lookup
  // per call.
  static EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
  return cipher;
}

// nonce || ciphertext || tag, or nullopt on an OpenSSL failure.
std::optional<std::string> Seal(const ResponseKeyRing::Key& key,
                                std::string_view ad, std::string_view plain) {
  std::string out(kNonceSize + plain.size() + kTagSize, '\0');
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  if (RAND_bytes(o, kNonceSize) != 1) return std::nullopt;
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  if (!ctx || Aes256Gcm() == nullptr ||
      EVP_EncryptInit_ex2(ctx.get(), Aes256Gcm(), key.bytes.data(), o,
                          nullptr) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len,
                        reinterpret_cast<const unsigned char*>(ad.data()),
                        static_cast<int>(ad.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), o + kNonceSize, &len,
                        reinterpret_cast<const unsigned char*>(plain.data()),
                        static_cast<int>(plain.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), o + kNonceSize + len, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagSize,
                          o + kNonceSize + plain.size()) != 1) {
    return std::nullopt;
  }
  return out;
}

// The plaintext, or nullopt when the tag does not match (or OpenSSL fails).
std::optional<std::string> Open(const ResponseKeyRing::Key& key,
                                std::string_view ad, std::string_view sealed) {
  if (sealed.size() < kNonceSize + kTagSize) return std::nullopt;
  const auto* in = reinterpret_cast<const unsigned char*>(sealed.data());
  const std::size_t ct_size = sealed.size() - kNonceSize - kTagSize;
  std::string out(ct_size, '\0');
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  unsigned char tag[kTagSize];
  std::memcpy(tag, in + kNonceSize + ct_size, kTagSize);
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  if (!ctx || Aes256Gcm() == nullptr ||
      EVP_DecryptInit_ex2(ctx.get(), Aes256Gcm(), key.bytes.data(), in,
                          nullptr) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len,
                        reinterpret_cast<const unsigned char*>(ad.data()),
                        static_cast<int>(ad.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), o, &len, in + kNonceSize,
                        static_cast<int>(ct_size)) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagSize, tag) !=
          1 ||
      EVP_DecryptFinal_ex(ctx.get(), o + len, &len) != 1) {
    return std::nullopt;
  }
  return out;
}

struct CCtxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxFree {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

// One context per thread: making one costs more than compressing 1 KiB.
std::optional<std::string> Compress(std::string_view in, int level) {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxFree> cctx(ZSTD_createCCtx());
  if (!cctx) return std::nullopt;
  std::string out(ZSTD_compressBound(in.size()), '\0');
  const std::size_t n = ZSTD_compressCCtx(cctx.get(), out.data(), out.size(),
                                          in.data(), in.size(), level);
  if (ZSTD_isError(n)) return std::nullopt;
  out.resize(n);
  return out;
}

// nullopt with *why set when the frame is refused.
std::optional<std::string> Decompress(std::string_view in, std::size_t limit,
                                      std::string& why) {
  const unsigned long long size =
      ZSTD_getFrameContentSize(in.data(), in.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) {
    why = "the compressed frame does not state its size";
    return std::nullopt;
  }
  if (size > limit) {
    why = "the compressed frame states " + std::to_string(size) +
          " bytes, more than the " + std::to_string(limit) + " allowed";
    return std::nullopt;
  }
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx(ZSTD_createDCtx());
  if (!dctx) {
    why = "no memory for a zstd context";
    return std::nullopt;
  }
  std::string out(static_cast<std::size_t>(size), '\0');
  const std::size_t n = ZSTD_decompressDCtx(dctx.get(), out.data(), out.size(),
                                            in.data(), in.size());
  if (ZSTD_isError(n) || n != size) {
    why = "the compressed frame does not decode";
    return std::nullopt;
  }
  return out;
}

// The header's parameters.
struct Envelope {
  bool zstd = false;
  std::optional<std::string> key_id;
  std::optional<StoredTimes> times;
};

bool ParseTimes(std::string_view s, StoredTimes& t) {
  TimePoint* fields[3] = {&t.created_at, &t.completed_at, &t.expires_at};
  for (int i = 0; i < 3; ++i) {
    const std::size_t comma = i < 2 ? s.find(',') : s.size();
    if (comma == std::string_view::npos) return false;
    std::int64_t ns = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + comma, ns);
    if (ec != std::errc() || end != s.data() + comma) return false;
    *fields[i] = TimePoint(
        std::chrono::duration_cast<Duration>(std::chrono::nanoseconds(ns)));
    s.remove_prefix(i < 2 ? comma + 1 : comma);
  }
  return true;
}

std::optional<Envelope> ParseEnvelope(std::string_view value) {
  Envelope env;
  bool first = true;
  while (!value.empty() || first) {
    const std::size_t semi = value.find(';');
    std::string_view part = value.substr(0, semi);
    value.remove_prefix(semi == std::string_view::npos ? value.size()
                                                       : semi + 1);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    if (first) {
      if (part != kVersion) return std::nullopt;
      first = false;
    } else if (part == "zstd") {
      env.zstd = true;
    } else if (part.starts_with("key=")) {
      env.key_id = std::string(part.substr(4));
      if (!ResponseKeyRing::ValidKeyId(*env.key_id)) return std::nullopt;
    } else if (part.starts_with("times=")) {
      StoredTimes t;
      if (!ParseTimes(part.substr(6), t)) return std::nullopt;
      env.times = t;
    } else {
      return std::nullopt;
    }
  }
  return env;
}

// Appends `t` in ns since the epoch, in decimal, to `out`.
void AppendNanos(std::string& out, TimePoint t) {
  char digits[24];
  const auto [end, ec] = std::to_chars(
      digits, digits + sizeof digits,
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch())
          .count());
  out.append(digits, ec == std::errc() ? end : digits);
}

const std::string* FindEnvelope(const Response& stored) {
  for (const Header& h : stored.headers) {
    if (HeaderNameEquals(h.first, kStoredResponseHeader)) return &h.second;
  }
  return nullptr;
}

}  // namespace

Result<Response> EncodeStoredResponse(const Response& response,
                                      const RecordId& id, const Fingerprint& fp,
                                      const StoredResponseSettings& settings) {
  const bool compress = settings.compress_above > 0 &&
                        response.body.size() > settings.compress_above;
  if (settings.keys == nullptr && !compress && !settings.times) {
    return response;
  }
  std::string payload = EncodePayload(response);
  // Every envelope of every request: built in place, one allocation.
  std::string value;
  value.reserve(128);
  value += kVersion;
  if (settings.times) {
    value += "; times=";
    AppendNanos(value, settings.times->created_at);
    value += ',';
    AppendNanos(value, settings.times->completed_at);
    value += ',';
    AppendNanos(value, settings.times->expires_at);
  }
  if (compress) {
    auto packed = Compress(payload, settings.compression_level);
    if (!packed) {
      return MakeError(ErrorCode::kInternal, "zstd compression failed");
    }
    // Kept only when it saves bytes: already compressed bodies (images,
    // gzip) are stored as they are.
    if (packed->size() < payload.size()) {
      payload = std::move(*packed);
      value += "; zstd";
    }
  }
  Response stored;
  stored.status = response.status;
  if (settings.keys != nullptr) {
    const ResponseKeyRing::Key& key = settings.keys->sealing_key();
    value += "; key=" + key.id;
    auto sealed =
        Seal(key, AssociatedData(id, fp, response.status, value), payload);
    OPENSSL_cleanse(payload.data(), payload.size());
    if (!sealed) {
      return MakeError(ErrorCode::kInternal,
                       "sealing the response failed (OpenSSL)");
    }
    payload = std::move(*sealed);
  }
  stored.headers.emplace_back(std::string(kStoredResponseHeader),
                              std::move(value));
  stored.body = std::move(payload);
  return stored;
}

Result<DecodedStoredResponse> DecodeStoredResponse(const Response& stored,
                                                   const RecordId& id,
                                                   const Fingerprint& fp,
                                                   const ResponseKeyRing* keys,
                                                   std::size_t max_body) {
  DecodedStoredResponse out;
  const std::string* value = FindEnvelope(stored);
  if (value == nullptr) {
    out.response = stored;
    return out;
  }
  auto damaged = [](std::string why) {
    return MakeError(ErrorCode::kDataLoss, "stored response: " + why);
  };
  const auto env = ParseEnvelope(*value);
  if (!env || stored.headers.size() != 1) {
    return damaged("the envelope header is malformed");
  }
  out.times = env->times;
  std::string payload;
  if (env->key_id) {
    const std::string& key_id = *env->key_id;
    if (keys == nullptr) {
      return damaged("sealed with key id " + key_id +
                     ", and no response keys are configured");
    }
    const ResponseKeyRing::Key* key = keys->Find(key_id);
    if (key == nullptr) {
      return damaged("sealed with key id " + key_id +
                     ", which is not among the response keys");
    }
    auto opened =
        Open(*key, AssociatedData(id, fp, stored.status, *value), stored.body);
    if (!opened) {
      return damaged("sealed with key id " + key_id +
                     " and does not open (altered, truncated, moved from "
                     "another record, or another key under that id)");
    }
    payload = std::move(*opened);
  } else {
    payload = stored.body;
  }
  const std::size_t limit = max_body + kStoredHeadersAllowance;
  if (env->zstd) {
    std::string why;
    auto unpacked = Decompress(payload, limit, why);
    if (!unpacked) return damaged(why);
    payload = std::move(*unpacked);
  }
  if (payload.size() > limit || !DecodePayload(payload, out.response)) {
    return damaged("the payload does not decode");
  }
  if (env->key_id) OPENSSL_cleanse(payload.data(), payload.size());
  out.response.status = stored.status;
  return out;
}

std::optional<std::string> SealingKeyId(const Response& stored) {
  const std::string* value = FindEnvelope(stored);
  if (value == nullptr) return std::nullopt;
  const auto env = ParseEnvelope(*value);
  if (!env) return std::nullopt;
  return env->key_id;
}

}  // namespace idem
