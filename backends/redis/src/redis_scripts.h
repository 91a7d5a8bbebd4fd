// The Lua scripts of the Redis store: the state changes that must compare
// before they write, each on one key (KEYS[1]), so each is atomic on a
// server and on a cluster. A claim of a free key is no script but one plain
// command (SET key value NX GET PX ttl: redis_store.cc says why).
//
// The value is the record codec's bytes (redis_record.h); the scripts read
// only its fixed header (GETRANGE key 0 66): the state at byte 2 and the
// token at bytes 35..50. They never compare times: C++ decides on the
// record it read, and a script writes only if the header is still the one
// that was read.
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

// A claim over a record that no longer blocks it (expired, or its lock
// timed out). ARGV: the header read, the new record, its TTL in ms ("0":
// none). Writes the record (with that TTL) when the header is still the
// one read; returns 1 when it did, or when the value already starts with
// the new record's header (a resend), 0 otherwise (read again).
const Script& ReclaimScript();

// ARGV: token, the completed record followed by the call id. Writes it,
// keeping the key's TTL, when the record is in progress with the token;
// returns 1 when it did (or this call id completed it already: a resend),
// 3 when there is no record at all (evicted or deleted), 0 otherwise.
const Script& CompleteScript();

// ARGV: token. Deletes the record if it is in progress with the token;
// returns 1 if it did.
const Script& ReleaseScript();

// ARGV: the header read, the renewed record. Writes it, keeping the key's
// TTL, when the header is still the one read; returns 1 when it did (or
// the value already starts with the renewed header: a resend), 2 when the
// record is still in progress with the token read but its header changed
// (another renewal: read again), 0 otherwise (the claim is lost).
const Script& ExtendLockScript();

// ARGV: the header read. Deletes the key when its header is still the one
// read (keys of other types are left alone); returns 1 if it did.
const Script& PurgeScript();

}  // namespace idem::redis

#endif  // IDEM_BACKENDS_REDIS_SRC_REDIS_SCRIPTS_H_
