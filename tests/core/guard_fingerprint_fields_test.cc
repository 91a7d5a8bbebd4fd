// The Guard with fingerprint fields (GuardOptions::fingerprint_fields;
// SEMANTICS.md, "Fingerprint fields" and step 3b): only the named JSON
// members identify a request, and a body that is not JSON is a 400.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "baseline/sharded_mutex_store.h"
#include "idem/guard.h"
#include "idem/problem.h"
#include "idem/record_id.h"
#include "support/guard_client.h"

namespace idem {
namespace {

using ::testing::HasSubstr;

constexpr std::string_view kScope = "tenant-a";

class GuardFingerprintFieldsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_ = std::make_shared<ManualClock>();
    store_ = std::make_shared<bench::ShardedMutexStore>();
  }

  void Start(GuardOptions options) {
    GuardSetup setup;
    setup.store = store_;
    setup.options = std::move(options);
    setup.clock = clock_;
    auto guard = Guard::Create(std::move(setup));
    ASSERT_TRUE(guard.has_value()) << guard.error().ToString();
    guard_ = std::move(*guard);
  }

  // One request; the handler answers `answer` when it runs.
  Response Send(const std::string& key, const std::string& body,
                const Response& answer,
                std::shared_ptr<const GuardOptions> route = nullptr) {
    return idem::testing::PostOrder(*guard_, key, body, kScope, answer, runs_,
                                    std::move(route));
  }

  std::shared_ptr<ManualClock> clock_;
  std::shared_ptr<Store> store_;
  std::unique_ptr<Guard> guard_;
  int runs_ = 0;
};

std::shared_ptr<const GuardOptions> Fields(std::vector<std::string> fields) {
  GuardOptions o;
  o.fingerprint_fields = std::move(fields);
  auto route = Guard::MakeRouteOptions(std::move(o));
  EXPECT_TRUE(route.has_value()) << route.error().ToString();
  return route ? *route : nullptr;
}

TEST_F(GuardFingerprintFieldsTest, OnlyTheNamedMembersIdentifyTheRequest) {
  Start(GuardOptions{});
  const auto route = Fields({"/amount", "/customer/id", "/items/0/sku"});
  const Response ok{201, {}, "done"};
  Send("k", R"({"amount":10,"customer":{"id":"c1"},"items":[{"sku":"a"}],
               "sent_at":"10:00"})",
       ok, route);
  // Other members, member order and spacing differ: a replay.
  EXPECT_EQ(Send("k", R"({"sent_at":"10:05","items":[{"sku":"a","n":2}],
                         "customer":{"name":"x","id":"c1"},"amount":10.0})",
                 ok, route)
                .FindHeader("Idempotent-Replayed"),
            "true");
  EXPECT_EQ(runs_, 1);
  // A named member differs: the key was reused for another request.
  EXPECT_EQ(Send("k", R"({"amount":11,"customer":{"id":"c1"},
                         "items":[{"sku":"a"}]})",
                 ok, route)
                .status,
            422);
  EXPECT_EQ(Send("k", R"({"amount":10,"customer":{"id":"c1"},
                         "items":[{"sku":"b"}]})",
                 ok, route)
                .status,
            422);
  EXPECT_EQ(runs_, 1);
}

TEST_F(GuardFingerprintFieldsTest, AnAbsentMemberIsNotANullOne) {
  Start(GuardOptions{});
  const auto route = Fields({"/amount", "/note"});
  const Response ok{201, {}, "done"};
  Send("absent", R"({"amount":1})", ok, route);
  EXPECT_EQ(Send("absent", R"({"amount":1,"note":null})", ok, route).status,
            422);
  Send("null", R"({"amount":1,"note":null})", ok, route);
  EXPECT_EQ(Send("null", R"({"amount":1})", ok, route).status, 422);
  EXPECT_EQ(Send("null", R"({"note":null,"amount":1})", ok, route).status, 201);
  EXPECT_EQ(runs_, 2);
}

TEST_F(GuardFingerprintFieldsTest, EscapedPointersNameTheirMembers) {
  Start(GuardOptions{});
  const auto route = Fields({"/a~1b", "/m~0n"});
  const Response ok{201, {}, "done"};
  Send("k", R"({"a/b":1,"m~n":2,"a":{"b":9}})", ok, route);
  EXPECT_EQ(Send("k", R"({"a/b":1,"m~n":2,"a":{"b":8}})", ok, route).status,
            201);
  EXPECT_EQ(Send("k", R"({"a/b":1,"m~n":3})", ok, route).status, 422);
  EXPECT_EQ(runs_, 1);
}

TEST_F(GuardFingerprintFieldsTest, ABodyThatIsNotJsonIsA400) {
  Start(GuardOptions{});
  const auto route = Fields({"/amount"});
  const Response ok{201, {}, "done"};
  // Deeper than the canonical-JSON limit counts as not JSON too.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string& body : {std::string("amount=10&at=1"), std::string(),
                                  std::string("{\"amount\":"), deep}) {
    const Response r = Send("k", body, ok, route);
    EXPECT_EQ(r.status, 400) << body.substr(0, 20);
    EXPECT_EQ(r.FindHeader("Content-Type"), kProblemContentType);
    EXPECT_THAT(r.body, HasSubstr("\"code\":\"idempotency_body_not_json\""));
  }
  EXPECT_EQ(runs_, 0);
  EXPECT_EQ(guard_->metrics().Get(Outcome::kBodyNotJson), 4u);
  EXPECT_EQ(guard_->metrics().RequestLatencyCount(Outcome::kBodyNotJson), 4u);
  EXPECT_THAT(guard_->metrics().RenderPrometheus(),
              HasSubstr("idem_requests_total{outcome=\"body_not_json\"} 4\n"));
  // No store call: the key is still free for the request in JSON.
  auto record = store_->Inspect(MakeRecordId(kScope, "k"), clock_->Now());
  ASSERT_TRUE(record.has_value());
  EXPECT_FALSE(record->has_value());
  EXPECT_EQ(Send("k", R"({"amount":10})", ok, route).status, 201);
  EXPECT_EQ(runs_, 1);
  // A route without fingerprint_fields still hashes such a body raw, the
  // canonical-JSON one included.
  GuardOptions json;
  json.fingerprint_body = BodyFingerprint::kJson;
  const auto json_route = *Guard::MakeRouteOptions(json);
  EXPECT_EQ(Send("raw", "amount=10&at=1", ok, json_route).status, 201);
  EXPECT_EQ(Send("raw", "amount=10&at=1", ok, json_route)
                .FindHeader("Idempotent-Replayed"),
            "true");
  EXPECT_EQ(runs_, 2);
  // BeginWithKey (RunOnce) refuses a non-JSON input the same way.
  Decision d =
      guard_->BeginWithKey(kScope, "once", "charge", "amount=10", route);
  EXPECT_EQ(d.action, Action::kRespond);
  EXPECT_EQ(d.outcome, Outcome::kBodyNotJson);
  EXPECT_EQ(d.response.status, 400);
  EXPECT_EQ(guard_->metrics().Get(Outcome::kBodyNotJson), 5u);
}

TEST_F(GuardFingerprintFieldsTest, AMalformedPointerIsAnOptionsErrorNamingIt) {
  GuardOptions o;
  o.fingerprint_fields = {"/amount", "amount"};
  auto bad = Guard::MakeRouteOptions(o);
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(bad.error().message(),
              HasSubstr("fingerprint_fields[1] \"amount\" is not a JSON "
                        "pointer"));
  o.fingerprint_fields = {"/a~2"};
  EXPECT_FALSE(o.Validate().has_value());
  o.fingerprint_fields = {""};  // The whole document: a valid pointer.
  EXPECT_TRUE(o.Validate().has_value());
}

}  // namespace
}  // namespace idem
