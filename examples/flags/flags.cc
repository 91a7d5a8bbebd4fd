#include "flags.h"

#include <charconv>
#include <cstdint>
#include <system_error>

#include "idem/guard_options.h"
#include "idem/sweeper.h"

namespace idem::demo {
namespace {

std::string Count(const DurationFlag& flag, Duration d) {
  return std::to_string(d / flag.unit);
}

}  // namespace

Result<ListenAddress> ParseListenFlag(std::string_view text) {
  auto bad = [&] {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "--listen wants HOST:PORT, got '" + std::string(text) + "'");
  };
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return bad();
  ListenAddress address;
  std::string_view host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  address.host = std::string(host);
  const std::string_view port = text.substr(colon + 1);
  unsigned value = 0;
  const auto [end, ec] =
      std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() ||
      value > 65535) {
    return bad();
  }
  address.port = static_cast<std::uint16_t>(value);
  return address;
}

Status CheckThreadsFlag(int threads) {
  if (threads >= 1 && threads <= 1024) return {};
  return MakeError(ErrorCode::kInvalidArgument,
                   "--threads must be between 1 and 1024");
}

DurationFlag TtlFlag() {
  return {"--ttl", std::chrono::seconds(1), "seconds", false, false, kMaxTtl};
}

DurationFlag LockTimeoutFlag() {
  return {"--lock-timeout", std::chrono::seconds(1), "seconds", true, false,
          kMaxLockTimeout};
}

DurationFlag LockRenewalFlag() {
  return {"--lock-renewal", std::chrono::seconds(1), "seconds", true, true,
          kMaxLockTimeout};
}

Status LockRenewalBelowTimeout(Duration lock_renewal, Duration lock_timeout) {
  if (lock_renewal <= Duration::zero() || lock_renewal < lock_timeout) {
    return {};
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   "--lock-renewal must be below --lock-timeout (0 turns "
                   "renewal off)");
}

DurationFlag LockWaitFlag() {
  return {"--lock-wait",  std::chrono::milliseconds(1),
          "milliseconds", false,
          true,           kMaxLockWait};
}

DurationFlag SweepIntervalFlag() {
  return {"--sweep-interval", std::chrono::seconds(1), "seconds", false, true,
          kMaxSweepInterval};
}

Result<Duration> ParseDurationFlag(const DurationFlag& flag,
                                   std::string_view text) {
  auto bad = [&] {
    std::string range = flag.zero_allowed ? "0"
                        : flag.fractions  ? "more than 0"
                                          : "1";
    return MakeError(
        ErrorCode::kInvalidArgument,
        std::string(flag.name) + " wants a number of " +
            std::string(flag.unit_name) + " from " + range + " to " +
            Count(flag, flag.max) +
            (flag.fractions ? " (fractions allowed, e.g. 0.3)" : "") +
            ", got '" + std::string(text) + "'");
  };
  const std::size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  if (whole.empty() || (dot != std::string_view::npos && !flag.fractions) ||
      (dot != std::string_view::npos && fraction.empty()) ||
      fraction.size() > 9) {
    return bad();
  }
  // Whole units, refused as soon as they pass the maximum: nothing wraps.
  const std::int64_t max_units = flag.max / flag.unit;
  std::int64_t units = 0;
  for (char c : whole) {
    if (c < '0' || c > '9') return bad();
    units = units * 10 + (c - '0');
    if (units > max_units) return bad();
  }
  Duration value = units * flag.unit;
  std::int64_t scale = 1;
  std::int64_t digits = 0;
  for (char c : fraction) {
    if (c < '0' || c > '9') return bad();
    digits = digits * 10 + (c - '0');
    scale *= 10;
  }
  // unit (at most 1 s = 1e9 ns) times digits (< 1e9) fits in 64 bits.
  value += Duration(flag.unit.count() * digits / scale);
  if (value > flag.max) return bad();
  if (value <= Duration::zero() && !(flag.zero_allowed && value.count() == 0)) {
    return bad();
  }
  return value;
}

LockFlagsText::LockFlagsText() {
  const GuardOptions defaults;
  ttl = DurationFlagText(TtlFlag(), defaults.ttl);
  lock_timeout = DurationFlagText(LockTimeoutFlag(), defaults.lock_timeout);
  lock_renewal = DurationFlagText(LockRenewalFlag(), defaults.lock_renewal);
  lock_wait = DurationFlagText(LockWaitFlag(), defaults.lock_wait);
}

Result<LockFlags> ParseLockFlags(const LockFlagsText& text) {
  IDEM_ASSIGN_OR_RETURN(const Duration ttl,
                        ParseDurationFlag(TtlFlag(), text.ttl));
  IDEM_ASSIGN_OR_RETURN(
      const Duration lock_timeout,
      ParseDurationFlag(LockTimeoutFlag(), text.lock_timeout));
  IDEM_ASSIGN_OR_RETURN(
      const Duration lock_renewal,
      ParseDurationFlag(LockRenewalFlag(), text.lock_renewal));
  IDEM_RETURN_IF_ERROR(LockRenewalBelowTimeout(lock_renewal, lock_timeout));
  IDEM_ASSIGN_OR_RETURN(const Duration lock_wait,
                        ParseDurationFlag(LockWaitFlag(), text.lock_wait));
  // TtlFlag and LockWaitFlag take whole seconds and milliseconds: exact.
  return LockFlags{
      .ttl = std::chrono::duration_cast<std::chrono::seconds>(ttl),
      .lock_timeout = lock_timeout,
      .lock_renewal = lock_renewal,
      .lock_wait =
          std::chrono::duration_cast<std::chrono::milliseconds>(lock_wait)};
}

std::string DurationFlagText(const DurationFlag& flag, Duration value) {
  std::string text = Count(flag, value);
  const Duration rest = value % flag.unit;
  if (rest == Duration::zero()) return text;
  // Nine decimals of a unit of at most 1 s: rest * 1e9 / unit < 1e9 fits.
  std::string decimals =
      std::to_string(rest.count() * 1'000'000'000 / flag.unit.count());
  decimals.insert(0, 9 - decimals.size(), '0');
  decimals.erase(decimals.find_last_not_of('0') + 1);
  return text + "." + decimals;
}

Result<bool> ParseProtectionFlag(std::string_view text) {
  if (text == "on") return true;
  if (text == "off") return false;
  return MakeError(
      ErrorCode::kInvalidArgument,
      "--protection wants on or off, got '" + std::string(text) + "'");
}

}  // namespace idem::demo
