// The Guard against SEMANTICS.md: one test per row of "What a protected
// request gets" and "What happens to the handler's response", over the
// baseline store (benchmarks/baseline/sharded_mutex_store.h) and a FaultyStore
// around it for the failure rows.

#include "idem/guard.h"

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "baseline/sharded_mutex_store.h"
#include "idem/problem.h"
#include "idem/record_id.h"
#include "support/faulty_store.h"
#include "support/log_capture.h"

namespace idem {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

struct Req {
  std::string method = "POST";
  std::string target = "/orders?src=test";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body = R"({"item":"book","qty":1})";
  std::optional<std::string> scope = "tenant-a";
  bool body_too_large = false;

  Req& Key(std::string k) {
    headers.emplace_back("Idempotency-Key", std::move(k));
    return *this;
  }
  Req& Header(std::string n, std::string v) {
    headers.emplace_back(std::move(n), std::move(v));
    return *this;
  }
};

// Owns a request and the views the Guard looks at.
struct View {
  Req req;
  std::vector<HeaderView> headers;
  RequestView view;
  explicit View(Req owned) : req(std::move(owned)) {
    const Req& r = req;
    for (const auto& [n, v] : r.headers) headers.emplace_back(n, v);
    view.method = r.method;
    view.target = r.target;
    view.headers = headers;
    view.body = r.body;
    view.body_too_large = r.body_too_large;
    if (r.scope) view.scope = *r.scope;
  }
};

Response Created(std::string body = R"({"id":"o-1"})") {
  Response r;
  r.status = 201;
  r.headers = {{"Content-Type", "application/json"},
               {"Location", "/orders/o-1"},
               {"ETag", "\"v1\""},
               {"Content-Language", "en"},
               {"Set-Cookie", "session=1"},
               {"X-Demo-Instance", "a"},
               {"Date", "Mon, 30 Nov 2026 05:00:00 GMT"},
               {"Content-Length", "12"}};
  r.body = std::move(body);
  return r;
}

class GuardTest : public ::testing::Test {
 protected:
  void SetUp() override { Rebuild(GuardOptions{}); }

  void Rebuild(GuardOptions options) {
    clock_ = std::make_shared<ManualClock>();
    inner_ = std::make_shared<bench::ShardedMutexStore>();
    store_ = std::make_shared<testing::FaultyStore>(inner_);
    logs_.clear();
    GuardSetup setup;
    setup.store = store_;
    setup.options = std::move(options);
    setup.clock = clock_;
    setup.log = testing::CaptureLogs(logs_);
    auto guard = Guard::Create(std::move(setup));
    ASSERT_TRUE(guard.has_value()) << guard.error().ToString();
    guard_ = std::move(*guard);
  }

  // Sends `req` through Guard::Run with a handler that counts its runs and
  // answers `handler_response_` (or throws when throw_ is set).
  Response Send(const Req& req,
                std::shared_ptr<const GuardOptions> route = nullptr) {
    View v(req);
    return guard_->Run(
        v.view,
        [&] {
          ++runs_;
          if (throw_) throw std::runtime_error("handler failed");
          return handler_response_;
        },
        std::move(route));
  }

  std::uint64_t Count(Outcome o) const { return guard_->metrics().Get(o); }

  // Sum of the step outcomes: must equal the number of protected requests.
  std::uint64_t StepTotal() const {
    std::uint64_t total = 0;
    for (int i = 0; i <= static_cast<int>(kLastStepOutcome); ++i) {
      total += guard_->metrics().Get(static_cast<Outcome>(i));
    }
    return total;
  }

  // The sum of every sample of `family` in Prometheus text, as a query's
  // sum(family) would give it.
  static std::uint64_t SumOfFamily(const std::string& text,
                                   const std::string& family) {
    std::uint64_t sum = 0;
    std::size_t at = 0;
    while (at < text.size()) {
      const std::size_t end = text.find('\n', at);
      const std::string line = text.substr(at, end - at);
      at = end == std::string::npos ? text.size() : end + 1;
      if (line.rfind(family, 0) != 0) continue;
      const char next = line.size() > family.size() ? line[family.size()] : 0;
      if (next != '{' && next != ' ') continue;
      sum += std::stoull(line.substr(line.rfind(' ') + 1));
    }
    return sum;
  }

  static nlohmann::json Body(const Response& r) {
    return nlohmann::json::parse(r.body);
  }

  void ExpectProblem(const Response& r, int status, std::string_view code) {
    EXPECT_EQ(r.status, status);
    EXPECT_EQ(r.FindHeader("Content-Type"), "application/problem+json");
    const auto body = Body(r);
    EXPECT_EQ(body["type"], "about:blank");
    EXPECT_EQ(body["title"], std::string(StatusPhrase(status)));
    EXPECT_EQ(body["status"], status);
    EXPECT_EQ(body["code"], std::string(code));
    EXPECT_EQ(body["instance"], "/orders");
    EXPECT_FALSE(body["detail"].get<std::string>().empty());
    // Never the key, the scope or the body.
    EXPECT_THAT(r.body, Not(HasSubstr("secret-key")));
    EXPECT_THAT(r.body, Not(HasSubstr("tenant-a")));
    EXPECT_THAT(r.body, Not(HasSubstr("book")));
  }

  std::shared_ptr<ManualClock> clock_;
  std::shared_ptr<Store> inner_;
  std::shared_ptr<testing::FaultyStore> store_;
  // Before guard_: the guard's destructor logs pending repeat counts.
  std::vector<std::string> logs_;
  std::unique_ptr<Guard> guard_;
  Response handler_response_ = Created();
  int runs_ = 0;
  bool throw_ = false;
};

// --- Steps ------------------------------------------------------------------

TEST_F(GuardTest, Step1MissingKeyOnRequiredRouteIs400) {
  const Response r = Send(Req{});
  ExpectProblem(r, 400, problem_code::kKeyMissing);
  EXPECT_EQ(runs_, 0);
  EXPECT_EQ(Count(Outcome::kKeyMissing), 1u);
  EXPECT_EQ(store_->claims, 0);
}

TEST_F(GuardTest, Step1bMissingKeyOnOptionalRoutePassesThrough) {
  GuardOptions o;
  o.key_required = false;
  auto route = std::make_shared<const GuardOptions>(o);
  EXPECT_EQ(Send(Req{}, route).status, 201);
  EXPECT_EQ(Send(Req{}, route).status, 201);
  EXPECT_EQ(runs_, 2);
  EXPECT_EQ(Count(Outcome::kUnprotected), 2u);
  EXPECT_EQ(store_->claims, 0);
}

struct InvalidKeyCase {
  const char* name;
  std::vector<std::string> values;
};

class GuardInvalidKeyTest
    : public GuardTest,
      public ::testing::WithParamInterface<InvalidKeyCase> {};

TEST_P(GuardInvalidKeyTest, Step2InvalidKeyIs400) {
  Req req;
  for (const auto& v : GetParam().values) req.Key(v);
  ExpectProblem(Send(req), 400, problem_code::kKeyInvalid);
  EXPECT_EQ(runs_, 0);
  EXPECT_EQ(Count(Outcome::kKeyInvalid), 1u);
  EXPECT_EQ(store_->claims, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Rules, GuardInvalidKeyTest,
    ::testing::Values(InvalidKeyCase{"Empty", {""}},
                      InvalidKeyCase{"EmptyQuoted", {"\"\""}},
                      InvalidKeyCase{"TooLong", {std::string(256, 'k')}},
                      InvalidKeyCase{"ControlByte", {"secret-key\x01"}},
                      InvalidKeyCase{"NonAscii", {"secret-k\xC3\xA9y"}},
                      InvalidKeyCase{"Unterminated", {"\"secret-key"}},
                      InvalidKeyCase{"BadEscape", {"\"secret\\n-key\""}},
                      InvalidKeyCase{"GivenTwice",
                                     {"secret-key", "secret-key"}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(GuardTest, Step2LongestAllowedKeyIsAccepted) {
  EXPECT_EQ(Send(Req{}.Key(std::string(255, 'k'))).status, 201);
  EXPECT_EQ(runs_, 1);
}

TEST_F(GuardTest, QuotedAndBareFormsAreTheSameKey) {
  EXPECT_EQ(Send(Req{}.Key("\"secret-key\"")).status, 201);
  const Response replay = Send(Req{}.Key("secret-key"));
  EXPECT_EQ(replay.FindHeader("Idempotent-Replayed"), "true");
  EXPECT_EQ(runs_, 1);
}

// A quoted key is its unescaped bytes: `"a\\b\"c"` names the record of
// a\b"c, and `"kq"` that of kq, the same as the bare key.
TEST_F(GuardTest, AQuotedKeyIsItsUnescapedBytes) {
  EXPECT_EQ(Send(Req{}.Key(R"("a\\b\"c")")).status, 201);
  EXPECT_EQ(Send(Req{}.Key(R"("a\\b\"c")")).FindHeader("Idempotent-Replayed"),
            "true");
  EXPECT_EQ(Send(Req{}.Key(R"("kq")")).status, 201);
  EXPECT_EQ(Send(Req{}.Key("kq")).FindHeader("Idempotent-Replayed"), "true");
  EXPECT_EQ(runs_, 2);
  for (const std::string_view key : {R"(a\b"c)", "kq"}) {
    auto record = inner_->Inspect(MakeRecordId("tenant-a", key), clock_->Now());
    ASSERT_TRUE(record.has_value());
    EXPECT_TRUE(record->has_value()) << key;
  }
}

TEST_F(GuardTest, Step3OversizeBodyIs413) {
  GuardOptions o;
  o.max_request_body = 8;
  Rebuild(o);
  ExpectProblem(Send(Req{}.Key("secret-key")), 413,
                problem_code::kRequestTooLarge);
  Req flagged;
  flagged.Key("secret-key").body = "";
  flagged.body_too_large = true;  // The adapter stopped reading.
  ExpectProblem(Send(flagged), 413, problem_code::kRequestTooLarge);
  EXPECT_EQ(runs_, 0);
  EXPECT_EQ(Count(Outcome::kTooLarge), 2u);
  EXPECT_EQ(store_->claims, 0);
}

TEST_F(GuardTest, Step3OversizeBodyBypassRunsUnprotected) {
  GuardOptions o;
  o.max_request_body = 8;
  o.oversize_request = OversizePolicy::kBypass;
  Rebuild(o);
  EXPECT_EQ(Send(Req{}.Key("secret-key")).status, 201);
  EXPECT_EQ(Send(Req{}.Key("secret-key")).status, 201);
  EXPECT_EQ(runs_, 2);
  EXPECT_EQ(Count(Outcome::kTooLarge), 2u);
}

TEST_F(GuardTest, Step4SameKeyOtherRequestIs422) {
  Send(Req{}.Key("secret-key"));
  Req other;
  other.Key("secret-key").body = R"({"item":"pen"})";
  const Response r = Send(other);
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(Body(r)["code"], "idempotency_key_reused");
  Req other_target;
  other_target.Key("secret-key").target = "/orders?src=other";
  EXPECT_EQ(Send(other_target).status, 422);
  EXPECT_EQ(runs_, 1);
  EXPECT_EQ(Count(Outcome::kMismatch), 2u);
}

TEST_F(GuardTest, Step4MismatchWinsOverInProgress) {
  View first(Req{}.Key("secret-key"));
  Decision held = guard_->Begin(first.view);
  ASSERT_EQ(held.action, Action::kExecute);
  Req other;
  other.Key("secret-key").body = "different";
  EXPECT_EQ(Send(other).status, 422);
}

TEST_F(GuardTest, Step5InProgressIs409WithRetryAfter) {
  View first(Req{}.Key("secret-key"));
  Decision held = guard_->Begin(first.view);
  ASSERT_EQ(held.action, Action::kExecute);
  const Response r = Send(Req{}.Key("secret-key"));
  ExpectProblem(r, 409, problem_code::kInProgress);
  EXPECT_EQ(r.FindHeader("Retry-After"), "1");
  EXPECT_EQ(runs_, 0);
  EXPECT_EQ(Count(Outcome::kConflict), 1u);
}

TEST_F(GuardTest, Step5RetryAfterZeroOmitsHeader) {
  GuardOptions o;
  o.retry_after = Duration::zero();
  Rebuild(o);
  View first(Req{}.Key("secret-key"));
  Decision held = guard_->Begin(first.view);
  const Response r = Send(Req{}.Key("secret-key"));
  EXPECT_EQ(r.status, 409);
  EXPECT_FALSE(r.FindHeader("Retry-After").has_value());
}

TEST_F(GuardTest, Step5LockWaitReplaysWhenTheFirstRequestCompletes) {
  GuardOptions o;
  o.lock_wait = seconds(2);
  Rebuild(o);
  View first(Req{}.Key("secret-key"));
  Decision held = guard_->Begin(first.view);
  ASSERT_EQ(held.action, Action::kExecute);
  int sleeps = 0;
  // The first request finishes while the second one waits.
  clock_->SetSleepHook([&](Duration) {
    if (++sleeps == 3) held.claim.Finish(Created());
  });
  const Response r = Send(Req{}.Key("secret-key"));
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.FindHeader("Idempotent-Replayed"), "true");
  EXPECT_EQ(sleeps, 3);
  EXPECT_EQ(runs_, 0);
  EXPECT_EQ(Count(Outcome::kReplayed), 1u);
  EXPECT_EQ(Count(Outcome::kConflict), 0u);
}

TEST_F(GuardTest, Step5LockWaitEndsIn409AfterTheWait) {
  GuardOptions o;
  o.lock_wait = seconds(2);
  Rebuild(o);
  View first(Req{}.Key("secret-key"));
  Decision held = guard_->Begin(first.view);
  const TimePoint start = clock_->Now();
  int sleeps = 0;
  clock_->SetSleepHook([&](Duration d) {
    ++sleeps;
    EXPECT_GT(d, Duration::zero());
    EXPECT_LE(d, milliseconds(250));
  });
  const Response r = Send(Req{}.Key("secret-key"));
  // The instance outlived the Begin call that viewed it, kept with the wait.
  ExpectProblem(r, 409, problem_code::kInProgress);
  EXPECT_EQ(clock_->Now() - start, seconds(2));  // Waited exactly lock_wait.
  EXPECT_GT(sleeps, 3);                          // Backed off in steps...
  EXPECT_LT(sleeps, 40);                         // ...not a busy poll.
  EXPECT_EQ(Count(Outcome::kConflict), 1u);
}

TEST_F(GuardTest, Step6CompletedIsReplayedWithStoredHeadersOnly) {
  const Response first = Send(Req{}.Key("secret-key"));
  EXPECT_EQ(first, Created());  // The first answer is the handler's own.
  const Response replay = Send(Req{}.Key("secret-key"));
  EXPECT_EQ(runs_, 1);
  EXPECT_EQ(replay.status, 201);
  EXPECT_EQ(replay.body, first.body);
  EXPECT_EQ(replay.FindHeader("Content-Type"), "application/json");
  EXPECT_EQ(replay.FindHeader("Location"), "/orders/o-1");
  EXPECT_EQ(replay.FindHeader("ETag"), "\"v1\"");
  EXPECT_EQ(replay.FindHeader("Content-Language"), "en");
  EXPECT_EQ(replay.FindHeader("Idempotent-Replayed"), "true");
  for (const char* never :
       {"Set-Cookie", "X-Demo-Instance", "Date", "Content-Length"}) {
    EXPECT_FALSE(replay.FindHeader(never).has_value()) << never;
  }
  EXPECT_EQ(Count(Outcome::kExecuted), 1u);
  EXPECT_EQ(Count(Outcome::kReplayed), 1u);
}

TEST_F(GuardTest, Step6StoredHeadersAreConfigurable) {
  GuardOptions o;
  o.stored_headers = {"x-demo-instance"};
  o.replay_header_name = "X-Replayed";
  o.replay_header_value = "yes";
  Rebuild(o);
  Send(Req{}.Key("secret-key"));
  const Response replay = Send(Req{}.Key("secret-key"));
  EXPECT_EQ(replay.FindHeader("X-Demo-Instance"), "a");
  EXPECT_FALSE(replay.FindHeader("Content-Type").has_value());
  EXPECT_EQ(replay.FindHeader("X-Replayed"), "yes");
}

TEST_F(GuardTest, Step7AcquiredRunsTheHandlerOnce) {
  EXPECT_EQ(Send(Req{}.Key("secret-key")).status, 201);
  EXPECT_EQ(runs_, 1);
  EXPECT_EQ(Count(Outcome::kExecuted), 1u);
  auto record =
      inner_->Inspect(MakeRecordId("tenant-a", "secret-key"), clock_->Now());
  ASSERT_TRUE(record.has_value());
  ASSERT_TRUE(record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kCompleted);
  EXPECT_EQ((*record)->expires_at, clock_->Now() + hours(24));
}

TEST_F(GuardTest, Step8StoreErrorFailClosedIs503) {
  store_->fail_claim = ErrorCode::kUnavailable;
  const Response r = Send(Req{}.Key("secret-key"));
  ExpectProblem(r, 503, problem_code::kStoreUnavailable);
  EXPECT_EQ(r.FindHeader("Retry-After"), "1");
  EXPECT_EQ(runs_, 0);
  EXPECT_EQ(Count(Outcome::kStoreError), 1u);
  ASSERT_FALSE(logs_.empty());
  EXPECT_THAT(logs_.back(), HasSubstr("error: "));
}

TEST_F(GuardTest, Step8cCorruptRecordIsAnErrorNotAMiss) {
  store_->fail_claim = ErrorCode::kDataLoss;
  ExpectProblem(Send(Req{}.Key("secret-key")), 500,
                problem_code::kRecordDamaged);
  EXPECT_EQ(runs_, 0);
  EXPECT_EQ(Count(Outcome::kRecordDamaged), 1u);
  EXPECT_EQ(Count(Outcome::kStoreError), 0u);
  EXPECT_THAT(guard_->metrics().RenderPrometheus(),
              HasSubstr("idem_requests_total{outcome=\"record_damaged\"} 1\n"));
}

TEST_F(GuardTest, Step8StoreErrorFailOpenRunsUnprotectedAndBacksOff) {
  GuardOptions o;
  o.on_store_error = StoreErrorPolicy::kFailOpen;
  o.store_backoff = seconds(10);
  Rebuild(o);
  store_->fail_claim = ErrorCode::kUnavailable;
  EXPECT_EQ(Send(Req{}.Key("secret-key")).status, 201);
  EXPECT_EQ(store_->claims, 1);
  store_->fail_claim = std::nullopt;
  // Within the backoff the store is not asked at all.
  clock_->Advance(seconds(9));
  EXPECT_EQ(Send(Req{}.Key("secret-key")).status, 201);
  EXPECT_EQ(store_->claims, 1);
  EXPECT_EQ(Count(Outcome::kFailOpen), 2u);
  // After it, requests are protected again.
  clock_->Advance(seconds(1));
  Send(Req{}.Key("secret-key"));
  EXPECT_EQ(Send(Req{}.Key("secret-key")).FindHeader("Idempotent-Replayed"),
            "true");
  EXPECT_EQ(store_->claims, 3);
  EXPECT_EQ(runs_, 3);
}

// A store says it is full with kResourceExhausted (the memory store's
// capacity; its own tests show that expired records make room again).
TEST_F(GuardTest, Step8bFullStoreIs503StoreFull) {
  EXPECT_EQ(Send(Req{}.Key("key-1")).status, 201);
  store_->fail_claim = ErrorCode::kResourceExhausted;
  const Response r = Send(Req{}.Key("key-2"));
  ExpectProblem(r, 503, problem_code::kStoreFull);
  EXPECT_TRUE(r.FindHeader("Retry-After").has_value());
  EXPECT_EQ(runs_, 1);
  EXPECT_EQ(Count(Outcome::kStoreFull), 1u);
  EXPECT_THAT(logs_, ::testing::Contains(HasSubstr("store full")));
  // Not an outage: no back-off, the next claim goes to the store.
  store_->fail_claim = std::nullopt;
  EXPECT_EQ(Send(Req{}.Key("key-2")).status, 201);
  EXPECT_EQ(runs_, 2);
}

// --- The handler's response -------------------------------------------------

class GuardStoredStatusTest : public GuardTest,
                              public ::testing::WithParamInterface<int> {};

TEST_P(GuardStoredStatusTest, FinalStatusesAreStoredAndReplayed) {
  handler_response_.status = GetParam();
  Send(Req{}.Key("secret-key"));
  const Response replay = Send(Req{}.Key("secret-key"));
  EXPECT_EQ(replay.status, GetParam());
  EXPECT_EQ(replay.FindHeader("Idempotent-Replayed"), "true");
  EXPECT_EQ(runs_, 1);
}

INSTANTIATE_TEST_SUITE_P(Statuses, GuardStoredStatusTest,
                         ::testing::Values(200, 201, 204, 302, 400, 404, 409,
                                           422, 499));

class GuardReleasedStatusTest : public GuardTest,
                                public ::testing::WithParamInterface<int> {};

TEST_P(GuardReleasedStatusTest, RetryableStatusesReleaseTheKey) {
  handler_response_.status = GetParam();
  EXPECT_EQ(Send(Req{}.Key("secret-key")).status, GetParam());
  EXPECT_EQ(Send(Req{}.Key("secret-key")).status, GetParam());
  EXPECT_EQ(runs_, 2);
  EXPECT_EQ(Count(Outcome::kReleased), 2u);
  EXPECT_EQ(Count(Outcome::kExecuted), 2u);
}

INSTANTIATE_TEST_SUITE_P(Statuses, GuardReleasedStatusTest,
                         ::testing::Values(408, 425, 429, 500, 502, 503, 504));

TEST_F(GuardTest, StoredStatusesArePerRoute) {
  GuardOptions o;
  o.stored_statuses = StatusSet().AddRange(200, 299);
  auto route = std::make_shared<const GuardOptions>(o);
  handler_response_.status = 404;
  Send(Req{}.Key("secret-key"), route);
  Send(Req{}.Key("secret-key"), route);
  EXPECT_EQ(runs_, 2);  // 404 is not stored on this route.
}

TEST_F(GuardTest, HandlerExceptionReleasesTheKeyAndPropagates) {
  throw_ = true;
  EXPECT_THROW(Send(Req{}.Key("secret-key")), std::runtime_error);
  throw_ = false;
  EXPECT_EQ(Send(Req{}.Key("secret-key")).status, 201);
  EXPECT_EQ(runs_, 2);
  EXPECT_EQ(Count(Outcome::kReleased), 1u);
}

TEST_F(GuardTest, DroppedClaimHandleReleasesTheKey) {
  {
    View v(Req{}.Key("secret-key"));
    Decision d = guard_->Begin(v.view);
    ASSERT_EQ(d.action, Action::kExecute);
  }
  EXPECT_EQ(Send(Req{}.Key("secret-key")).status, 201);
  EXPECT_EQ(runs_, 1);
  EXPECT_EQ(Count(Outcome::kReleased), 1u);
}

TEST_F(GuardTest, RunSaysHowTheResponseEnded) {
  RunInfo info;
  auto run = [&](const Req& req) {
    View v(req);
    return guard_->Run(
        v.view, [&] { return handler_response_; }, nullptr, &info);
  };
  run(Req{}.Key("a"));
  EXPECT_EQ(info.outcome, Outcome::kExecuted);
  EXPECT_EQ(info.finish, FinishResult::kStored);
  run(Req{}.Key("a"));
  EXPECT_EQ(info.outcome, Outcome::kReplayed);
  EXPECT_FALSE(info.finish.has_value());
  handler_response_.status = 503;
  run(Req{}.Key("b"));
  EXPECT_EQ(info.finish, FinishResult::kReleased);
  handler_response_ = Created(std::string((1 << 20) + 1, 'x'));
  run(Req{}.Key("c"));
  EXPECT_EQ(info.finish, FinishResult::kNotStored);
  store_->fail_complete = ErrorCode::kUnavailable;
  handler_response_ = Created();
  run(Req{}.Key("d"));
  EXPECT_EQ(info.finish, FinishResult::kStoreFailed);
}

TEST_F(GuardTest, OversizeResponseIsSentUnstoredAndReleased) {
  GuardOptions o;
  o.max_stored_response = 16;
  Rebuild(o);
  handler_response_.body = std::string(17, 'x');
  EXPECT_EQ(Send(Req{}.Key("secret-key")).body, std::string(17, 'x'));
  EXPECT_EQ(Send(Req{}.Key("secret-key")).status, 201);
  EXPECT_EQ(runs_, 2);
  EXPECT_EQ(Count(Outcome::kNotStored), 2u);
  ASSERT_FALSE(logs_.empty());
  EXPECT_THAT(logs_.back(), HasSubstr("warning: "));
}

TEST_F(GuardTest, StaleCompleteAfterTakeoverSendsUnstored) {
  View first(Req{}.Key("secret-key"));
  Decision a = guard_->Begin(first.view);
  ASSERT_EQ(a.action, Action::kExecute);
  clock_->Advance(seconds(61));  // Past the 60 s lock timeout.
  View second(Req{}.Key("secret-key"));
  Decision b = guard_->Begin(second.view);
  ASSERT_EQ(b.action, Action::kExecute);
  EXPECT_TRUE(b.claim.takeover());
  EXPECT_EQ(Count(Outcome::kTakeover), 1u);

  Response b_response = Created(R"({"id":"o-2"})");
  EXPECT_EQ(a.claim.Finish(Created()), FinishResult::kStaleComplete);
  EXPECT_EQ(b.claim.Finish(b_response), FinishResult::kStored);
  EXPECT_EQ(Count(Outcome::kStaleComplete), 1u);
  EXPECT_EQ(Send(Req{}.Key("secret-key")).body, b_response.body);
  EXPECT_THAT(logs_, ::testing::Contains(HasSubstr("took the key over")));
}

// After an operator's revoke (idemctl revoke) the holder's completion finds
// no record: the log says it was revoked, not that the key was taken over.
TEST_F(GuardTest, CompletionAfterARevokeIsLoggedAsRevoked) {
  View first(Req{}.Key("secret-key"));
  Decision a = guard_->Begin(first.view);
  ASSERT_EQ(a.action, Action::kExecute);
  ASSERT_EQ(store_->Revoke(a.claim.record_id()), true);
  EXPECT_EQ(a.claim.Finish(Created()), FinishResult::kStaleComplete);
  EXPECT_EQ(Count(Outcome::kStaleComplete), 1u);
  ASSERT_FALSE(logs_.empty());
  EXPECT_THAT(logs_.back(), HasSubstr("warning: response not stored"));
  EXPECT_THAT(logs_.back(), HasSubstr("revoked"));
  EXPECT_THAT(logs_.back(), Not(HasSubstr("took the key over")));
  EXPECT_THAT(logs_.back(), HasSubstr(a.claim.record_id().ToHex()));
  EXPECT_THAT(logs_.back(), Not(HasSubstr("secret-key")));
  // The key runs afresh, no takeover.
  EXPECT_EQ(Send(Req{}.Key("secret-key")).status, 201);
  EXPECT_EQ(Count(Outcome::kTakeover), 0u);
}

TEST_F(GuardTest, CompleteFailureLeavesTheKeyLockedUntilTheTimeout) {
  store_->fail_complete = ErrorCode::kUnavailable;
  EXPECT_EQ(Send(Req{}.Key("secret-key")).status, 201);  // Still sent.
  store_->fail_complete = std::nullopt;
  EXPECT_EQ(Count(Outcome::kStoreFailed), 1u);
  EXPECT_EQ(Send(Req{}.Key("secret-key")).status, 409);
  clock_->Advance(seconds(60));
  EXPECT_EQ(Send(Req{}.Key("secret-key")).status, 201);
  EXPECT_EQ(runs_, 2);
}

TEST_F(GuardTest, ReleaseFailureIsLoggedAndTheLockTimesOut) {
  store_->fail_release = ErrorCode::kUnavailable;
  handler_response_.status = 500;
  Send(Req{}.Key("secret-key"));
  store_->fail_release = std::nullopt;
  EXPECT_THAT(logs_, ::testing::Contains(HasSubstr("releasing a key failed")));
  // Alertable: counted apart from the request's `released`.
  EXPECT_EQ(guard_->metrics().Get(CountedEvent::kReleaseFailed), 1u);
  EXPECT_EQ(Count(Outcome::kReleased), 1u);
  EXPECT_THAT(guard_->metrics().RenderPrometheus(),
              HasSubstr("\nidem_release_failures_total 1\n"));
  EXPECT_EQ(Send(Req{}.Key("secret-key")).status, 409);
  clock_->Advance(seconds(60));
  EXPECT_EQ(Send(Req{}.Key("secret-key")).status, 500);
  EXPECT_EQ(runs_, 2);
}

// --- Scope, expiry, options
// ---------------------------------------------------

TEST_F(GuardTest, KeysReplayOnlyInsideTheirScope) {
  Send(Req{}.Key("secret-key"));
  Req other_tenant;
  other_tenant.Key("secret-key").scope = "tenant-b";
  handler_response_.body = "tenant-b's order";
  EXPECT_EQ(Send(other_tenant).body, "tenant-b's order");
  Req anonymous;
  anonymous.Key("secret-key").scope.reset();
  EXPECT_EQ(Send(anonymous).body, "tenant-b's order");
  EXPECT_EQ(runs_, 3);
}

TEST_F(GuardTest, AnonymousBypassAndReject) {
  Req anonymous;
  anonymous.Key("secret-key").scope.reset();
  GuardOptions bypass;
  bypass.anonymous = AnonymousPolicy::kBypass;
  Rebuild(bypass);
  Send(anonymous);
  Send(anonymous);
  EXPECT_EQ(runs_, 2);
  // Its own step outcome, apart from what the route leaves unprotected.
  EXPECT_EQ(Count(Outcome::kAnonymousBypassed), 2u);
  EXPECT_EQ(Count(Outcome::kUnprotected), 0u);
  EXPECT_THAT(guard_->metrics().RenderPrometheus(),
              HasSubstr("idem_requests_total{outcome=\"anonymous_bypassed\"} "
                        "2\n"));

  GuardOptions reject;
  reject.anonymous = AnonymousPolicy::kReject;
  Rebuild(reject);
  const Response r = Send(anonymous);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(Body(r)["code"], "idempotency_authentication_required");
  EXPECT_EQ(Count(Outcome::kAnonymousRejected), 1u);
  EXPECT_EQ(Send(Req{}.Key("secret-key")).status, 201);  // Authenticated.
}

TEST_F(GuardTest, RecordsExpireAfterTheRouteTtl) {
  GuardOptions o;
  o.ttl = hours(1);
  auto route = std::make_shared<const GuardOptions>(o);
  Send(Req{}.Key("secret-key"), route);
  clock_->Advance(hours(1) - seconds(1));
  EXPECT_EQ(
      Send(Req{}.Key("secret-key"), route).FindHeader("Idempotent-Replayed"),
      "true");
  clock_->Advance(seconds(1));
  Send(Req{}.Key("secret-key"), route);
  EXPECT_EQ(runs_, 2);
}

TEST_F(GuardTest, FingerprintHeadersAreConfigurable) {
  GuardOptions o;
  o.fingerprint_headers = {"X-Account"};
  Rebuild(o);
  Send(Req{}.Key("secret-key").Header("X-Account", "1"));
  EXPECT_EQ(Send(Req{}.Key("secret-key").Header("x-account", "1")).status, 201);
  EXPECT_EQ(Send(Req{}.Key("secret-key").Header("X-Account", "2")).status, 422);
  EXPECT_EQ(runs_, 1);
  // Without the option, other headers do not matter.
  Rebuild(GuardOptions{});
  Send(Req{}.Key("secret-key").Header("X-Account", "1"));
  EXPECT_EQ(Send(Req{}.Key("secret-key").Header("X-Account", "2")).status, 201);
  EXPECT_EQ(runs_, 2);
}

TEST_F(GuardTest, JsonFingerprintIgnoresMemberOrderAndWhitespace) {
  GuardOptions o;
  o.fingerprint_body = BodyFingerprint::kJson;
  Rebuild(o);
  Req a;
  a.Key("secret-key").body = R"({"item":"book","qty":1})";
  Req b;
  b.Key("secret-key").body = "{ \"qty\": 1, \"item\": \"book\" }";
  Send(a);
  EXPECT_EQ(Send(b).FindHeader("Idempotent-Replayed"), "true");
  Req c;
  c.Key("secret-key").body = R"({"item":"book","qty":2})";
  EXPECT_EQ(Send(c).status, 422);
  EXPECT_EQ(runs_, 1);
}

TEST_F(GuardTest, InvalidOptionsAreRejected) {
  GuardSetup setup;
  setup.store = store_;
  setup.options.ttl = Duration::zero();
  auto g = Guard::Create(setup);
  ASSERT_FALSE(g.has_value());
  EXPECT_EQ(g.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(g.error().message(), HasSubstr("ttl"));
  EXPECT_FALSE(Guard::Create(GuardSetup{}).has_value());
}

// --- Metrics and logs
// ---------------------------------------------------------

TEST_F(GuardTest, EveryRequestCountsExactlyOneStepOutcome) {
  int requests = 0;
  auto send = [&](const Req& r) {
    ++requests;
    try {
      Send(r);
    } catch (const std::runtime_error&) {
    }
  };
  send(Req{});           // key_missing
  send(Req{}.Key(""));   // key_invalid
  send(Req{}.Key("a"));  // executed
  send(Req{}.Key("a"));  // replayed
  Req other;
  other.Key("a").body = "x";
  send(other);  // mismatch
  throw_ = true;
  send(Req{}.Key("b"));  // executed + released
  throw_ = false;
  store_->fail_claim = ErrorCode::kUnavailable;
  send(Req{}.Key("c"));  // store_error
  store_->fail_claim = std::nullopt;
  EXPECT_EQ(StepTotal(), static_cast<std::uint64_t>(requests));
  EXPECT_EQ(Count(Outcome::kReleased), 1u);

  const std::string text = guard_->metrics().RenderPrometheus();
  // The families add up: sum(idem_requests_total) is the requests sent, the
  // release is a follow-up of its own family.
  EXPECT_EQ(SumOfFamily(text, "idem_requests_total"),
            static_cast<std::uint64_t>(requests));
  EXPECT_EQ(SumOfFamily(text, "idem_request_followups_total"), 1u);
  EXPECT_THAT(text, HasSubstr("idem_request_followups_total{outcome="
                              "\"released\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("idem_requests_total{outcome=\"released\"")));
  EXPECT_THAT(text, HasSubstr("# TYPE idem_requests_total counter"));
  EXPECT_THAT(text, HasSubstr("idem_requests_total{outcome=\"executed\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("idem_requests_total{outcome=\"replayed\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("idem_requests_total{outcome=\"store_error\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("idem_store_operation_duration_seconds_count{"
                              "operation=\"claim\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("idem_store_operation_duration_seconds_bucket{"
                              "operation=\"claim\",le=\"+Inf\"} 5\n"));
}

TEST_F(GuardTest, LogsNeverContainKeysScopesOrBodies) {
  store_->fail_complete = ErrorCode::kUnavailable;
  Send(Req{}.Key("secret-key"));
  store_->fail_complete = std::nullopt;
  store_->fail_claim = ErrorCode::kUnavailable;
  Send(Req{}.Key("secret-key"));
  ASSERT_GE(logs_.size(), 2u);
  for (const auto& line : logs_) {
    EXPECT_THAT(line, Not(HasSubstr("secret-key")));
    EXPECT_THAT(line, Not(HasSubstr("tenant-a")));
    EXPECT_THAT(line, Not(HasSubstr("book")));
  }
}

// --- Regressions: protection never switches itself off ----------------------

TEST_F(GuardTest, FailOpenBackoffDoesNotUnprotectAFailClosedRoute) {
  GuardOptions open;
  open.on_store_error = StoreErrorPolicy::kFailOpen;
  auto open_route = std::make_shared<const GuardOptions>(open);
  auto closed_route = std::make_shared<const GuardOptions>(GuardOptions{});
  store_->fail_claim = ErrorCode::kUnavailable;
  EXPECT_EQ(Send(Req{}.Key("open-key"), open_route).status, 201);
  EXPECT_EQ(Count(Outcome::kFailOpen), 1u);
  store_->fail_claim = std::nullopt;
  // Inside the fail-open route's back-off, the fail-closed route still asks
  // the (healthy) store: its handler runs once per key.
  EXPECT_EQ(Send(Req{}.Key("closed-key"), closed_route).status, 201);
  EXPECT_EQ(Send(Req{}.Key("closed-key"), closed_route)
                .FindHeader("Idempotent-Replayed"),
            "true");
  EXPECT_EQ(runs_, 2);
  EXPECT_EQ(store_->claims, 3);
  // The fail-open route itself is in its back-off.
  EXPECT_EQ(Send(Req{}.Key("open-key-2"), open_route).status, 201);
  EXPECT_EQ(store_->claims, 3);
  EXPECT_EQ(Count(Outcome::kFailOpen), 2u);
}

TEST_F(GuardTest, FailOpenBackoffDoesNotUnprotectAFailClosedRouteWithKey) {
  GuardOptions open;
  open.on_store_error = StoreErrorPolicy::kFailOpen;
  auto open_route = std::make_shared<const GuardOptions>(open);
  store_->fail_claim = ErrorCode::kUnavailable;
  EXPECT_EQ(guard_->BeginWithKey("s", "k1", "op", "in", open_route).action,
            Action::kPassThrough);
  store_->fail_claim = std::nullopt;
  Decision d = guard_->BeginWithKey("s", "k2", "op", "in");
  ASSERT_EQ(d.action, Action::kExecute);
  EXPECT_EQ(d.claim.Finish(Created()), FinishResult::kStored);
  EXPECT_EQ(guard_->BeginWithKey("s", "k2", "op", "in").outcome,
            Outcome::kReplayed);
}

TEST_F(GuardTest, Step8cDamagedRecordIs500AndStartsNoBackoff) {
  GuardOptions o;
  o.on_store_error = StoreErrorPolicy::kFailOpen;
  Rebuild(o);
  store_->fail_claim = ErrorCode::kDataLoss;
  const Response r = Send(Req{}.Key("secret-key"));
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(Body(r)["code"], "idempotency_record_damaged");
  EXPECT_FALSE(r.FindHeader("Retry-After").has_value());
  EXPECT_EQ(runs_, 0);
  store_->fail_claim = std::nullopt;
  // Other keys are protected at once: no back-off started.
  EXPECT_EQ(Send(Req{}.Key("other-key")).status, 201);
  EXPECT_EQ(Send(Req{}.Key("other-key")).FindHeader("Idempotent-Replayed"),
            "true");
  EXPECT_EQ(runs_, 1);
  EXPECT_EQ(Count(Outcome::kFailOpen), 0u);
  EXPECT_EQ(Count(Outcome::kRecordDamaged), 1u);
  // The log names the whole record id, for idemctl revoke --record-id.
  const std::string hex = MakeRecordId("tenant-a", "secret-key").ToHex();
  EXPECT_THAT(logs_, ::testing::Contains(::testing::AllOf(HasSubstr("error: "),
                                                          HasSubstr(hex))));
}

TEST_F(GuardTest, OnlyAnUnreachableStoreFailsOpen) {
  GuardOptions o;
  o.on_store_error = StoreErrorPolicy::kFailOpen;
  for (ErrorCode code : {ErrorCode::kInvalidArgument, ErrorCode::kInternal,
                         ErrorCode::kResourceExhausted, ErrorCode::kDataLoss}) {
    Rebuild(o);
    runs_ = 0;
    store_->fail_claim = code;
    EXPECT_GE(Send(Req{}.Key("secret-key")).status, 500) << ErrorCodeName(code);
    EXPECT_EQ(runs_, 0) << ErrorCodeName(code);
    store_->fail_claim = std::nullopt;
    Send(Req{}.Key("secret-key"));
    EXPECT_EQ(Send(Req{}.Key("secret-key")).FindHeader("Idempotent-Replayed"),
              "true")
        << ErrorCodeName(code);
    EXPECT_EQ(runs_, 1) << ErrorCodeName(code);
    EXPECT_EQ(Count(Outcome::kFailOpen), 0u) << ErrorCodeName(code);
  }
}

TEST_F(GuardTest, InvalidRouteOptionsAreRefusedWithoutTheStore) {
  GuardOptions open;
  open.on_store_error = StoreErrorPolicy::kFailOpen;
  open.ttl = Duration::zero();
  auto bad = std::make_shared<const GuardOptions>(open);
  const Response r = Send(Req{}.Key("secret-key"), bad);
  ExpectProblem(r, 500, problem_code::kRouteInvalid);
  EXPECT_EQ(Count(Outcome::kRouteInvalid), 1u);
  EXPECT_EQ(runs_, 0);
  EXPECT_EQ(store_->claims, 0);
  EXPECT_THAT(logs_, ::testing::Contains(::testing::AllOf(HasSubstr("error: "),
                                                          HasSubstr("ttl"))));
  EXPECT_EQ(guard_->BeginWithKey("s", "k", "op", "in", bad).action,
            Action::kRespond);
  EXPECT_EQ(store_->claims, 0);
  // No back-off: the guard's own routes are protected.
  Send(Req{}.Key("secret-key"));
  EXPECT_EQ(Send(Req{}.Key("secret-key")).FindHeader("Idempotent-Replayed"),
            "true");
  EXPECT_EQ(runs_, 1);
}

TEST_F(GuardTest, MakeRouteOptionsValidatesLikeTheGuard) {
  GuardOptions o;
  o.ttl = Duration::zero();
  auto bad = Guard::MakeRouteOptions(o);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(bad.error().message(), HasSubstr("ttl"));
  o.ttl = hours(1);
  auto good = Guard::MakeRouteOptions(o);
  ASSERT_TRUE(good.has_value());
  EXPECT_EQ((*good)->ttl, hours(1));
  EXPECT_EQ(Send(Req{}.Key("secret-key"), *good).status, 201);
}

// MakeRouteOptions marks what it validated: Begin does not validate those
// options again (they are const). The mark belongs to that object, not to
// its value: a copy, or an aliasing pointer to other options, is validated
// on every request.
TEST_F(GuardTest, RoutesFromMakeRouteOptionsAreNotValidatedAgain) {
  auto made = Guard::MakeRouteOptions(GuardOptions{});
  ASSERT_TRUE(made.has_value());
  std::shared_ptr<const GuardOptions> route = *made;
  // The object MakeRouteOptions allocated is not itself const, so this is
  // defined; it shows that Begin trusts the mark instead of re-checking.
  const_cast<GuardOptions&>(*route).max_key_length = 0;
  EXPECT_FALSE(route->Validate().has_value());
  EXPECT_EQ(Send(Req{}.Key("secret-key"), route).status, 400);
  EXPECT_EQ(Count(Outcome::kRouteInvalid), 0u);
  EXPECT_EQ(Count(Outcome::kKeyInvalid), 1u);

  const auto copy = std::make_shared<const GuardOptions>(*route);
  ExpectProblem(Send(Req{}.Key("secret-key"), copy), 500,
                problem_code::kRouteInvalid);
  const auto other = std::make_shared<GuardOptions>(*route);
  const std::shared_ptr<const GuardOptions> aliasing(route, other.get());
  ExpectProblem(Send(Req{}.Key("secret-key"), aliasing), 500,
                problem_code::kRouteInvalid);
  EXPECT_EQ(Count(Outcome::kRouteInvalid), 2u);
  EXPECT_EQ(runs_, 0);
}

// Guard::BodyIsBounded answers, before the body is read, what Begin does with
// a body over max_request_body: bounded means Begin answers it itself
// (without the store); not bounded means Begin never refuses it for its
// size (it passes through, or gets a problem about its key or
// authentication).
TEST_F(GuardTest, BodyIsBoundedAgreesWithBegin) {
  for (const OversizePolicy oversize :
       {OversizePolicy::kReject, OversizePolicy::kBypass}) {
    for (const bool key_required : {false, true}) {
      for (const AnonymousPolicy anonymous :
           {AnonymousPolicy::kShared, AnonymousPolicy::kReject,
            AnonymousPolicy::kBypass}) {
        for (const bool has_key : {false, true}) {
          for (const bool authenticated : {false, true}) {
            SCOPED_TRACE(::testing::Message()
                         << "bypass oversize "
                         << (oversize == OversizePolicy::kBypass)
                         << ", key_required " << key_required << ", anonymous "
                         << static_cast<int>(anonymous) << ", has_key "
                         << has_key << ", authenticated " << authenticated);
            GuardOptions o;
            o.oversize_request = oversize;
            o.key_required = key_required;
            o.anonymous = anonymous;
            auto route = Guard::MakeRouteOptions(o);
            ASSERT_TRUE(route.has_value());
            int asked = 0;
            const bool bounded = Guard::BodyIsBounded(**route, has_key, [&] {
              ++asked;
              return authenticated;
            });
            EXPECT_LE(asked, 1);
            if (anonymous != AnonymousPolicy::kBypass) {
              EXPECT_EQ(asked, 0);
            }

            Req req;
            if (has_key) req.Key("secret-key");
            if (!authenticated) req.scope.reset();
            req.body_too_large = true;
            View v(req);
            const int claims = store_->claims;
            Decision d = guard_->Begin(v.view, *route);
            EXPECT_EQ(store_->claims, claims);
            if (bounded) {
              EXPECT_EQ(d.action, Action::kRespond);
              EXPECT_GE(d.response.status, 400);
            } else {
              // Never refused for its size: passed through, or a key or
              // authentication problem that does not depend on the body.
              if (d.action == Action::kRespond) {
                EXPECT_NE(d.response.status, 413);
              } else {
                EXPECT_EQ(d.action, Action::kPassThrough);
              }
            }
          }
        }
      }
    }
  }
}

TEST_F(GuardTest, ValidateRefusesZeroLimitsAndHugeDurations) {
  auto refused = [](auto mutate, std::string_view field) {
    GuardOptions o;
    mutate(o);
    auto valid = o.Validate();
    ASSERT_FALSE(valid.has_value()) << field;
    EXPECT_EQ(valid.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(valid.error().message(), HasSubstr(std::string(field)));
  };
  refused([](GuardOptions& o) { o.max_request_body = 0; }, "max_request_body");
  refused([](GuardOptions& o) { o.max_stored_response = 0; },
          "max_stored_response");
  refused([](GuardOptions& o) { o.ttl = hours(24 * 366); }, "ttl");
  refused([](GuardOptions& o) { o.ttl = Duration::max(); }, "ttl");
  refused([](GuardOptions& o) { o.lock_timeout = hours(25); }, "lock_timeout");
  refused([](GuardOptions& o) { o.lock_wait = hours(2); }, "lock_wait");
  refused([](GuardOptions& o) { o.retry_after = hours(25); }, "retry_after");
  refused([](GuardOptions& o) { o.store_backoff = hours(2); }, "store_backoff");
  GuardOptions edge;
  edge.ttl = hours(24 * 365);
  edge.lock_timeout = hours(24);
  edge.lock_wait = hours(1);
  edge.retry_after = hours(24);
  edge.store_backoff = hours(1);
  EXPECT_TRUE(edge.Validate().has_value());
  // A lock longer than the record is capped at its expiry (SEMANTICS:
  // locked_until = min(now + lock_timeout, expires_at)), not refused.
  GuardOptions short_ttl;
  short_ttl.ttl = seconds(1);
  EXPECT_TRUE(short_ttl.Validate().has_value());
}

TEST_F(GuardTest, AnonymousRejectAppliesOnlyToRequestsWithAKey) {
  GuardOptions reject;
  reject.anonymous = AnonymousPolicy::kReject;
  Req no_key;
  no_key.scope.reset();
  Req with_key;
  with_key.Key("secret-key").scope.reset();
  // Key required: a request without a key is step 1 (400), not 401.
  Rebuild(reject);
  ExpectProblem(Send(no_key), 400, problem_code::kKeyMissing);
  EXPECT_EQ(Send(with_key).status, 401);
  EXPECT_EQ(Count(Outcome::kKeyMissing), 1u);
  EXPECT_EQ(Count(Outcome::kAnonymousRejected), 1u);
  // Key optional: a request without a key is step 1b (passes through).
  reject.key_required = false;
  Rebuild(reject);
  EXPECT_EQ(Send(no_key).status, 201);
  EXPECT_EQ(Count(Outcome::kUnprotected), 1u);
  EXPECT_EQ(Send(with_key).status, 401);
  EXPECT_EQ(runs_, 1);
}

TEST_F(GuardTest, AnonymousBypassOnAKeyRequiredRoute) {
  GuardOptions bypass;
  bypass.anonymous = AnonymousPolicy::kBypass;
  Rebuild(bypass);
  Req no_key;
  no_key.scope.reset();
  Req with_key;
  with_key.Key("secret-key").scope.reset();
  // Step 1 comes first: no key on a key-required route is 400 for everyone.
  ExpectProblem(Send(no_key), 400, problem_code::kKeyMissing);
  EXPECT_EQ(runs_, 0);
  // With a key: runs unprotected, every time.
  EXPECT_EQ(Send(with_key).status, 201);
  EXPECT_EQ(Send(with_key).status, 201);
  EXPECT_EQ(runs_, 2);
  EXPECT_EQ(Count(Outcome::kAnonymousBypassed), 2u);
  EXPECT_EQ(Count(Outcome::kUnprotected), 0u);
  EXPECT_EQ(store_->claims, 0);
  // Key optional, no key: passes through too, as the route asks (not a
  // bypass of the key's protection).
  bypass.key_required = false;
  Rebuild(bypass);
  EXPECT_EQ(Send(no_key).status, 201);
  EXPECT_EQ(Count(Outcome::kUnprotected), 1u);
  EXPECT_EQ(Count(Outcome::kAnonymousBypassed), 0u);
}

}  // namespace
}  // namespace idem
