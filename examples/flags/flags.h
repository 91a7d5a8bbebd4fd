// Parsing of the demo servers' shared flags — --listen, the duration flags
// (--ttl, --lock-timeout, --lock-renewal, --lock-wait, --sweep-interval),
// --threads and --protection — apart from their main.cc (idem-demo's,
// idem-grpc-demo's) so that both parse them one way and it is unit-tested.
// command_line.h declares the lock flags on a program_options description.
//
// Every duration flag has a maximum, the same as GuardOptions'
// (guard_options.h), checked here so that the error names the flag instead of
// surfacing later as a store error, and so that no value wraps around
// (18446744074 s is not 0.29 s).
//
// Thread-safety: pure functions.

#ifndef IDEM_DEMO_FLAGS_H_
#define IDEM_DEMO_FLAGS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "idem/clock.h"
#include "idem/error.h"

namespace idem::demo {

// --listen HOST:PORT: the host (a bracketed IPv6 address loses its
// brackets) and the port, 0..65535 (0: the system picks one).
struct ListenAddress {
  std::string host;
  std::uint16_t port = 0;
};
// kInvalidArgument naming --listen and the value given when `text` is not
// HOST:PORT with a decimal port of at most 65535.
Result<ListenAddress> ParseListenFlag(std::string_view text);

// --threads N: 1 .. 1024. kInvalidArgument naming the flag otherwise.
Status CheckThreadsFlag(int threads);

struct DurationFlag {
  std::string_view name;       // "--ttl", for messages.
  Duration unit;               // One unit of the flag's value (1 s, 1 ms).
  std::string_view unit_name;  // "seconds".
  bool fractions = false;      // Accept "0.3" (up to 9 decimals).
  bool zero_allowed = false;
  Duration max;
};

// --ttl SECONDS: 1 .. 31536000 (365 days).
DurationFlag TtlFlag();
// --lock-timeout SECONDS, fractions allowed: > 0 .. 86400 (24 h).
DurationFlag LockTimeoutFlag();
// --lock-renewal SECONDS, fractions allowed: 0 (off) .. 86400 (24 h); main
// also refuses a value not below --lock-timeout (LockRenewalBelowTimeout).
DurationFlag LockRenewalFlag();
// --lock-wait MILLISECONDS: 0 .. 3600000 (1 h).
DurationFlag LockWaitFlag();
// --sweep-interval SECONDS: 0 (off) .. 86400 (24 h, kMaxSweepInterval).
DurationFlag SweepIntervalFlag();

// A plain decimal number ("60", "0.3"; no sign, exponent or spaces) of
// flag.unit, within the flag's range. kInvalidArgument otherwise, with a
// message naming the flag, its range and the value given.
Result<Duration> ParseDurationFlag(const DurationFlag& flag,
                                   std::string_view text);

// kInvalidArgument naming --lock-renewal when it is on (positive) and not
// below `lock_timeout` (a renewal that late lets a retry take a live handler
// over, GuardOptions::lock_renewal).
Status LockRenewalBelowTimeout(Duration lock_renewal, Duration lock_timeout);

// The four flags of a protected key's record and lock, as given: --ttl,
// --lock-timeout, --lock-renewal and --lock-wait. Strings, so that
// ParseLockFlags checks their ranges and no value wraps. Default: each
// GuardOptions default (guard_options.h), written in the flag's units.
struct LockFlagsText {
  LockFlagsText();
  std::string ttl;
  std::string lock_timeout;
  std::string lock_renewal;
  std::string lock_wait;
};

// The same, parsed.
struct LockFlags {
  std::chrono::seconds ttl{0};
  Duration lock_timeout{0};
  Duration lock_renewal{0};  // Zero: off.
  std::chrono::milliseconds lock_wait{0};
};

// Each flag within its range (ParseDurationFlag), then --lock-renewal below
// --lock-timeout (LockRenewalBelowTimeout); the first error, in that order.
Result<LockFlags> ParseLockFlags(const LockFlagsText& text);

// `value` in the flag's units, as ParseDurationFlag reads it back: "86400",
// "0.3". For defaults in help texts.
std::string DurationFlagText(const DurationFlag& flag, Duration value);

// --protection on|off: whether idem's switch starts on
// (GuardSetup::enabled). kInvalidArgument naming the flag, its choices and
// the value given for anything else.
Result<bool> ParseProtectionFlag(std::string_view text);

}  // namespace idem::demo

#endif  // IDEM_DEMO_FLAGS_H_
