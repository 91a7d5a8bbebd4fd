// Helpers the store contract's test files share (store_contract*.cc): the
// files' link anchors, deterministic ids, fingerprints and tokens, the
// suite's durations, and readable descriptions for failures.

#ifndef IDEM_TESTING_SRC_STORE_CONTRACT_UTIL_H_
#define IDEM_TESTING_SRC_STORE_CONTRACT_UTIL_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "idem/clock.h"
#include "idem/record.h"
#include "idem/response.h"
#include "idem/store.h"
#include "idem/testing/status_matchers.h"
#include "idem/types.h"

namespace idem::testing::contract {

// One per file of the suite, each defined in its file and called by
// internal::StoreContractAnchor (store_contract.cc), which every
// IDEM_STORE_CONTRACT_TEST references: that keeps the linker from dropping
// any of the files (and so their TEST_Ps) out of the static library.
int ClaimContractAnchor();        // store_contract_claim.cc
int CompleteContractAnchor();     // store_contract_complete.cc
int RevokeContractAnchor();       // store_contract_revoke.cc
int PurgeContractAnchor();        // store_contract_purge.cc
int ArgumentsContractAnchor();    // store_contract_arguments.cc
int ConcurrencyContractAnchor();  // store_contract_concurrency.cc
int RandomContractAnchor();       // store_contract_random.cc
int RenewalContractAnchor();      // store_contract_renewal.cc
int CapabilityContractAnchor();   // store_contract_capabilities.cc
int TryClaimContractAnchor();     // store_contract_try_claim.cc
int AsyncContractAnchor();        // store_contract_async.cc

inline constexpr Duration kTtl = std::chrono::hours(24);
inline constexpr Duration kLock = std::chrono::seconds(60);
// For tests in which nothing may expire or time out.
inline constexpr Duration kForever = std::chrono::hours(24 * 365);

// The rounds of the suite's stress loops (many threads racing, round after
// round): `rounds` in a plain build, a quarter of them (at least 2) under
// AddressSanitizer or ThreadSanitizer (GCC's macros), where a round costs
// several times as much. The sanitizers report a bad access or an
// unsynchronized one from the first rounds that make it; the plain build
// (scripts/test.sh's main stage) keeps every round, for the rare
// interleavings.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int StressRounds(int rounds) { return std::max(2, rounds / 4); }
#else
constexpr int StressRounds(int rounds) { return rounds; }
#endif

inline std::uint64_t SplitMix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Deterministic, well-spread bytes, so that ids hash and shard like the
// SHA-256 outputs they stand for. `salt` keeps ids, fingerprints and tokens
// made from the same n apart.
template <typename Id>
Id MakeBytes(std::uint64_t n, std::uint64_t salt) {
  Id id;
  std::uint64_t state = n * 0x100000001B3ULL ^ salt;
  for (std::size_t i = 0; i < Id::kSize; i += 8) {
    const std::uint64_t word = SplitMix64(state);
    std::memcpy(id.bytes.data() + i, &word,
                std::min<std::size_t>(8, Id::kSize - i));
  }
  return id;
}

inline RecordId TestId(std::uint64_t n) { return MakeBytes<RecordId>(n, 0x1d); }
inline Fingerprint TestFp(std::uint64_t n) {
  return MakeBytes<Fingerprint>(n, 0xf9);
}
// A token no store has issued.
inline Token ForeignToken(std::uint64_t n) { return MakeBytes<Token>(n, 0x70); }

inline std::int64_t Ns(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             t.time_since_epoch())
      .count();
}

inline std::string Describe(const ClaimResult& r) {
  std::ostringstream os;
  os << ClaimOutcomeName(r.outcome);
  if (r.outcome == ClaimOutcome::kAcquired) {
    os << " token=" << r.token.ToHex() << " takeover=" << r.takeover;
  }
  if (r.outcome == ClaimOutcome::kAcquired ||
      r.outcome == ClaimOutcome::kInProgress) {
    os << " locked_until=" << Ns(r.locked_until);
  }
  return os.str();
}

inline std::string Describe(const Response& r) {
  std::ostringstream os;
  os << "{status=" << r.status << " headers=[";
  for (const auto& [name, value] : r.headers)
    os << name << ": " << value << "; ";
  os << "] body=" << r.body.size() << " bytes}";
  return os.str();
}

inline std::string Describe(const Record& r) {
  std::ostringstream os;
  os << "{" << RecordStateName(r.state) << " fp=" << r.fingerprint.ToHex()
     << " token=" << r.token.ToHex() << " locked_until=" << Ns(r.locked_until)
     << " expires_at=" << Ns(r.expires_at) << " response="
     << (r.response ? Describe(*r.response) : std::string("none")) << "}";
  return os.str();
}

// A response with what a byte-exact store must keep: header order, repeated
// and case-varied names, a value with spaces and quotes, and a body with NUL,
// high bytes and a trailing NUL.
inline Response RichResponse() {
  Response r;
  r.status = 201;
  r.headers = {{"Content-Type", "application/json; charset=utf-8"},
               {"Location", "/orders/42"},
               {"ETag", "\"v1, \\\"weak\\\"\""},
               {"content-language", "en"},
               {"Vary", "Accept"},
               {"vary", "Accept-Encoding"},
               {"X-Empty", ""}};
  r.body = std::string("{\"id\":42}\0\x01\x7f\x80\xfe\xff\r\n", 16);
  r.body.push_back('\0');
  return r;
}

inline void ExpectSameResponse(const std::shared_ptr<const Response>& got,
                               const Response& want) {
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->status, want.status);
  EXPECT_EQ(got->headers, want.headers);
  EXPECT_TRUE(got->body == want.body)
      << "body differs: got " << got->body.size() << " bytes, want "
      << want.body.size();
}

// The in-progress record a claim of `fp` that acquired at `now` with `token`
// wrote, with the suite's kTtl and kLock.
inline Record ClaimedRecord(const Fingerprint& fp, const Token& token,
                            TimePoint now) {
  return Record{.state = RecordState::kInProgress,
                .fingerprint = fp,
                .token = token,
                .locked_until = now + kLock,
                .expires_at = now + kTtl};
}

inline void ExpectSameRecord(const std::optional<Record>& got,
                             const Record& want) {
  ASSERT_TRUE(got.has_value()) << "want " << Describe(want);
  EXPECT_TRUE(*got == want)
      << "got  " << Describe(*got) << "\nwant " << Describe(want);
}

}  // namespace idem::testing::contract

// In a contract test (store() in scope): claims `id` with `fp` at `now`
// (kTtl, kLock) into a new ClaimResult `var`, and asserts that it acquired.
#define IDEM_CONTRACT_ACQUIRE(var, id, fp, now)                        \
  ASSERT_OK_AND_ASSIGN(ClaimResult var,                                \
                       store().Claim((id), (fp), (now), kTtl, kLock)); \
  ASSERT_EQ(var.outcome, ClaimOutcome::kAcquired) << Describe(var)

// In a contract test: IDEM_CONTRACT_ACQUIRE, then completes the record with
// `response` and asserts that it did.
#define IDEM_CONTRACT_COMPLETE(var, id, fp, now, response)                \
  IDEM_CONTRACT_ACQUIRE(var, id, fp, now);                                \
  {                                                                       \
    auto var##_completed = store().Complete((id), var.token, (response)); \
    ASSERT_TRUE(var##_completed.has_value())                              \
        << var##_completed.error().ToString();                            \
    ASSERT_TRUE(*var##_completed)                                         \
        << "the claim's own Complete returned false";                     \
  }                                                                       \
  static_assert(true)

#endif  // IDEM_TESTING_SRC_STORE_CONTRACT_UTIL_H_
