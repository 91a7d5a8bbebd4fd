// The stored form of a response (stored_response.h) and the key ring with
// its key file (response_keys.h): what a store ends up holding, and every
// way a stored response fails to open.

#include "idem/stored_response.h"

#include <sys/stat.h>
#include <zstd.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "idem/record_id.h"
#include "idem/response_keys.h"
#include "idem/testing/status_matchers.h"
#include "support/temp_dir.h"

namespace idem {
namespace {

using testing::HasErrorCode;
using ::testing::HasSubstr;
using testing::IsOk;
using ::testing::Not;

constexpr std::string_view kMarker = "card-4111-1111-1111-1111";
const std::string kKey1Hex(64, 'a');
const std::string kKey2Hex = std::string(62, '0') + "2f";

std::shared_ptr<const ResponseKeyRing> Ring(std::string_view text) {
  auto ring = ResponseKeyRing::Parse(text);
  EXPECT_TRUE(ring.has_value()) << ring.error().ToString();
  return ring ? *ring : nullptr;
}

Fingerprint Fp(char c) {
  Fingerprint fp;
  fp.bytes.fill(static_cast<std::uint8_t>(c));
  return fp;
}

Response Secret() {
  return Response{
      201,
      {{"Content-Type", "application/json"}, {"Location", "/orders/7"}},
      "{\"card\":\"" + std::string(kMarker) + "\"}"};
}

std::string JsonOf(std::size_t size) {
  std::string body = "[";
  for (int i = 0; body.size() < size; ++i) {
    body += "{\"id\":" + std::to_string(i) + ",\"status\":\"shipped\"},";
  }
  body.back() = ']';
  return body;
}

class StoredResponseTest : public ::testing::Test {
 protected:
  const RecordId id_ = MakeRecordId("tenant", "key-1");
  const Fingerprint fp_ = Fp('f');
  std::shared_ptr<const ResponseKeyRing> ring_ =
      Ring("k1:" + kKey1Hex + "\nk2:" + kKey2Hex + "\n");

  Response Sealed(const Response& r) {
    StoredResponseSettings s;
    s.keys = ring_.get();
    auto sealed = EncodeStoredResponse(r, id_, fp_, s);
    EXPECT_TRUE(sealed.has_value());
    return sealed ? *sealed : Response{};
  }
};

TEST_F(StoredResponseTest, NothingToDoStoresTheResponseAsItIs) {
  auto stored = EncodeStoredResponse(Secret(), id_, fp_, {});
  ASSERT_THAT(stored, IsOk());
  EXPECT_EQ(*stored, Secret());
  auto decoded = DecodeStoredResponse(*stored, id_, fp_, nullptr, 1 << 20);
  ASSERT_THAT(decoded, IsOk());
  EXPECT_EQ(decoded->response, Secret());
  EXPECT_FALSE(decoded->times.has_value());
}

TEST_F(StoredResponseTest, ASealedResponseKeepsOnlyItsStatusInClear) {
  const Response sealed = Sealed(Secret());
  EXPECT_EQ(sealed.status, 201);
  ASSERT_EQ(sealed.headers.size(), 1u);
  EXPECT_EQ(sealed.headers[0].first, kStoredResponseHeader);
  EXPECT_EQ(sealed.headers[0].second, "v1; key=k1");
  EXPECT_THAT(sealed.body, Not(HasSubstr(kMarker)));
  EXPECT_THAT(sealed.body, Not(HasSubstr("/orders/7")));
  EXPECT_EQ(SealingKeyId(sealed), "k1");
  auto opened = DecodeStoredResponse(sealed, id_, fp_, ring_.get(), 1 << 20);
  ASSERT_THAT(opened, IsOk());
  EXPECT_EQ(opened->response, Secret());
}

TEST_F(StoredResponseTest, EverySealUsesAFreshNonce) {
  EXPECT_NE(Sealed(Secret()).body, Sealed(Secret()).body);
}

TEST_F(StoredResponseTest, ASealedResponseOpensOnlyForItsRecordAndRequest) {
  const Response sealed = Sealed(Secret());
  auto decode = [&](const Response& r, const RecordId& id,
                    const Fingerprint& fp) {
    return DecodeStoredResponse(r, id, fp, ring_.get(), 1 << 20);
  };
  EXPECT_THAT(decode(sealed, MakeRecordId("tenant", "key-2"), fp_),
              HasErrorCode(ErrorCode::kDataLoss));
  EXPECT_THAT(decode(sealed, id_, Fp('g')), HasErrorCode(ErrorCode::kDataLoss));
  Response other_status = sealed;
  other_status.status = 200;
  EXPECT_THAT(decode(other_status, id_, fp_),
              HasErrorCode(ErrorCode::kDataLoss));
  // The header is authenticated too: naming the other key of the ring
  // does not make the ring try it, and neither opens.
  Response other_key = sealed;
  other_key.headers[0].second = "v1; key=k2";
  EXPECT_THAT(decode(other_key, id_, fp_), HasErrorCode(ErrorCode::kDataLoss));
}

TEST_F(StoredResponseTest, EveryFlippedBitAndEveryTruncationIsDamage) {
  const Response sealed = Sealed(Secret());
  for (std::size_t i = 0; i < sealed.body.size(); ++i) {
    Response flipped = sealed;
    flipped.body[i] = static_cast<char>(flipped.body[i] ^ 0x01);
    EXPECT_THAT(DecodeStoredResponse(flipped, id_, fp_, ring_.get(), 1 << 20),
                HasErrorCode(ErrorCode::kDataLoss))
        << "byte " << i;
  }
  for (std::size_t n : {std::size_t{0}, std::size_t{11}, std::size_t{27},
                        sealed.body.size() - 1}) {
    Response cut = sealed;
    cut.body.resize(n);
    EXPECT_THAT(DecodeStoredResponse(cut, id_, fp_, ring_.get(), 1 << 20),
                HasErrorCode(ErrorCode::kDataLoss))
        << n << " bytes";
  }
}

TEST_F(StoredResponseTest, AnUnknownKeyIdIsDamageNamingTheIdNeverAKey) {
  const Response sealed = Sealed(Secret());
  auto only_k2 = Ring("k2:" + kKey2Hex);
  auto opened = DecodeStoredResponse(sealed, id_, fp_, only_k2.get(), 1 << 20);
  ASSERT_THAT(opened, HasErrorCode(ErrorCode::kDataLoss));
  EXPECT_THAT(opened.error().message(), HasSubstr("key id k1"));
  EXPECT_THAT(opened.error().message(), Not(HasSubstr(kKey1Hex)));
  EXPECT_THAT(opened.error().message(), Not(HasSubstr(kKey2Hex)));
  auto no_ring = DecodeStoredResponse(sealed, id_, fp_, nullptr, 1 << 20);
  ASSERT_THAT(no_ring, HasErrorCode(ErrorCode::kDataLoss));
  EXPECT_THAT(no_ring.error().message(), HasSubstr("no response keys"));
}

TEST_F(StoredResponseTest, ASameIdWithOtherBytesDoesNotOpen) {
  const Response sealed = Sealed(Secret());
  auto impostor = Ring("k1:" + kKey2Hex);
  EXPECT_THAT(DecodeStoredResponse(sealed, id_, fp_, impostor.get(), 1 << 20),
              HasErrorCode(ErrorCode::kDataLoss));
}

TEST_F(StoredResponseTest, LargeBodiesAreCompressedAndKeepTheirTimes) {
  Response big{200, {{"Content-Type", "application/json"}}, JsonOf(64 << 10)};
  StoredResponseSettings s;
  s.compress_above = 1024;
  const TimePoint t0{std::chrono::seconds(1'700'000'000)};
  s.times = StoredTimes{t0, t0 + std::chrono::seconds(2),
                        t0 + std::chrono::hours(24)};
  ASSERT_OK_AND_ASSIGN(Response stored, EncodeStoredResponse(big, id_, fp_, s));
  EXPECT_THAT(stored.headers[0].second, HasSubstr("; zstd"));
  EXPECT_LT(stored.body.size(), big.body.size() / 5);
  EXPECT_FALSE(SealingKeyId(stored).has_value());
  ASSERT_OK_AND_ASSIGN(
      auto decoded, DecodeStoredResponse(stored, id_, fp_, nullptr, 1 << 20));
  EXPECT_EQ(decoded.response, big);
  ASSERT_TRUE(decoded.times.has_value());
  EXPECT_EQ(decoded.times->created_at, t0);
  EXPECT_EQ(decoded.times->completed_at, t0 + std::chrono::seconds(2));
  EXPECT_EQ(decoded.times->expires_at, t0 + std::chrono::hours(24));
  // Compressed, then sealed: the ciphertext is the compressed size.
  s.keys = ring_.get();
  ASSERT_OK_AND_ASSIGN(Response sealed, EncodeStoredResponse(big, id_, fp_, s));
  EXPECT_THAT(sealed.headers[0].second, HasSubstr("; zstd; key=k1"));
  EXPECT_EQ(sealed.body.size(), stored.body.size() + 12 + 16);
  ASSERT_OK_AND_ASSIGN(auto opened, DecodeStoredResponse(sealed, id_, fp_,
                                                         ring_.get(), 1 << 20));
  EXPECT_EQ(opened.response, big);
}

TEST_F(StoredResponseTest, ABodyThatDoesNotShrinkIsStoredUncompressed) {
  std::string noise(4096, '\0');
  std::uint32_t x = 12345;
  for (char& c : noise) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  StoredResponseSettings s;
  s.compress_above = 1024;
  ASSERT_OK_AND_ASSIGN(Response stored,
                       EncodeStoredResponse({200, {}, noise}, id_, fp_, s));
  EXPECT_EQ(stored.headers[0].second, "v1");
  ASSERT_OK_AND_ASSIGN(
      auto decoded, DecodeStoredResponse(stored, id_, fp_, nullptr, 1 << 20));
  EXPECT_EQ(decoded.response.body, noise);
}

TEST_F(StoredResponseTest, AFrameClaimingMoreThanTheLimitIsRefused) {
  // 64 MiB of zeros compress to a few KiB: a bomb, refused before anything
  // is allocated because its frame states its size.
  const std::string zeros(64 << 20, '\0');
  std::string frame(ZSTD_compressBound(zeros.size()), '\0');
  frame.resize(
      ZSTD_compress(frame.data(), frame.size(), zeros.data(), zeros.size(), 1));
  ASSERT_LT(frame.size(), 64u << 10);
  const Response bomb{
      200, {{std::string(kStoredResponseHeader), "v1; zstd"}}, frame};
  auto decoded = DecodeStoredResponse(bomb, id_, fp_, nullptr, 1 << 20);
  ASSERT_THAT(decoded, HasErrorCode(ErrorCode::kDataLoss));
  EXPECT_THAT(decoded.error().message(), HasSubstr("states 67108864 bytes"));
}

TEST_F(StoredResponseTest, AMalformedEnvelopeIsDamage) {
  for (const char* value : {"", "v2", "v1; gzip", "v1;",
                            "v1; key=", "v1; times=1,2", "v1; times=a,b,c"}) {
    const Response r{200, {{std::string(kStoredResponseHeader), value}}, "x"};
    EXPECT_THAT(DecodeStoredResponse(r, id_, fp_, ring_.get(), 1 << 20),
                HasErrorCode(ErrorCode::kDataLoss))
        << '"' << value << '"';
  }
}

// --- The key ring and its file ---------------------------------------------

TEST(ResponseKeyRingTest, TheFirstKeySealsAndEveryKeyIsFound) {
  auto ring = Ring("# rotated 2026-12\n\n  k2:" + kKey2Hex +
                   "  \nk1:" + std::string(64, 'A') + "\n");
  ASSERT_NE(ring, nullptr);
  EXPECT_EQ(ring->sealing_key().id, "k2");
  EXPECT_EQ(ring->ids(), (std::vector<std::string>{"k2", "k1"}));
  ASSERT_NE(ring->Find("k1"), nullptr);
  EXPECT_EQ(ring->Find("k1")->bytes[0], 0xAA);
  EXPECT_EQ(ring->Find("k3"), nullptr);
}

TEST(ResponseKeyRingTest, AMalformedLineIsNamedByNumberWithoutItsKey) {
  const std::string secret = std::string(63, 'b');  // One digit short.
  for (const std::string& bad :
       {"k1:" + secret, "k1:" + secret + "g", "k 1:" + secret + "b",
        "k1" + secret + "b", ":" + secret + "b"}) {
    auto ring = ResponseKeyRing::Parse("k0:" + kKey1Hex + "\n\n" + bad + "\n");
    ASSERT_THAT(ring, HasErrorCode(ErrorCode::kInvalidArgument)) << bad;
    EXPECT_THAT(ring.error().message(), HasSubstr("line 3"));
    EXPECT_THAT(ring.error().message(), Not(HasSubstr(secret)));
    EXPECT_THAT(ring.error().message(), Not(HasSubstr(kKey1Hex)));
  }
  EXPECT_THAT(ResponseKeyRing::Parse("k1:" + kKey1Hex + "\nk1:" + kKey2Hex),
              HasErrorCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ResponseKeyRing::Parse("# nothing\n"),
              HasErrorCode(ErrorCode::kInvalidArgument));
}

TEST(ResponseKeyRingTest, AKeyFileOthersCanReadIsRefused) {
  testing::TempDir dir;
  const auto path = (dir.path() / "keys").string();
  std::ofstream(path) << "k1:" << kKey1Hex << "\n";
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  auto refused = ResponseKeyRing::LoadFile(path);
  ASSERT_THAT(refused, HasErrorCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(refused.error().message(), HasSubstr("mode 640"));
  EXPECT_THAT(refused.error().message(), HasSubstr("chmod 600"));
  ASSERT_EQ(::chmod(path.c_str(), 0604), 0);
  EXPECT_THAT(ResponseKeyRing::LoadFile(path),
              HasErrorCode(ErrorCode::kInvalidArgument));
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  ASSERT_OK_AND_ASSIGN(auto ring, ResponseKeyRing::LoadFile(path));
  EXPECT_EQ(ring->sealing_key().id, "k1");
  EXPECT_THAT(ResponseKeyRing::LoadFile((dir.path() / "none").string()),
              HasErrorCode(ErrorCode::kUnavailable));
  EXPECT_THAT(ResponseKeyRing::LoadFile(dir.path().string()),
              HasErrorCode(ErrorCode::kInvalidArgument));
}

}  // namespace
}  // namespace idem
