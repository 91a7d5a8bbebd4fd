#include "redis_scripts.h"

#include <openssl/evp.h>

#include <array>
#include <cstdlib>

namespace idem::redis {
namespace {

// Offsets are Lua's (1-based) into the record codec's header
// (record_codec.h): state at 3, token at 36..51, the header 1..67.
//
// The SET must be each script's first write: Redis refuses a script's first
// write under -OOM, but not later ones, so a full server does not grow.
// SET without KEEPTTL replaces the key's TTL (none without PX: a record
// meant never to expire).
constexpr std::string_view kReclaim = R"lua(
local h = redis.call('GETRANGE', KEYS[1], 0, 66)
if h == ARGV[1] then
  if ARGV[3] == '0' then
    redis.call('SET', KEYS[1], ARGV[2])
  else
    redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  end
  return 1
end
if h == string.sub(ARGV[2], 1, 67) then return 1 end
return 0
)lua";

// KEEPTTL: the completed record keeps expires_at. The call id at the end is
// compared only by a resend of the call that wrote it. 3: no record at all
// (evicted or deleted), which the store reports apart from a takeover (0).
constexpr std::string_view kComplete = R"lua(
local h = redis.call('GETRANGE', KEYS[1], 0, 66)
if h == '' and redis.call('EXISTS', KEYS[1]) == 0 then return 3 end
if string.sub(h, 36, 51) ~= ARGV[1] then return 0 end
local s = string.byte(h, 3)
if s == 1 then
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
  return 1
end
if s == 2 and redis.call('GETRANGE', KEYS[1], -16, -1) ==
    string.sub(ARGV[2], -16) then
  return 1
end
return 0
)lua";

constexpr std::string_view kRelease = R"lua(
local h = redis.call('GETRANGE', KEYS[1], 0, 66)
if string.byte(h, 3) == 1 and string.sub(h, 36, 51) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
)lua";

// A token's fingerprint and expires_at never change, so a header that is
// still in progress with the token read differs only in locked_until.
constexpr std::string_view kExtendLock = R"lua(
local h = redis.call('GETRANGE', KEYS[1], 0, 66)
if h == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
  return 1
end
if h == string.sub(ARGV[2], 1, 67) then return 1 end
if string.byte(h, 3) == 1 and
    string.sub(h, 36, 51) == string.sub(ARGV[1], 36, 51) then
  return 2
end
return 0
)lua";

// pcall: a key that became another type since the scan is left alone.
constexpr std::string_view kPurge = R"lua(
if redis.pcall('GETRANGE', KEYS[1], 0, 66) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
)lua";

std::string Sha1Hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha1(),
                 nullptr) != 1) {
    std::abort();  // Only if OpenSSL cannot hash at all.
  }
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) {
    hex += kDigits[digest[i] >> 4];
    hex += kDigits[digest[i] & 0xF];
  }
  return hex;
}

// Built once, on first use (SHA-1 of each source).
const std::array<Script, 5>& Scripts() {
  static const std::array<Script, 5> kScripts = {
      Script{kReclaim, Sha1Hex(kReclaim)},
      Script{kComplete, Sha1Hex(kComplete)},
      Script{kRelease, Sha1Hex(kRelease)}, Script{kPurge, Sha1Hex(kPurge)},
      Script{kExtendLock, Sha1Hex(kExtendLock)}};
  return kScripts;
}

}  // namespace

const Script& ReclaimScript() { return Scripts()[0]; }
const Script& CompleteScript() { return Scripts()[1]; }
const Script& ReleaseScript() { return Scripts()[2]; }
const Script& PurgeScript() { return Scripts()[3]; }
const Script& ExtendLockScript() { return Scripts()[4]; }

}  // namespace idem::redis
