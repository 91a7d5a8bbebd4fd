#include "redis_scripts.h"

#include <openssl/evp.h>

#include <array>
#include <cstdlib>

namespace idem::redis {
namespace {

// A resent claim (the first attempt's reply was lost) finds its own token
// and answers as the first attempt did; a takeover keeps its flag in k for
// that. HSET must be the script's first write: Redis refuses a script's
// first write under -OOM, but not later ones (a DEL first would let a full
// server grow). The c of an earlier completed record may stay: only the
// call that wrote it compares it.
//
// A free key, the common case, costs an EXISTS instead of a seven-field
// HMGET (whose nils Lua turns into a table), and a new key needs no
// PERSIST.
constexpr std::string_view kClaim = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 's', '1', 'f', ARGV[1], 't', ARGV[2],
             'l', ARGV[4], 'e', ARGV[5], 'r', ARGV[6], 'k', '0')
  if ARGV[7] ~= '0' then redis.call('PEXPIRE', KEYS[1], ARGV[7]) end
  return {1, '0'}
end
local h = redis.call('HMGET', KEYS[1], 's', 'f', 't', 'l', 'e', 'r', 'k')
local now = tonumber(ARGV[3])
local takeover = '0'
if h[1] or h[2] or h[3] or h[4] or h[5] or h[6] or h[7] then
  if h[1] == '1' and h[3] == ARGV[2] then return {1, h[7] or '0'} end
  local l, e = tonumber(h[4]), tonumber(h[5])
  if (h[1] ~= '1' and h[1] ~= '2') or not l or not e or not h[2] then
    return {2}
  end
  if e > now then
    if h[1] == '1' and h[2] == ARGV[1] and l <= now then
      takeover = '1'
    else
      return {0, h[6], h[1], h[2], h[3], h[4], h[5]}
    end
  end
end
redis.call('HSET', KEYS[1], 's', '1', 'f', ARGV[1], 't', ARGV[2],
           'l', ARGV[4], 'e', ARGV[5], 'r', ARGV[6], 'k', takeover)
if ARGV[7] ~= '0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
else
  redis.call('PERSIST', KEYS[1])
end
return {1, takeover}
)lua";

// HSET keeps the key's TTL, so the completed record keeps expires_at. l is
// written with r: a renewal since the caller read the record (or claimed
// it) may have moved it, and the fields must agree with r.
constexpr std::string_view kComplete = R"lua(
local h = redis.call('HMGET', KEYS[1], 's', 't', 'c')
if h[2] ~= ARGV[1] then return 0 end
if h[1] == '1' then
  redis.call('HSET', KEYS[1], 's', '2', 'r', ARGV[2], 'c', ARGV[3],
             'l', ARGV[4])
  return 1
end
if h[1] == '2' and h[3] == ARGV[3] then return 1 end
return 0
)lua";

constexpr std::string_view kRelease = R"lua(
local h = redis.call('HMGET', KEYS[1], 's', 't')
if h[1] == '1' and h[2] == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
)lua";

// Expiry as the claim script judges it (e <= now: expired). HSET keeps the
// key's TTL.
constexpr std::string_view kExtendLock = R"lua(
local h = redis.call('HMGET', KEYS[1], 's', 't', 'l', 'e')
if h[1] ~= '1' or h[2] ~= ARGV[1] then return 0 end
local e = tonumber(h[4])
if not e or e <= tonumber(ARGV[2]) then return 0 end
if h[3] == ARGV[4] then return 1 end
if h[3] ~= ARGV[3] then return 2 end
redis.call('HSET', KEYS[1], 'l', ARGV[4], 'r', ARGV[5])
return 1
)lua";

// Keys of other types or with unreadable fields under the prefix are left
// alone.
constexpr std::string_view kPurge = R"lua(
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return 0 end
local e = tonumber(redis.call('HGET', KEYS[1], 'e'))
if e and e <= tonumber(ARGV[1]) then
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
      Script{kClaim, Sha1Hex(kClaim)}, Script{kComplete, Sha1Hex(kComplete)},
      Script{kRelease, Sha1Hex(kRelease)}, Script{kPurge, Sha1Hex(kPurge)},
      Script{kExtendLock, Sha1Hex(kExtendLock)}};
  return kScripts;
}

}  // namespace

const Script& ClaimScript() { return Scripts()[0]; }
const Script& CompleteScript() { return Scripts()[1]; }
const Script& ReleaseScript() { return Scripts()[2]; }
const Script& PurgeScript() { return Scripts()[3]; }
const Script& ExtendLockScript() { return Scripts()[4]; }

}  // namespace idem::redis
