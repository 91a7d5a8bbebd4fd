// The Lua scripts of the Redis store: every state change of a record, each
// on one key (KEYS[1]), so each is atomic on a server and on a cluster.
// The record's hash fields are described in redis_store.h; times are whole
// microseconds (Lua numbers are doubles: nanoseconds would compare wrongly).
//
// Thread-safety: immutable values.

#ifndef IDEM_BACKENDS_REDIS_SRC_REDIS_SCRIPTS_H_
#define IDEM_BACKENDS_REDIS_SRC_REDIS_SCRIPTS_H_

#include <string>
#include <string_view>

namespace idem::redis {

struct Script {
  std::string_view source;
  std::string sha1;  // Lowercase hex, for EVALSHA.
};

// ARGV: fingerprint, token, now, locked_until, expires_at, record, ttl in
// ms ("0": none). Writes a fresh in_progress record when the key is free,
// expired, or in progress with this fingerprint and its lock timed out.
// Returns {1, takeover "0"/"1"} when it wrote (or had already written this
// token: a resend), {0, r, s, f, t, l, e} with the record in the way, or
// {2} when the fields cannot be read (damaged).
const Script& ClaimScript();

// ARGV: token, completed record, call id, its l. Returns 1 when the record
// was in progress with the token and is now completed (or this call id
// completed it already: a resend), 0 otherwise.
const Script& CompleteScript();

// ARGV: token. Deletes the record if it is in progress with the token;
// returns 1 if it did.
const Script& ReleaseScript();

// ARGV: token, now, the l read, the new l, the renewed record. Writes l
// and r when the record is in progress with the token, not expired and
// still has the l read; returns 1 when it did (or l is already the new
// one: a resend), 2 when only l differs (read again), 0 otherwise. The
// key's TTL is unchanged.
const Script& ExtendLockScript();

// ARGV: now. Deletes the record if it expired by `now`; returns 1 if so.
const Script& PurgeScript();

}  // namespace idem::redis

#endif  // IDEM_BACKENDS_REDIS_SRC_REDIS_SCRIPTS_H_
