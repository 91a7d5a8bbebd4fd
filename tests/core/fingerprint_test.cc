// Tests of SHA-256 helpers and request fingerprints.

#include "idem/fingerprint.h"

#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "idem/internal/sha256.h"

namespace idem {
namespace {

using HeaderList = std::vector<std::pair<std::string_view, std::string_view>>;

std::string Hex(const std::array<std::uint8_t, 32>& bytes) {
  Fingerprint f;
  f.bytes = bytes;
  return f.ToHex();
}

std::string U64Be(std::uint64_t n) {
  std::string out;
  for (int shift = 56; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((n >> shift) & 0xFF));
  }
  return out;
}

std::string Field(std::string_view f) {
  return U64Be(f.size()) + std::string(f);
}

// ---- Sha256 -----------------------------------------------------------------

TEST(Sha256Test, KnownVectors) {
  // FIPS 180-2 examples.
  EXPECT_EQ(Hex(Sha256("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Hex(Sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(
      Hex(Sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Hex(Sha256(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, ContextReuseDoesNotLeakState) {
  const std::string first = Hex(Sha256("abc"));
  (void)Sha256(std::string(5000, 'x'));
  EXPECT_EQ(Hex(Sha256("abc")), first);
}

// ---- FingerprintBuilder -----------------------------------------------------

TEST(FingerprintBuilderTest, EmptyMessage) {
  FingerprintBuilder b;
  EXPECT_EQ(Hex(b.Finish()), Hex(Sha256("")));
}

TEST(FingerprintBuilderTest, AddFieldIsBigEndianLengthThenBytes) {
  FingerprintBuilder b;
  b.AddField("abc");
  EXPECT_EQ(Hex(b.Finish()), Hex(Sha256(std::string("\0\0\0\0\0\0\0\x03"
                                                    "abc",
                                                    11))));
}

TEST(FingerprintBuilderTest, FinishStartsANewMessage) {
  FingerprintBuilder b;
  b.AddRaw("abc");
  const auto first = b.Finish();
  EXPECT_EQ(Hex(first), Hex(Sha256("abc")));
  b.AddRaw("abc");
  EXPECT_EQ(b.Finish(), first);
  EXPECT_EQ(Hex(b.Finish()), Hex(Sha256("")));
}

TEST(FingerprintBuilderTest, ResetDiscardsInput) {
  FingerprintBuilder b;
  b.AddRaw("garbage");
  b.AddRaw(std::string(1000, 'g'));  // Past the staging buffer too.
  b.Reset();
  b.AddRaw("abc");
  EXPECT_EQ(Hex(b.Finish()), Hex(Sha256("abc")));
}

// Small pieces are staged, large ones bypass the stage: any split of a
// message must hash like the message itself.
TEST(FingerprintBuilderTest, AnyChunkingHashesLikeTheWhole) {
  std::mt19937 rng(7);
  FingerprintBuilder b;
  for (int round = 0; round < 200; ++round) {
    std::string whole;
    const int pieces = static_cast<int>(rng() % 12);
    for (int p = 0; p < pieces; ++p) {
      // Sizes around the 256-byte stage and SHA's 64-byte block.
      static constexpr std::size_t kSizes[] = {0,   1,   7,    8,   63,  64,
                                               65,  200, 248,  255, 256, 257,
                                               511, 512, 1024, 3000};
      const std::size_t n = kSizes[rng() % std::size(kSizes)];
      std::string piece(n, '\0');
      for (char& c : piece) c = static_cast<char>(rng());
      if (rng() % 2) {
        b.AddField(piece);
        whole += Field(piece);
      } else {
        b.AddRaw(piece);
        whole += piece;
      }
    }
    ASSERT_EQ(Hex(b.Finish()), Hex(Sha256(whole))) << "round " << round;
  }
}

// ---- ComputeFingerprint -----------------------------------------------------

struct Request {
  std::string method = "POST";
  std::string target = "/orders?x=1";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body = R"({"a":1})";
  BodyFingerprint mode = BodyFingerprint::kRaw;
};

Fingerprint Fp(const Request& r) {
  HeaderList headers;
  for (const auto& [n, v] : r.headers) headers.emplace_back(n, v);
  FingerprintInput in;
  in.method = r.method;
  in.target = r.target;
  in.headers = headers;
  in.body = r.body;
  in.body_mode = r.mode;
  return ComputeFingerprint(in);
}

TEST(ComputeFingerprintTest, KnownVector) {
  Request r;
  r.headers = {{"Content-Type", "application/json"}};
  // Python: sha256(field(b"POST") + field(b"/orders?x=1") +
  //   field(b"content-type") + field(b"application/json") +
  //   field(b'{"a":1}')), field = 8-byte big-endian length + bytes.
  EXPECT_EQ(Fp(r).ToHex(),
            "f0f948ed6fd5d40f8e84d4b685aa429bbe47c3c0744625717638a48bf51a8373");
}

TEST(ComputeFingerprintTest, MatchesReferenceConstruction) {
  Request r;
  r.method = "PUT";
  r.target = std::string(400, '/');  // Longer than the staging buffer.
  r.headers = {{"X-Tenant", "t1"}, {"Accept", ""}};
  r.body = std::string(5000, 'b');
  const std::string message = Field("PUT") + Field(r.target) +
                              Field("x-tenant") + Field("t1") +
                              Field("accept") + Field("") + Field(r.body);
  EXPECT_EQ(Fp(r).ToHex(), Hex(Sha256(message)));
}

TEST(ComputeFingerprintTest, NoHeadersNoBody) {
  Request r;
  r.method = "DELETE";
  r.target = "/x";
  r.body = "";
  EXPECT_EQ(Fp(r).ToHex(),
            Hex(Sha256(Field("DELETE") + Field("/x") + Field(""))));
}

TEST(ComputeFingerprintTest, DefaultInputIsFourEmptyFields) {
  // Default string_views have no data pointer at all.
  const FingerprintInput in;
  EXPECT_EQ(ComputeFingerprint(in).ToHex(),
            Hex(Sha256(Field("") + Field("") + Field(""))));
  FingerprintBuilder b;
  b.AddRaw(std::string_view());
  b.AddField(std::string_view());
  EXPECT_EQ(Hex(b.Finish()), Hex(Sha256(U64Be(0))));
  EXPECT_EQ(Hex(Sha256(std::string_view())), Hex(Sha256("")));
}

TEST(ComputeFingerprintTest, ChangesWithEveryField) {
  Request base;
  base.headers = {{"X-A", "1"}, {"X-B", "2"}};
  const Fingerprint fp = Fp(base);
  EXPECT_EQ(Fp(base), fp) << "not deterministic";

  std::vector<std::pair<const char*, Request>> variants;
  auto add = [&](const char* name, auto mutate) {
    Request r = base;
    mutate(r);
    variants.emplace_back(name, r);
  };
  add("method", [](Request& r) { r.method = "PUT"; });
  add("method_case", [](Request& r) { r.method = "post"; });
  add("target_path", [](Request& r) { r.target = "/orders2?x=1"; });
  add("target_query", [](Request& r) { r.target = "/orders?x=2"; });
  add("target_encoding", [](Request& r) { r.target = "/orders?x=%31"; });
  add("body", [](Request& r) { r.body = R"({"a":2})"; });
  add("body_whitespace", [](Request& r) { r.body = R"({"a": 1})"; });
  add("body_empty", [](Request& r) { r.body = ""; });
  add("header_value", [](Request& r) { r.headers[0].second = "9"; });
  add("header_name", [](Request& r) { r.headers[0].first = "X-C"; });
  add("header_value_emptied", [](Request& r) { r.headers[1].second = ""; });
  add("header_dropped", [](Request& r) { r.headers.pop_back(); });
  add("header_added", [](Request& r) { r.headers.emplace_back("X-C", ""); });
  add("header_order",
      [](Request& r) { std::swap(r.headers[0], r.headers[1]); });
  add("header_value_whitespace",
      [](Request& r) { r.headers[0].second = " 1"; });
  // Boundaries between fields matter, not just their concatenation.
  add("method_target_boundary", [](Request& r) {
    r.method = "POST/";
    r.target = "orders?x=1";
  });
  add("target_body_boundary", [](Request& r) {
    r.target = "/orders?x=1{";
    r.body = R"("a":1})";
  });
  add("header_name_value_boundary", [](Request& r) {
    r.headers[0].first = "X-A1";
    r.headers[0].second = "";
  });

  std::vector<Fingerprint> seen = {fp};
  for (const auto& [name, r] : variants) {
    const Fingerprint got = Fp(r);
    for (const Fingerprint& other : seen) {
      EXPECT_NE(got, other) << name << " collides";
    }
    seen.push_back(got);
  }
}

TEST(ComputeFingerprintTest, ConfiguredHeadersChangeTheFingerprint) {
  Request none;
  Request with;
  with.headers = {{"Content-Type", "application/json"}};
  EXPECT_NE(Fp(none), Fp(with));
}

TEST(ComputeFingerprintTest, HeaderNamesAreCaseInsensitive) {
  Request a;
  a.headers = {{"Content-Type", "application/json"}};
  Request b;
  b.headers = {{"content-type", "application/json"}};
  Request c;
  c.headers = {{"CONTENT-TYPE", "application/json"}};
  EXPECT_EQ(Fp(a), Fp(b));
  EXPECT_EQ(Fp(a), Fp(c));
  // Values are not: "Application/JSON" is another value.
  Request d;
  d.headers = {{"Content-Type", "Application/JSON"}};
  EXPECT_NE(Fp(a), Fp(d));
}

TEST(ComputeFingerprintTest, LongHeaderNameIsLowercasedAcrossChunks) {
  Request upper;
  upper.headers = {{std::string(150, 'X'), "v"}};
  Request lower;
  lower.headers = {{std::string(150, 'x'), "v"}};
  EXPECT_EQ(Fp(upper), Fp(lower));
  EXPECT_EQ(Fp(lower).ToHex(), Hex(Sha256(Field("POST") + Field("/orders?x=1") +
                                          Field(std::string(150, 'x')) +
                                          Field("v") + Field(R"({"a":1})"))));
}

TEST(ComputeFingerprintTest, RepeatedHeaderLinesJoinWithCommaSpace) {
  Request lines;
  lines.headers = {{"Accept", "a"}, {"accept", "b"}, {"ACCEPT", "c"}};
  Request joined;
  joined.headers = {{"accept", "a, b, c"}};
  EXPECT_EQ(Fp(lines), Fp(joined));
  // Only adjacent lines join: a different header in between separates them.
  Request split;
  split.headers = {{"Accept", "a"}, {"X", "1"}, {"Accept", "b"}};
  Request split_joined;
  split_joined.headers = {{"Accept", "a, b"}, {"X", "1"}};
  EXPECT_NE(Fp(split), Fp(split_joined));
}

TEST(ComputeFingerprintTest, JsonModeIgnoresFormatting) {
  Request a;
  a.mode = BodyFingerprint::kJson;
  a.body = R"({"amount":100,"currency":"EUR","items":[1,2.50,"x"]})";
  Request b = a;
  b.body =
      "{\n  \"items\" : [ 1, 2.5, \"\\u0078\" ],\r\n\t\"currency\": \"EUR\","
      " \"amount\": 1e2 }";
  EXPECT_EQ(Fp(a), Fp(b));

  // Same bodies in raw mode differ.
  a.mode = b.mode = BodyFingerprint::kRaw;
  EXPECT_NE(Fp(a), Fp(b));
}

TEST(ComputeFingerprintTest, JsonModeStillSeesContentChanges) {
  Request a;
  a.mode = BodyFingerprint::kJson;
  a.body = R"({"amount":100})";
  Request b = a;
  b.body = R"({"amount":101})";
  EXPECT_NE(Fp(a), Fp(b));
  b.body = R"({"amount":"100"})";
  EXPECT_NE(Fp(a), Fp(b));
  b.body = R"([{"amount":100}])";
  EXPECT_NE(Fp(a), Fp(b));
}

TEST(ComputeFingerprintTest, JsonModeHashesTheCanonicalForm) {
  Request json;
  json.mode = BodyFingerprint::kJson;
  json.body = R"({ "b": 2, "a": 1 })";
  Request raw;
  raw.body = R"({"a":1,"b":2})";
  EXPECT_EQ(Fp(json), Fp(raw));
}

TEST(ComputeFingerprintTest, JsonModeFallsBackToRawForNonJson) {
  for (const char* body : {"not json", "{\"a\":", "a=1&b=2", "",
                           "{\"a\":1,\"a\":2}", "\xff\xfe"}) {
    Request json;
    json.mode = BodyFingerprint::kJson;
    json.body = body;
    Request raw = json;
    raw.mode = BodyFingerprint::kRaw;
    EXPECT_EQ(Fp(json), Fp(raw)) << body;
  }
}

TEST(ComputeFingerprintTest, SameAcrossThreads) {
  Request r;
  r.headers = {{"X-A", "1"}};
  r.body = std::string(3000, 'z');
  const Fingerprint expected = Fp(r);
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        if (Fp(r) != expected) ++mismatches[t];
        (void)Sha256(std::to_string(i));  // Shares the thread's context.
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

}  // namespace
}  // namespace idem
