// SHA-256 based request fingerprints and the per-thread hashing context they
// share with Sha256() (idem/internal/sha256.h) and MakeRecordId().
//
// Cost model: with OpenSSL 3 the expensive parts of hashing a small message
// are not the compression function but fetching the algorithm (a locked
// provider lookup) and allocating a context. Every thread therefore keeps
// one hashing context for its lifetime. OpenSSL 3.0's EVP_DigestInit_ex2
// frees and allocates the provider's context on every call even then (two
// allocations per request: the record id and the fingerprint), so the
// context is SHA256_CTX of <openssl/sha.h>, the same SHA-256 code without
// the provider's context: no allocation at all. Those functions are
// deprecated in 3.0; an OpenSSL built without them
// (OPENSSL_NO_DEPRECATED_3_0) gets the EVP path, its EVP_MD fetched once per
// process.

// SHA256_Init and co.: see above.
#define OPENSSL_SUPPRESS_DEPRECATED

#include "idem/fingerprint.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "idem/canonical_json.h"
#include "idem/internal/sha256.h"
#include "idem/response.h"

namespace idem {
namespace {

// Hashing has no error path in this API: OpenSSL's SHA-256 fails only when
// the default provider is missing or memory is exhausted, and carrying on
// with a wrong digest would silently merge unrelated requests.
[[noreturn]] void Fatal(const char* what) {
  std::fprintf(stderr, "idem: OpenSSL SHA-256 failure in %s\n", what);
  std::abort();
}

#ifdef OPENSSL_NO_DEPRECATED_3_0
#define IDEM_SHA256_EVP 1
#endif

#ifdef IDEM_SHA256_EVP
const EVP_MD* Sha256Md() {
  // Deliberately never freed: thread_local builders may still be finishing
  // their last digest while static destructors run at exit.
  static const EVP_MD* const md = [] {
    EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    if (fetched == nullptr) Fatal("EVP_MD_fetch");
    return fetched;
  }();
  return md;
}
#endif

void PutU64BigEndian(std::uint64_t v, unsigned char* out) {
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<unsigned char>(v & 0xFF);
    v >>= 8;
  }
}

void AddLengthPrefix(FingerprintBuilder& b, std::uint64_t n) {
  char prefix[8];
  PutU64BigEndian(n, reinterpret_cast<unsigned char*>(prefix));
  b.AddRaw(std::string_view(prefix, sizeof prefix));
}

FingerprintBuilder& ThreadBuilder() {
  thread_local FingerprintBuilder builder;
  return builder;
}

}  // namespace

struct FingerprintBuilder::Impl {
#ifdef IDEM_SHA256_EVP
  EVP_MD_CTX* ctx = nullptr;
#else
  SHA256_CTX ctx;
#endif
  // Init is deferred to the first byte so that Reset() after Finish() (or a
  // fresh builder) costs one EVP_DigestInit_ex2, not two.
  bool needs_init = true;
  // Small fields (length prefixes, method, target, header names) are staged
  // here and reach OpenSSL in one update call; large ones bypass it.
  std::size_t staged = 0;
  std::array<unsigned char, 256> stage;

  void Init() {
#ifdef IDEM_SHA256_EVP
    if (EVP_DigestInit_ex2(ctx, Sha256Md(), nullptr) != 1) {
      Fatal("EVP_DigestInit_ex2");
    }
#else
    if (SHA256_Init(&ctx) != 1) Fatal("SHA256_Init");
#endif
    needs_init = false;
  }
  void Update(const void* data, std::size_t n) {
    if (needs_init) Init();
#ifdef IDEM_SHA256_EVP
    if (EVP_DigestUpdate(ctx, data, n) != 1) Fatal("EVP_DigestUpdate");
#else
    if (SHA256_Update(&ctx, data, n) != 1) Fatal("SHA256_Update");
#endif
  }
  void Final(std::array<std::uint8_t, 32>& out) {
#ifdef IDEM_SHA256_EVP
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(ctx, out.data(), &n) != 1 || n != out.size()) {
      Fatal("EVP_DigestFinal_ex");
    }
#else
    if (SHA256_Final(out.data(), &ctx) != 1) Fatal("SHA256_Final");
#endif
  }
  void Flush() {
    if (staged == 0) return;
    Update(stage.data(), staged);
    staged = 0;
  }
  void Add(const void* data, std::size_t n) {
    if (n == 0) return;  // A default string_view has data() == nullptr.
    if (staged + n <= stage.size()) {
      std::memcpy(stage.data() + staged, data, n);
      staged += n;
      return;
    }
    Flush();
    if (n < stage.size()) {
      std::memcpy(stage.data(), data, n);
      staged = n;
    } else {
      Update(data, n);
    }
  }
  void AddLength(std::uint64_t n) {
    unsigned char prefix[8];
    PutU64BigEndian(n, prefix);
    Add(prefix, sizeof prefix);
  }
};

FingerprintBuilder::FingerprintBuilder() : impl_(std::make_unique<Impl>()) {
#ifdef IDEM_SHA256_EVP
  impl_->ctx = EVP_MD_CTX_new();
  if (impl_->ctx == nullptr) Fatal("EVP_MD_CTX_new");
#endif
}

FingerprintBuilder::~FingerprintBuilder() {
#ifdef IDEM_SHA256_EVP
  EVP_MD_CTX_free(impl_->ctx);
#else
  OPENSSL_cleanse(&impl_->ctx, sizeof impl_->ctx);
#endif
}

void FingerprintBuilder::Reset() {
  impl_->needs_init = true;
  impl_->staged = 0;
}

void FingerprintBuilder::AddField(std::string_view field) {
  impl_->AddLength(field.size());
  impl_->Add(field.data(), field.size());
}

void FingerprintBuilder::AddRaw(std::string_view bytes) {
  impl_->Add(bytes.data(), bytes.size());
}

std::array<std::uint8_t, 32> FingerprintBuilder::Finish() {
  impl_->Flush();
  if (impl_->needs_init) impl_->Init();  // Digest of the empty message.
  std::array<std::uint8_t, 32> out;
  impl_->Final(out);
  impl_->needs_init = true;
  return out;
}

Fingerprint ComputeFingerprint(const FingerprintInput& input) {
  FingerprintBuilder& b = ThreadBuilder();
  b.Reset();
  b.AddField(input.method);
  b.AddField(input.target);

  // Adjacent pairs with the same name (ASCII case-insensitive) are one header
  // with several field lines: hash it once, values joined by ", ", exactly as
  // if the caller had joined them. Streaming the pieces avoids building the
  // joined string.
  const auto& headers = input.headers;
  for (std::size_t i = 0; i < headers.size();) {
    const std::string_view name = headers[i].first;
    std::size_t end = i + 1;
    std::uint64_t value_length = headers[i].second.size();
    while (end < headers.size() && HeaderNameEquals(headers[end].first, name)) {
      value_length += 2 + headers[end].second.size();
      ++end;
    }

    // Lowercased name, in stack-sized chunks to keep this allocation-free.
    AddLengthPrefix(b, name.size());
    char lower[64];
    for (std::size_t off = 0; off < name.size(); off += sizeof lower) {
      const std::size_t n = std::min(sizeof lower, name.size() - off);
      for (std::size_t k = 0; k < n; ++k) {
        const char c = name[off + k];
        lower[k] = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
      }
      b.AddRaw(std::string_view(lower, n));
    }

    AddLengthPrefix(b, value_length);
    for (std::size_t k = i; k < end; ++k) {
      if (k != i) b.AddRaw(", ");
      b.AddRaw(headers[k].second);
    }
    i = end;
  }

  if (input.body_mode == BodyFingerprint::kJson) {
    if (const auto canonical = CanonicalizeJson(input.body)) {
      b.AddField(*canonical);
    } else {
      b.AddField(input.body);
    }
  } else {
    b.AddField(input.body);
  }

  Fingerprint fp;
  fp.bytes = b.Finish();
  return fp;
}

std::array<std::uint8_t, 32> Sha256(std::string_view data) {
  FingerprintBuilder& b = ThreadBuilder();
  b.Reset();
  b.AddRaw(data);
  return b.Finish();
}

}  // namespace idem
