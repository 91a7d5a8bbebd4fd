// Tests of the binary record codec: round trips, the pinned version-1 bytes,
// and that every kind of damage decodes to kDataLoss instead of a record.

#include "idem/store/record_codec.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace idem {
namespace {

using std::chrono::nanoseconds;

TimePoint At(std::int64_t ns) {
  return TimePoint(std::chrono::duration_cast<Duration>(nanoseconds(ns)));
}

Record InProgress() {
  Record r;
  r.state = RecordState::kInProgress;
  for (std::size_t i = 0; i < 32; ++i) r.fingerprint.bytes[i] = 0x11;
  for (std::size_t i = 0; i < 16; ++i) r.token.bytes[i] = 0x22;
  r.locked_until = At(-5);
  r.expires_at = At(0);
  return r;
}

Record Completed(Response response) {
  Record r;
  r.state = RecordState::kCompleted;
  for (std::size_t i = 0; i < 32; ++i) {
    r.fingerprint.bytes[i] = static_cast<std::uint8_t>(i);
  }
  for (std::size_t i = 0; i < 16; ++i) {
    r.token.bytes[i] = static_cast<std::uint8_t>(0xA0 + i);
  }
  r.locked_until = At(1'700'000'000'123'456'789);
  r.expires_at = At(1'700'086'400'123'456'789);
  r.response = std::make_shared<const Response>(std::move(response));
  return r;
}

Response OrderResponse() {
  Response resp;
  resp.status = 201;
  resp.headers = {{"Content-Type", "application/json"},
                  {"Location", "/orders/1"}};
  resp.body = R"({"id":1})";
  return resp;
}

std::string FromHex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(
        std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// Bit-at-a-time CRC-32C, independent of the codec's table-driven one, used
// to build corrupt records whose checksum is nevertheless right, so that the
// structural checks themselves are exercised.
std::uint32_t SlowCrc32c(std::string_view data) {
  std::uint32_t crc = 0xFFFFFFFF;
  for (const char ch : data) {
    crc ^= static_cast<unsigned char>(ch);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78 : 0);
  }
  return ~crc;
}

// Replaces the trailing checksum with the right one for the new contents.
std::string Reseal(std::string payload_and_old_crc) {
  std::string payload =
      payload_and_old_crc.substr(0, payload_and_old_crc.size() - 4);
  const std::uint32_t crc = SlowCrc32c(payload);
  for (int i = 0; i < 4; ++i)
    payload.push_back(static_cast<char>(crc >> (8 * i)));
  return payload;
}

void PutLe(std::string& s, std::size_t offset, std::uint64_t v, int width) {
  for (int i = 0; i < width; ++i) {
    s[offset + static_cast<std::size_t>(i)] = static_cast<char>(v >> (8 * i));
  }
}

void ExpectDataLoss(std::string_view bytes, std::string_view message_part) {
  const auto got = DecodeRecord(bytes);
  ASSERT_FALSE(got.has_value()) << "decoded a damaged record";
  EXPECT_EQ(got.error().code(), ErrorCode::kDataLoss);
  EXPECT_NE(got.error().message().find("undecodable idempotency record"),
            std::string::npos)
      << got.error().message();
  EXPECT_NE(got.error().message().find(message_part), std::string::npos)
      << "message: " << got.error().message();
}

// ---- Known bytes ------------------------------------------------------------

TEST(RecordCodecTest, CrcMatchesTheStandardCheckValue) {
  EXPECT_EQ(SlowCrc32c("123456789"), 0xE3069283u);  // The CRC-32C check.
}

// Pins the version-1 layout: a change here breaks every stored record.
TEST(RecordCodecTest, Version1GoldenBytes) {
  const std::string golden = FromHex(
      "490102000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
      "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf15cd853dfe9c971715cdd4ce92eb9717c90002"
      "0000000c000000436f6e74656e742d54797065100000006170706c69636174696f6e2f"
      "6a736f6e080000004c6f636174696f6e090000002f6f72646572732f31080000000000"
      "00007b226964223a317d50c45ecf");
  const Record record = Completed(OrderResponse());
  EXPECT_EQ(EncodeRecord(record), golden);
  const auto decoded = DecodeRecord(golden);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().ToString();
  EXPECT_EQ(*decoded, record);
}

TEST(RecordCodecTest, InProgressGoldenBytes) {
  const std::string golden = FromHex(
      "4901011111111111111111111111111111111111111111111111111111111111111111"
      "22222222222222222222222222222222fbffffffffffffff00000000000000004613c1"
      "3b");
  EXPECT_EQ(golden.size(), 71u);
  EXPECT_EQ(EncodeRecord(InProgress()), golden);
  EXPECT_EQ(DecodeRecord(golden).value(), InProgress());
}

TEST(RecordCodecTest, EncodeCompletedIsTheHeldRecordWithTheResponse) {
  Record held = Completed(OrderResponse());
  held.state = RecordState::kInProgress;
  held.response.reset();
  const Response response = OrderResponse();
  Record want = held;
  want.state = RecordState::kCompleted;
  want.response = std::make_shared<const Response>(response);
  // Byte for byte what encoding the completed record gives, and `held` is
  // left as it was.
  EXPECT_EQ(EncodeCompleted(held, response), EncodeRecord(want));
  EXPECT_EQ(held.state, RecordState::kInProgress);
  EXPECT_EQ(held.response, nullptr);
  auto decoded = DecodeRecord(EncodeCompleted(held, response));
  ASSERT_TRUE(decoded.has_value()) << decoded.error().ToString();
  EXPECT_EQ(decoded->state, RecordState::kCompleted);
  EXPECT_EQ(decoded->token, held.token);
  EXPECT_EQ(decoded->locked_until, held.locked_until);
  EXPECT_EQ(decoded->expires_at, held.expires_at);
  ASSERT_NE(decoded->response, nullptr);
  EXPECT_EQ(decoded->response->body, response.body);
  EXPECT_EQ(decoded->response->headers, response.headers);
}

TEST(RecordCodecTest, PeekExpiresAtReadsTheFixedHeaderOnly) {
  const Record completed = Completed(OrderResponse());
  EXPECT_EQ(PeekExpiresAt(EncodeRecord(completed)), completed.expires_at);
  EXPECT_EQ(PeekExpiresAt(EncodeRecord(InProgress())), InProgress().expires_at);
  // It does not checksum: a damaged body still has a readable expiry.
  std::string damaged = EncodeRecord(completed);
  damaged.back() ^= 0x01;
  EXPECT_EQ(PeekExpiresAt(damaged), completed.expires_at);
  // Too short, or not of a known magic and version: nothing to read.
  const std::string in_progress = EncodeRecord(InProgress());
  EXPECT_EQ(PeekExpiresAt(in_progress.substr(0, 70)), std::nullopt);
  std::string other_version = in_progress;
  other_version[1] = 2;
  EXPECT_EQ(PeekExpiresAt(other_version), std::nullopt);
  std::string other_magic = in_progress;
  other_magic[0] = 'X';
  EXPECT_EQ(PeekExpiresAt(other_magic), std::nullopt);
  EXPECT_EQ(PeekExpiresAt(""), std::nullopt);
}

TEST(RecordCodecTest, UnixNanosRoundTrip) {
  for (std::int64_t ns : {std::int64_t{0}, std::int64_t{-5},
                          std::int64_t{1'700'000'000'123'456'789}}) {
    EXPECT_EQ(ToUnixNanos(FromUnixNanos(ns)), ns);
  }
  EXPECT_EQ(ToUnixNanos(At(42)), 42);
}

TEST(RecordTest, HeldByOnlyTheTokenOfAnInProgressRecord) {
  Record record = InProgress();
  EXPECT_TRUE(record.HeldBy(record.token));
  Token other = record.token;
  other.bytes[0] ^= 0x01;
  EXPECT_FALSE(record.HeldBy(other));
  record.state = RecordState::kCompleted;
  EXPECT_FALSE(record.HeldBy(record.token));
}

// ---- Round trips
// -------------------------------------------------------------

struct RoundTripCase {
  const char* name;
  Record record;
};

// Names the row in failure messages instead of dumping its bytes.
void PrintTo(const RoundTripCase& c, std::ostream* os) { *os << c.name; }

std::vector<RoundTripCase> RoundTripCases() {
  Response empty_body;
  empty_body.status = 204;
  Response binary;
  binary.status = 200;
  binary.headers = {{"", ""}, {"X-Nul", std::string("a\0b", 3)}};
  binary.body = std::string("\0\xff\x01\x80", 4);
  Response big;
  big.status = 200;
  big.headers = {{"Content-Type", "application/octet-stream"}};
  big.body.resize(1 << 20);
  for (std::size_t i = 0; i < big.body.size(); ++i) {
    big.body[i] = static_cast<char>(i * 2654435761u >> 24);
  }
  Response many_headers;
  many_headers.status = 999;
  for (int i = 0; i < 1000; ++i) {
    many_headers.headers.emplace_back("H" + std::to_string(i),
                                      std::string(i % 7, 'v'));
  }
  Response lowest;
  lowest.status = 100;

  Record extreme_times = InProgress();
  extreme_times.locked_until = At(INT64_MIN);
  extreme_times.expires_at = At(INT64_MAX);
  Record zero_ids = InProgress();
  zero_ids.fingerprint = {};
  zero_ids.token = {};

  return {
      {"in_progress", InProgress()},
      {"in_progress_extreme_times", extreme_times},
      {"in_progress_zero_ids", zero_ids},
      {"completed_with_headers", Completed(OrderResponse())},
      {"completed_no_headers_empty_body", Completed(empty_body)},
      {"completed_binary_and_empty_strings", Completed(binary)},
      {"completed_1mib_body", Completed(big)},
      {"completed_many_headers", Completed(many_headers)},
      {"completed_status_100", Completed(lowest)},
  };
}

class RecordRoundTripTest : public testing::TestWithParam<RoundTripCase> {};

TEST_P(RecordRoundTripTest, DecodesToTheSameRecord) {
  const Record& r = GetParam().record;
  const std::string bytes = EncodeRecord(r);
  const auto decoded = DecodeRecord(bytes);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().ToString();
  EXPECT_EQ(*decoded, r);
  EXPECT_EQ(decoded->state, r.state);
  EXPECT_EQ(decoded->response != nullptr, r.state == RecordState::kCompleted);
  EXPECT_EQ(EncodeRecord(*decoded), bytes);
}

INSTANTIATE_TEST_SUITE_P(Records, RecordRoundTripTest,
                         testing::ValuesIn(RoundTripCases()),
                         [](const auto& info) { return info.param.name; });

TEST(RecordCodecTest, InProgressResponseIsNotEncoded) {
  Record r = InProgress();
  r.response = std::make_shared<const Response>(OrderResponse());
  const std::string bytes = EncodeRecord(r);
  EXPECT_EQ(bytes, EncodeRecord(InProgress()));
  EXPECT_EQ(DecodeRecord(bytes)->response, nullptr);
}

TEST(RecordCodecTest, CompletedWithoutResponseEncodesAnEmpty200) {
  Record r = Completed(Response{});
  r.response = nullptr;
  const auto decoded = DecodeRecord(EncodeRecord(r));
  ASSERT_TRUE(decoded.has_value()) << decoded.error().ToString();
  ASSERT_NE(decoded->response, nullptr);
  EXPECT_EQ(*decoded->response, Response{});
  EXPECT_EQ(decoded->response->status, 200);
}

TEST(RecordCodecTest, NanosecondPrecisionSurvives) {
  Record r = InProgress();
  r.locked_until = At(1);
  r.expires_at = At(1'234'567'890'123'456'789);
  const auto decoded = DecodeRecord(EncodeRecord(r)).value();
  EXPECT_EQ(decoded.locked_until, r.locked_until);
  EXPECT_EQ(decoded.expires_at, r.expires_at);
}

// ---- Damage
// ------------------------------------------------------------------

// Offsets in a completed record (see record_codec.h).
constexpr std::size_t kStateOffset = 2;
constexpr std::size_t kStatusOffset = 67;
constexpr std::size_t kHeaderCountOffset = 69;
constexpr std::size_t kFirstNameLengthOffset = 73;

struct DamageCase {
  const char* name;
  std::string bytes;
  const char* message_part;
};

// Names the row in failure messages instead of dumping its bytes.
void PrintTo(const DamageCase& c, std::ostream* os) { *os << c.name; }

std::vector<DamageCase> DamageCases() {
  const std::string good = EncodeRecord(Completed(OrderResponse()));
  const std::string good_ip = EncodeRecord(InProgress());
  std::vector<DamageCase> cases;
  auto add = [&](const char* name, std::string bytes, const char* part) {
    cases.push_back({name, std::move(bytes), part});
  };

  add("empty", "", "truncated");
  add("one_byte", "I", "truncated");
  add("one_short_of_in_progress", good_ip.substr(0, 70), "truncated");
  {
    std::string b = good;
    b[0] = 'J';
    add("bad_magic", b, "magic");
  }
  {
    std::string b = good;
    b[1] = 2;
    add("future_version", Reseal(b), "version 2");
    b[1] = 0;
    add("version_zero", Reseal(b), "version 0");
  }
  for (const int state : {0, 3, 255}) {
    std::string b = good;
    b[kStateOffset] = static_cast<char>(state);
    cases.push_back({state == 0   ? "state_0"
                     : state == 3 ? "state_3"
                                  : "state_255",
                     Reseal(b), "unknown state"});
  }
  {
    std::string b = good;
    b[10] ^= 0x01;  // Inside the fingerprint.
    add("flipped_fingerprint_bit", b, "checksum");
  }
  {
    std::string b = good;
    b[b.size() - 1] ^= 0x80;
    add("flipped_checksum_bit", b, "checksum");
  }
  {
    std::string b = good;
    b[b.size() - 6] ^= 0x20;  // Inside the body.
    add("flipped_body_bit", b, "checksum");
  }
  {
    // A completed record's response section glued onto an in_progress one.
    std::string b = good;
    b[kStateOffset] = 1;
    add("in_progress_with_response", Reseal(b), "response section");
  }
  {
    std::string b = good_ip;
    b.insert(b.size() - 4, "x");
    add("in_progress_one_extra_byte", Reseal(b), "response section");
  }
  {
    std::string b = good;
    b.insert(b.size() - 4, "x");
    add("completed_trailing_byte", Reseal(b), "trailing");
  }
  {
    std::string b = good;
    b += "x";  // After the checksum: the checksum field moves.
    add("byte_after_checksum", b, "");
  }
  {
    // In_progress bytes labelled completed: no room for a response.
    std::string b = good_ip;
    b[kStateOffset] = 2;
    add("completed_without_response", Reseal(b), "truncated status");
  }
  for (const std::uint64_t status : {0, 99, 1000, 65535}) {
    std::string b = good;
    PutLe(b, kStatusOffset, status, 2);
    cases.push_back({status == 0      ? "status_0"
                     : status == 99   ? "status_99"
                     : status == 1000 ? "status_1000"
                                      : "status_65535",
                     Reseal(b), "outside 100..999"});
  }
  {
    std::string b = good;
    PutLe(b, kHeaderCountOffset, 0xFFFFFFFF, 4);
    add("absurd_header_count", Reseal(b), "header count");
    PutLe(b, kHeaderCountOffset, 9, 4);  // Passes the size check only.
    add("header_count_too_high", Reseal(b), "runs past the end");
    PutLe(b, kHeaderCountOffset, 1, 4);  // Second header read as the body.
    add("header_count_too_low", Reseal(b), "");
  }
  {
    std::string b = good;
    PutLe(b, kFirstNameLengthOffset, 0xFFFFFFFF, 4);
    add("name_length_past_end", Reseal(b), "header name runs past the end");
  }
  {
    std::string b = good;
    const std::size_t value_length_offset =
        kFirstNameLengthOffset + 4 + std::strlen("Content-Type");
    PutLe(b, value_length_offset, 0x7FFFFFFF, 4);
    add("value_length_past_end", Reseal(b), "header value runs past the end");
  }
  {
    std::string b = good;
    const std::size_t body_length_offset = b.size() - 4 - 8 - 8;
    PutLe(b, body_length_offset, 0xFFFFFFFFFFFFFFFF, 8);
    add("body_length_max_u64", Reseal(b), "body runs past the end");
    PutLe(b, body_length_offset, 9, 8);
    add("body_length_one_too_many", Reseal(b), "body runs past the end");
    PutLe(b, body_length_offset, 7, 8);
    add("body_length_one_too_few", Reseal(b), "trailing");
  }
  return cases;
}

class RecordDamageTest : public testing::TestWithParam<DamageCase> {};

TEST_P(RecordDamageTest, IsDataLoss) {
  ExpectDataLoss(GetParam().bytes, GetParam().message_part);
}

INSTANTIATE_TEST_SUITE_P(Damage, RecordDamageTest,
                         testing::ValuesIn(DamageCases()),
                         [](const auto& info) { return info.param.name; });

TEST(RecordCodecTest, EveryTruncationIsDataLoss) {
  for (const Record& r : {Completed(OrderResponse()), InProgress()}) {
    const std::string bytes = EncodeRecord(r);
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      SCOPED_TRACE("prefix of " + std::to_string(n) + " bytes");
      ExpectDataLoss(std::string_view(bytes).substr(0, n), "");
    }
    // Dropping any one byte from the front also shifts every field.
    for (std::size_t n = 1; n < bytes.size(); ++n) {
      SCOPED_TRACE("suffix from byte " + std::to_string(n));
      ExpectDataLoss(std::string_view(bytes).substr(n), "");
    }
  }
}

TEST(RecordCodecTest, EveryDeletedByteIsDataLoss) {
  const std::string bytes = EncodeRecord(Completed(OrderResponse()));
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    std::string b = bytes;
    b.erase(i, 1);
    SCOPED_TRACE("without byte " + std::to_string(i));
    ExpectDataLoss(b, "");
  }
}

TEST(RecordCodecTest, EverySingleBitFlipIsDataLoss) {
  const std::string bytes = EncodeRecord(Completed(OrderResponse()));
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string b = bytes;
      b[i] = static_cast<char>(b[i] ^ (1 << bit));
      SCOPED_TRACE("byte " + std::to_string(i) + " bit " + std::to_string(bit));
      ExpectDataLoss(b, "");
    }
  }
}

}  // namespace
}  // namespace idem

// DecodeRecordWithColumns: the check the SQL backends make on every row they
// read, a record blob against the columns stored beside it.
namespace idem {
namespace {

RecordColumns ColumnsOf(const Record& r) {
  return {.state = static_cast<std::int64_t>(r.state),
          .fingerprint = r.fingerprint.view(),
          .token = r.token.view(),
          .locked_until = ToUnixNanos(r.locked_until),
          .expires_at = ToUnixNanos(r.expires_at)};
}

RecordId SomeId() {
  RecordId id;
  id.bytes.fill(0xAB);
  return id;
}

void ExpectColumnsDataLoss(std::string_view bytes, const RecordColumns& columns,
                           std::string_view message_part) {
  const auto got = DecodeRecordWithColumns(SomeId(), bytes, columns);
  ASSERT_FALSE(got.has_value()) << "accepted a row that does not agree";
  EXPECT_EQ(got.error().code(), ErrorCode::kDataLoss);
  EXPECT_NE(got.error().message().find(SomeId().ToHex()), std::string::npos)
      << got.error().message();
  EXPECT_NE(got.error().message().find(message_part), std::string::npos)
      << got.error().message();
}

TEST(RecordColumnsTest, AgreeingRowDecodes) {
  for (const Record& r : {Completed(OrderResponse()), InProgress()}) {
    const std::string bytes = EncodeRecord(r);
    const auto got = DecodeRecordWithColumns(SomeId(), bytes, ColumnsOf(r));
    ASSERT_TRUE(got.has_value()) << got.error().message();
    EXPECT_EQ(*got, r);
  }
}

TEST(RecordColumnsTest, EachDisagreeingColumnIsDataLoss) {
  const Record r = InProgress();
  const std::string bytes = EncodeRecord(r);
  Token other_token;
  other_token.bytes.fill(0x33);
  Fingerprint other_fp;
  other_fp.bytes.fill(0x44);
  std::vector<std::pair<std::string, RecordColumns>> cases;
  RecordColumns c = ColumnsOf(r);
  c.state = static_cast<std::int64_t>(RecordState::kCompleted);
  cases.emplace_back("state", c);
  c = ColumnsOf(r);
  c.fingerprint = other_fp.view();
  cases.emplace_back("fingerprint", c);
  c = ColumnsOf(r);
  c.token = other_token.view();
  cases.emplace_back("token", c);
  c = ColumnsOf(r);
  c.locked_until += 1;
  cases.emplace_back("locked_until", c);
  c = ColumnsOf(r);
  c.expires_at -= 1;
  cases.emplace_back("expires_at", c);
  for (const auto& [name, columns] : cases) {
    SCOPED_TRACE(name);
    ExpectColumnsDataLoss(bytes, columns, "disagrees with its columns");
  }
}

TEST(RecordColumnsTest, UndecodableRecordIsDataLossNamingTheCause) {
  const Record r = InProgress();
  std::string bytes = EncodeRecord(r);
  bytes.back() = static_cast<char>(bytes.back() ^ 1);
  ExpectColumnsDataLoss(bytes, ColumnsOf(r), "does not decode");
  ExpectColumnsDataLoss(bytes, ColumnsOf(r), "checksum mismatch");
}

}  // namespace
}  // namespace idem
