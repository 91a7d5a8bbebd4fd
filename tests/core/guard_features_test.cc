// The Guard's per-route and operator features against SEMANTICS.md:
// per-operation keys (key_per_operation), the global switch (step 0), the
// default stored headers, the observer (observer.h) and the request-latency
// histogram, over the test baseline store and FaultyStore.

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "baseline/sharded_mutex_store.h"
#include "idem/guard.h"
#include "idem/once.h"
#include "idem/record_id.h"
#include "support/down_store.h"
#include "support/faulty_store.h"
#include "support/log_capture.h"

namespace idem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::string_view kScope = "tenant-a";
constexpr std::string_view kBody = R"({"amount":10})";

// One request as an adapter would describe it.
struct Call {
  std::string method = "POST";
  std::string target = "/orders";
  std::string route;  // The matched pattern; empty: the target's path.
  std::optional<std::string> key = "key-1";
  std::string body = std::string(kBody);
};

// Everything an observer is told, in order.
class RecordingObserver final : public GuardObserver {
 public:
  struct Seen {
    std::string kind;  // "decision" or "finish".
    Outcome outcome = Outcome::kUnprotected;
    std::optional<FinishResult> result;
    int status = 0;
    std::string method;
    std::string route;
    std::optional<RecordId> record_id;
    Duration store_latency{};
    Duration elapsed{};
  };
  explicit RecordingObserver(std::string name,
                             std::vector<std::string>* order = nullptr)
      : name_(std::move(name)), order_(order) {}

  void OnDecision(const DecisionEvent& e) override {
    seen.push_back({"decision", e.outcome, std::nullopt, 0,
                    std::string(e.method), std::string(e.route), e.record_id,
                    e.store_latency, e.elapsed});
    if (order_ != nullptr) order_->push_back(name_);
  }
  void OnFinish(const FinishEvent& e) override {
    seen.push_back({"finish", Outcome::kExecuted, e.result, e.status,
                    std::string(e.method), std::string(e.route), e.record_id,
                    e.store_latency, e.elapsed});
    if (order_ != nullptr) order_->push_back(name_);
  }

  std::vector<Seen> seen;

 private:
  std::string name_;
  std::vector<std::string>* order_;
};

class GuardFeaturesTest : public ::testing::Test {
 protected:
  void SetUp() override { Rebuild(GuardOptions{}); }

  void Rebuild(GuardOptions options, std::shared_ptr<Store> inner = nullptr,
               std::vector<std::shared_ptr<GuardObserver>> observers = {},
               bool enabled = true) {
    guard_.reset();
    logs_.clear();
    clock_ = std::make_shared<ManualClock>();
    inner_ =
        inner ? std::move(inner) : std::make_shared<bench::ShardedMutexStore>();
    store_ = std::make_shared<testing::FaultyStore>(inner_);
    GuardSetup setup;
    setup.store = store_;
    setup.options = std::move(options);
    setup.clock = clock_;
    setup.observers = std::move(observers);
    setup.log = testing::CaptureLogs(logs_);
    setup.enabled = enabled;
    auto guard = Guard::Create(std::move(setup));
    ASSERT_TRUE(guard.has_value()) << guard.error().ToString();
    guard_ = std::move(*guard);
  }

  static std::shared_ptr<const GuardOptions> PerOperation() {
    GuardOptions o;
    o.key_per_operation = true;
    return *Guard::MakeRouteOptions(o);
  }

  Decision Begin(const Call& call,
                 std::shared_ptr<const GuardOptions> route = nullptr) {
    std::vector<HeaderView> headers;
    if (call.key) headers.emplace_back("Idempotency-Key", *call.key);
    RequestView view;
    view.method = call.method;
    view.target = call.target;
    view.route = call.route;
    view.headers = headers;
    view.body = call.body;
    view.scope = kScope;
    return guard_->Begin(view, std::move(route));
  }

  // Begin, run the handler (answering `response`) when told to, Finish.
  Response Send(const Call& call,
                std::shared_ptr<const GuardOptions> route = nullptr,
                const Response& response = Created()) {
    Decision d = Begin(call, std::move(route));
    EXPECT_NE(d.action, Action::kWait);
    if (d.action == Action::kRespond) return d.response;
    ++runs_;
    if (d.action == Action::kExecute) d.claim.Finish(response);
    return response;
  }

  static Response Created() {
    return Response{201, {{"Content-Type", "application/json"}}, "{}"};
  }

  std::uint64_t Count(Outcome o) const { return guard_->metrics().Get(o); }

  std::optional<Record> Stored(const RecordId& id) {
    auto record = inner_->Inspect(id, clock_->Now());
    EXPECT_TRUE(record.has_value()) << record.error().ToString();
    return record ? *record : std::nullopt;
  }

  std::shared_ptr<ManualClock> clock_;
  std::shared_ptr<Store> inner_;
  std::shared_ptr<testing::FaultyStore> store_;
  // Before guard_: the guard's destructor logs pending repeat counts.
  std::vector<std::string> logs_;
  std::unique_ptr<Guard> guard_;
  int runs_ = 0;
};

// --- Per-operation keys -----------------------------------------------------

TEST_F(GuardFeaturesTest, SameKeyOnTwoRoutesWithoutTheOptionIsAMismatch) {
  // Today's behaviour, pinned: the key alone names the record.
  EXPECT_EQ(Send({.target = "/orders", .route = "/orders"}).status, 201);
  EXPECT_EQ(Send({.target = "/payments", .route = "/payments"}).status, 422);
  EXPECT_EQ(runs_, 1);
  EXPECT_EQ(Count(Outcome::kMismatch), 1u);
  EXPECT_TRUE(Stored(MakeRecordId(kScope, "key-1")).has_value());
}

TEST_F(GuardFeaturesTest, SameKeyOnTwoRoutesWithTheOptionIsTwoOperations) {
  const auto route = PerOperation();
  EXPECT_EQ(Send({.target = "/orders", .route = "/orders"}, route).status, 201);
  EXPECT_EQ(Send({.target = "/payments", .route = "/payments"}, route).status,
            201);
  EXPECT_EQ(runs_, 2);
  EXPECT_EQ(Count(Outcome::kExecuted), 2u);
  EXPECT_EQ(Count(Outcome::kMismatch), 0u);
  // Each operation replays its own response.
  const Response replay =
      Send({.target = "/payments", .route = "/payments"}, route);
  EXPECT_EQ(replay.FindHeader("Idempotent-Replayed"), "true");
  EXPECT_EQ(runs_, 2);
  // The records are the per-operation ids, never the key's plain one.
  EXPECT_TRUE(Stored(MakeRecordId(kScope, "POST /orders", "key-1")));
  EXPECT_TRUE(Stored(MakeRecordId(kScope, "POST /payments", "key-1")));
  EXPECT_FALSE(Stored(MakeRecordId(kScope, "key-1")));
}

TEST_F(GuardFeaturesTest, ThePatternNotThePathNamesTheOperation) {
  const auto route = PerOperation();
  // /orders/1 and /orders/2 are one operation, POST /orders/{id}: the same
  // key with another target (so another fingerprint) is the 422 it is
  // without the option.
  EXPECT_EQ(
      Send({.target = "/orders/1", .route = "/orders/{id}"}, route).status,
      201);
  EXPECT_EQ(
      Send({.target = "/orders/2", .route = "/orders/{id}"}, route).status,
      422);
  EXPECT_EQ(runs_, 1);
  EXPECT_TRUE(Stored(MakeRecordId(kScope, "POST /orders/{id}", "key-1")));
}

TEST_F(GuardFeaturesTest, TheMethodIsPartOfTheOperation) {
  const auto route = PerOperation();
  EXPECT_EQ(Send({.method = "POST", .route = "/orders"}, route).status, 201);
  EXPECT_EQ(Send({.method = "PUT", .route = "/orders"}, route).status, 201);
  EXPECT_EQ(runs_, 2);
  EXPECT_TRUE(Stored(MakeRecordId(kScope, "PUT /orders", "key-1")));
}

TEST_F(GuardFeaturesTest, WithoutARouteThePathWithoutTheQueryStandsIn) {
  const auto route = PerOperation();
  EXPECT_EQ(Send({.target = "/orders?src=a"}, route).status, 201);
  EXPECT_TRUE(Stored(MakeRecordId(kScope, "POST /orders", "key-1")));
}

TEST_F(GuardFeaturesTest, ScopesStayApartWithPerOperationKeys) {
  const auto route = PerOperation();
  EXPECT_EQ(Send({.route = "/orders"}, route).status, 201);
  EXPECT_FALSE(Stored(MakeRecordId("tenant-b", "POST /orders", "key-1")));
}

TEST_F(GuardFeaturesTest, RunOnceOperationsAreTwoRecordsWithTheOption) {
  int runs = 0;
  auto fn = [&] {
    ++runs;
    return std::string("done");
  };
  // Without the option: another operation with the key is refused.
  ASSERT_TRUE(RunOnce(*guard_, kScope, "msg-1", "charge", "x", fn));
  auto refused = RunOnce(*guard_, kScope, "msg-1", "refund", "x", fn);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(runs, 1);

  const auto route = PerOperation();
  auto charge = RunOnce(*guard_, kScope, "msg-2", "charge", "x", fn, route);
  auto refund = RunOnce(*guard_, kScope, "msg-2", "refund", "x", fn, route);
  ASSERT_TRUE(charge && refund);
  EXPECT_FALSE(charge->replayed);
  EXPECT_FALSE(refund->replayed);
  EXPECT_EQ(runs, 3);
  // idemctl --method CALL --path charge names it.
  EXPECT_TRUE(Stored(MakeRecordId(kScope, "CALL charge", "msg-2")));
  auto again = RunOnce(*guard_, kScope, "msg-2", "refund", "x", fn, route);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(runs, 3);
}

// --- The global switch (step 0) ---------------------------------------------

TEST_F(GuardFeaturesTest, SwitchedOffEveryRequestPassesThroughWithoutTheStore) {
  // A store that fails every call: any call would turn into a 503.
  Rebuild(GuardOptions{}, std::make_shared<testing::DownStore>());
  EXPECT_TRUE(guard_->enabled());
  EXPECT_EQ(Send({}).status, 503);
  ASSERT_EQ(store_->claims, 1);

  guard_->SetEnabled(false);
  EXPECT_FALSE(guard_->enabled());
  EXPECT_EQ(Send({}).status, 201);
  EXPECT_EQ(Send({}).status, 201);
  // Even what would be refused before the store: no key, invalid options.
  EXPECT_EQ(Send({.key = std::nullopt}).status, 201);
  GuardOptions invalid;
  invalid.ttl = Duration::zero();
  EXPECT_EQ(
      Send({}, std::make_shared<const GuardOptions>(std::move(invalid))).status,
      201);
  const Decision d = Begin({});
  EXPECT_EQ(d.action, Action::kPassThrough);
  EXPECT_EQ(d.outcome, Outcome::kUnprotected);
  EXPECT_EQ(store_->claims, 1);
  EXPECT_EQ(store_->completes + store_->releases, 0);
  EXPECT_EQ(Count(Outcome::kUnprotected), 5u);
  EXPECT_EQ(runs_, 4);

  guard_->SetEnabled(true);
  EXPECT_EQ(Send({}).status, 503);
  EXPECT_EQ(store_->claims, 2);
}

// GuardSetup::enabled = false: a deployment that starts with protection
// off (step 0 from the first request) and switches it on at run time.
TEST_F(GuardFeaturesTest, CreatedOffPassesThroughUntilSwitchedOn) {
  EXPECT_TRUE(GuardSetup().enabled);
  Rebuild(GuardOptions{}, nullptr, {}, /*enabled=*/false);
  EXPECT_FALSE(guard_->enabled());
  // The operator is told at start, as when it is switched off.
  ASSERT_EQ(logs_.size(), 1u);
  EXPECT_THAT(logs_[0], HasSubstr("warning: idempotency protection switched "
                                  "off"));
  for (int i = 0; i < 2; ++i) {
    const Decision d = Begin({});
    EXPECT_EQ(d.action, Action::kPassThrough);
    EXPECT_EQ(d.outcome, Outcome::kUnprotected);
    EXPECT_EQ(Send({}).FindHeader("Idempotent-Replayed"), std::nullopt);
  }
  EXPECT_EQ(runs_, 2);
  EXPECT_EQ(Count(Outcome::kUnprotected), 4u);
  EXPECT_EQ(store_->claims, 0);

  guard_->SetEnabled(true);
  ASSERT_EQ(logs_.size(), 2u);
  EXPECT_THAT(logs_[1], HasSubstr("info: idempotency protection switched on"));
  EXPECT_EQ(Send({}).status, 201);
  EXPECT_EQ(Send({}).FindHeader("Idempotent-Replayed"), "true");
  EXPECT_EQ(runs_, 3);
  EXPECT_EQ(Count(Outcome::kExecuted), 1u);
  EXPECT_EQ(Count(Outcome::kReplayed), 1u);
  EXPECT_EQ(Count(Outcome::kUnprotected), 4u);
}

TEST_F(GuardFeaturesTest, SwitchingIsLoggedOncePerChange) {
  guard_->SetEnabled(false);
  guard_->SetEnabled(false);
  guard_->SetEnabled(true);
  guard_->SetEnabled(true);
  // Twice off inside the log's repeat interval: both lines are written,
  // not held back as repeats.
  guard_->SetEnabled(false);
  guard_->SetEnabled(true);
  ASSERT_EQ(logs_.size(), 4u);
  EXPECT_THAT(logs_[0], HasSubstr("warning: idempotency protection switched "
                                  "off"));
  EXPECT_THAT(logs_[1], HasSubstr("info: idempotency protection switched on"));
  EXPECT_THAT(logs_[2], HasSubstr("warning:"));
  EXPECT_THAT(logs_[3], HasSubstr("info:"));
}

TEST_F(GuardFeaturesTest, AClaimTakenBeforeTheSwitchEndsAsItBegan) {
  Decision first = Begin({});
  ASSERT_EQ(first.action, Action::kExecute);
  guard_->SetEnabled(false);
  // Stored, so that the key is not left in_progress, and replayed once the
  // switch is on again.
  EXPECT_EQ(first.claim.Finish(Created()), FinishResult::kStored);
  guard_->SetEnabled(true);
  const Response replay = Send({});
  EXPECT_EQ(replay.FindHeader("Idempotent-Replayed"), "true");
  EXPECT_EQ(runs_, 0);
}

TEST_F(GuardFeaturesTest, RunOnceSwitchedOffSaysItRanUnprotected) {
  guard_->SetEnabled(false);
  int runs = 0;
  auto fn = [&] {
    ++runs;
    return std::string("done");
  };
  for (int i = 0; i < 2; ++i) {
    auto result = RunOnce(*guard_, kScope, "msg", "charge", "x", fn);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->storage, OnceStorage::kUnprotected);
    EXPECT_FALSE(result->stored());
  }
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(store_->claims, 0);
}

TEST_F(GuardFeaturesTest, SwitchIsSafeFromAnotherThread) {
  // TSan's case: one thread switches while this one serves requests; each
  // request is either protected (executed or replayed) or unprotected.
  std::thread switcher([&] {
    for (int i = 0; i < 200; ++i) guard_->SetEnabled(i % 2 == 1);
  });
  for (int i = 0; i < 200; ++i) Send({});
  switcher.join();
  EXPECT_TRUE(guard_->enabled());
  EXPECT_EQ(Count(Outcome::kExecuted) + Count(Outcome::kReplayed) +
                Count(Outcome::kUnprotected),
            200u);
  EXPECT_LE(Count(Outcome::kExecuted), 1u);
  EXPECT_EQ(logs_.size(), 200u);
}

// --- Stored headers ---------------------------------------------------------

TEST_F(GuardFeaturesTest, AReplayOfACompressedBodySaysItIsCompressed) {
  // Gzip magic and a NUL: the body is bytes, replayed as they were.
  const std::string gzip("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10);
  const Response compressed{
      200,
      {{"Content-Type", "application/json"},
       {"Content-Encoding", "gzip"},
       {"Content-Disposition", "attachment; filename=\"order.json\""},
       {"Vary", "Accept-Encoding"}},
      gzip};
  EXPECT_EQ(Send({}, nullptr, compressed).status, 200);
  const Response replay = Send({});
  EXPECT_EQ(replay.status, 200);
  EXPECT_EQ(replay.body, gzip);
  EXPECT_EQ(replay.FindHeader("Content-Encoding"), "gzip");
  EXPECT_EQ(replay.FindHeader("Content-Disposition"),
            "attachment; filename=\"order.json\"");
  EXPECT_EQ(replay.FindHeader("Content-Type"), "application/json");
  EXPECT_FALSE(replay.FindHeader("Vary").has_value());
  EXPECT_EQ(runs_, 1);
}

// --- Observers --------------------------------------------------------------

TEST_F(GuardFeaturesTest, ObserversSeeTheDecisionAndTheFinish) {
  auto a = std::make_shared<RecordingObserver>("a");
  Rebuild(GuardOptions{}, nullptr, {a});
  const Call call{.target = "/orders/7?x=1", .route = "/orders/{id}"};
  EXPECT_EQ(Send(call).status, 201);
  EXPECT_EQ(Send(call).status, 201);  // Replay.
  EXPECT_EQ(Send({.key = std::nullopt}).status, 400);

  ASSERT_EQ(a->seen.size(), 4u);
  const RecordId id = MakeRecordId(kScope, "key-1");
  const auto& executed = a->seen[0];
  EXPECT_EQ(executed.kind, "decision");
  EXPECT_EQ(executed.outcome, Outcome::kExecuted);
  EXPECT_EQ(executed.method, "POST");
  EXPECT_EQ(executed.route, "/orders/{id}");
  EXPECT_EQ(executed.record_id, id);
  EXPECT_GT(executed.store_latency, Duration::zero());
  EXPECT_GE(executed.elapsed, executed.store_latency);

  const auto& finished = a->seen[1];
  EXPECT_EQ(finished.kind, "finish");
  EXPECT_EQ(finished.result, FinishResult::kStored);
  EXPECT_EQ(finished.status, 201);
  EXPECT_EQ(finished.record_id, id);
  EXPECT_EQ(finished.method, "POST");
  EXPECT_EQ(finished.route, "/orders/{id}");
  EXPECT_GT(finished.store_latency, Duration::zero());
  // From Begin: covers the decision's time and the Complete call.
  EXPECT_GE(finished.elapsed, executed.elapsed + finished.store_latency);

  EXPECT_EQ(a->seen[2].outcome, Outcome::kReplayed);
  EXPECT_EQ(a->seen[2].record_id, id);
  // Answered before the key: no record, no store call; the path stands in
  // for the missing route.
  EXPECT_EQ(a->seen[3].outcome, Outcome::kKeyMissing);
  EXPECT_FALSE(a->seen[3].record_id.has_value());
  EXPECT_EQ(a->seen[3].store_latency, Duration::zero());
  EXPECT_EQ(a->seen[3].route, "/orders");
}

TEST_F(GuardFeaturesTest, ObserversAreCalledInOrder) {
  std::vector<std::string> order;
  auto a = std::make_shared<RecordingObserver>("a", &order);
  auto b = std::make_shared<RecordingObserver>("b", &order);
  Rebuild(GuardOptions{}, nullptr, {a, b});
  Send({});
  EXPECT_THAT(order, ElementsAre("a", "b", "a", "b"));
}

TEST_F(GuardFeaturesTest, EveryWayAClaimEndsIsAFinishEvent) {
  auto a = std::make_shared<RecordingObserver>("a");
  GuardOptions options;
  options.max_stored_response = 4;
  Rebuild(options, nullptr, {a});
  auto result_of = [&](auto end) {
    const std::size_t before = a->seen.size();
    {
      Decision d = Begin({.key = "k" + std::to_string(before)});
      EXPECT_EQ(d.action, Action::kExecute);
      end(d.claim);
    }
    EXPECT_EQ(a->seen.size(), before + 2);
    return a->seen.back();
  };
  auto released = result_of([](ClaimHandle& c) {
    c.Finish(Response{503, {}, "busy"});
  });
  EXPECT_EQ(released.result, FinishResult::kReleased);
  EXPECT_EQ(released.status, 503);
  auto not_stored = result_of([](ClaimHandle& c) {
    c.Finish(Response{201, {}, "too long"});
  });
  EXPECT_EQ(not_stored.result, FinishResult::kNotStored);
  auto abandoned = result_of([](ClaimHandle& c) { c.Abandon(); });
  EXPECT_EQ(abandoned.result, FinishResult::kReleased);
  EXPECT_EQ(abandoned.status, 0);
  auto forgotten = result_of([](ClaimHandle& c) { c.Forget("timed out"); });
  EXPECT_EQ(forgotten.result, FinishResult::kStoreFailed);
  EXPECT_EQ(forgotten.store_latency, Duration::zero());
  auto dropped = result_of([](ClaimHandle&) {});  // Destroyed unfinished.
  EXPECT_EQ(dropped.result, FinishResult::kReleased);
  store_->fail_complete = ErrorCode::kUnavailable;
  auto failed = result_of([](ClaimHandle& c) { c.Finish(Created()); });
  EXPECT_EQ(failed.result, FinishResult::kStoreFailed);
  EXPECT_EQ(failed.status, 201);
}

TEST_F(GuardFeaturesTest, AWaitIsOneDecisionAtItsEnd) {
  auto a = std::make_shared<RecordingObserver>("a");
  GuardOptions options;
  options.lock_wait = std::chrono::milliseconds(100);
  Rebuild(options, nullptr, {a});
  Decision holder = Begin({.route = "/orders"});
  ASSERT_EQ(holder.action, Action::kExecute);

  Decision waiting = Begin({.route = "/orders"});
  int polls = 0;
  while (waiting.action == Action::kWait) {
    EXPECT_EQ(a->seen.size(), 1u);  // Only the holder's decision so far.
    clock_->Advance(waiting.retry_in);
    waiting = guard_->Resume(std::move(waiting));
    ++polls;
  }
  EXPECT_EQ(waiting.outcome, Outcome::kConflict);
  ASSERT_EQ(a->seen.size(), 2u);
  const auto& conflict = a->seen[1];
  EXPECT_EQ(conflict.outcome, Outcome::kConflict);
  // Kept across the wait, though the request's views died with Begin.
  EXPECT_EQ(conflict.method, "POST");
  EXPECT_EQ(conflict.route, "/orders");
  EXPECT_EQ(conflict.record_id, MakeRecordId(kScope, "key-1"));
  EXPECT_EQ(store_->claims, polls + 2);
  EXPECT_GT(conflict.store_latency, Duration::zero());
  EXPECT_GE(conflict.elapsed, conflict.store_latency);
  EXPECT_EQ(guard_->metrics().RequestLatencyCount(Outcome::kConflict), 1u);
}

TEST_F(GuardFeaturesTest, ObserversHearOfSwitchedOffRequests) {
  auto a = std::make_shared<RecordingObserver>("a");
  Rebuild(GuardOptions{}, nullptr, {a});
  guard_->SetEnabled(false);
  Send({.route = "/orders"});
  ASSERT_EQ(a->seen.size(), 1u);
  EXPECT_EQ(a->seen[0].outcome, Outcome::kUnprotected);
  EXPECT_FALSE(a->seen[0].record_id.has_value());
}

// --- Request-latency histogram ----------------------------------------------

TEST_F(GuardFeaturesTest, RequestHistogramCountsMatchTheStepOutcomes) {
  GuardOptions optional_key;
  optional_key.key_required = false;
  const auto optional_route = *Guard::MakeRouteOptions(optional_key);
  Send({.key = "a"});                                        // executed
  Send({.key = "a"});                                        // replayed
  Send({.key = "a", .body = "other"});                       // mismatch
  Send({.key = std::nullopt});                               // key_missing
  Send({.key = std::nullopt}, optional_route);               // unprotected
  Send({.key = ""});                                         // key_invalid
  Send({.key = "b"}, nullptr, Response{500, {}, "failed"});  // executed
  Decision held = Begin({.key = "c"});                       // executed, open
  ASSERT_EQ(held.action, Action::kExecute);

  const Metrics& m = guard_->metrics();
  // An executed request is timed when its claim ends.
  EXPECT_EQ(m.RequestLatencyCount(Outcome::kExecuted), 2u);
  held.claim.Finish(Created());
  for (int i = 0; i <= static_cast<int>(kLastStepOutcome); ++i) {
    const auto o = static_cast<Outcome>(i);
    EXPECT_EQ(m.RequestLatencyCount(o), m.Get(o)) << OutcomeName(o);
  }
  EXPECT_EQ(m.RequestLatencyCount(Outcome::kExecuted), 3u);
  EXPECT_EQ(m.RequestLatencyCount(Outcome::kReleased), 0u);

  const std::string text = m.RenderPrometheus();
  EXPECT_THAT(text, HasSubstr("# TYPE idem_request_duration_seconds "
                              "histogram\n"));
  EXPECT_THAT(text, HasSubstr("idem_request_duration_seconds_count{outcome="
                              "\"executed\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("idem_request_duration_seconds_bucket{outcome="
                              "\"replayed\",le=\"+Inf\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("idem_request_duration_seconds_count{outcome="
                              "\"key_missing\"} 1\n"));
  // Follow-ups are not requests of their own.
  EXPECT_THAT(text, Not(HasSubstr("idem_request_duration_seconds_count{"
                                  "outcome=\"released\"}")));
}

}  // namespace
}  // namespace idem
