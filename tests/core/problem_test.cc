// Problem bodies (RFC 9457) as SEMANTICS.md, "What a protected request gets",
// describes them.

#include "idem/problem.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace idem {
namespace {

TEST(ProblemTest, BodyHasEveryMember) {
  Problem p;
  p.status = 409;
  p.code = problem_code::kInProgress;
  p.detail = "retry later";
  p.instance = "/orders";
  p.retry_after = std::chrono::milliseconds(1500);
  const Response r = MakeProblemResponse(p);
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(r.FindHeader("Content-Type"), "application/problem+json");
  EXPECT_EQ(r.FindHeader("Retry-After"), "2");
  const auto body = nlohmann::json::parse(r.body);
  EXPECT_EQ(body["type"], "about:blank");
  EXPECT_EQ(body["title"], "Conflict");
  EXPECT_EQ(body["status"], 409);
  EXPECT_EQ(body["detail"], "retry later");
  EXPECT_EQ(body["instance"], "/orders");
  EXPECT_EQ(body["code"], "idempotency_request_in_progress");
}

TEST(ProblemTest, EmptyInstanceIsOmitted) {
  // A request the HTTP parser rejected has no path to name.
  Problem p;
  p.status = 400;
  p.code = problem_code::kKeyInvalid;
  p.detail = "bad request";
  const Response r = MakeProblemResponse(p);
  const auto body = nlohmann::json::parse(r.body);
  EXPECT_FALSE(body.contains("instance")) << r.body;
  EXPECT_EQ(body["status"], 400);
  EXPECT_FALSE(r.FindHeader("Retry-After").has_value());
}

}  // namespace
}  // namespace idem
