// See redis_async_calls.h. Each call is a small state held by the
// callbacks of its requests (shared_ptr): the step that sent a request
// continues in its callback, on the loop thread.

#include "redis_async_calls.h"

#include <array>
#include <exception>
#include <new>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "redis_calls.h"
#include "redis_record.h"

namespace idem::redis {
namespace {

// The answer of a call: `done` once, whatever the steps do. A step that
// throws (out of memory) answers with the error instead of unwinding
// through the loop, unless it answered already.
template <typename T>
struct Answer {
  explicit Answer(StoreCallback<T> done) : done(std::move(done)) {}
  void operator()(Result<T> result) {
    if (answered) return;
    answered = true;
    done(std::move(result));
  }
  // Runs `step`, answering its exception.
  template <typename Step>
  void Guard(std::string_view display, Step&& step) {
    try {
      step();
    } catch (const std::bad_alloc&) {
      (*this)(MakeError(ErrorCode::kResourceExhausted,
                        std::string(display) + ": out of memory"));
    } catch (const std::exception& e) {
      (*this)(MakeError(ErrorCode::kInternal,
                        std::string(display) + ": exception: " + e.what()));
    }
  }
  StoreCallback<T> done;
  bool answered = false;
};

}  // namespace

struct AsyncCalls::ClaimCall {
  RecordId id;
  Fingerprint fp;
  TimePoint now;
  ClaimPlan plan;
  Deadline deadline;
  int attempt = 0;
  Answer<ClaimResult> answer;
};

struct AsyncCalls::CompleteCall {
  RecordId id;
  std::string key;
  Token token;
  std::shared_ptr<const Response> response;
  Deadline deadline;
  Answer<bool> answer;
};

AsyncCalls::AsyncCalls(Context context, Endpoint endpoint,
                       ConnectOptions options)
    : c_(std::move(context)),
      loop_(std::move(endpoint), std::move(options), c_.display) {}

AsyncCalls::~AsyncCalls() = default;

std::vector<OwnedCommand> AsyncCalls::WithWait(OwnedCommand command,
                                               bool waits) const {
  std::vector<OwnedCommand> commands;
  commands.reserve(waits ? 2 : 1);
  commands.push_back(std::move(command));
  if (waits) commands.push_back(Format(c_.runner->WaitCommand()));
  return commands;
}

void AsyncCalls::Send(std::vector<OwnedCommand> commands, bool waits,
                      Deadline deadline, Then then) {
  // Every command the calls send recognises its own earlier run (as the
  // synchronous path's resends=1): a broken connection resends once.
  loop_.Send(std::move(commands), deadline, /*resends=*/1,
             [this, waits,
              then = std::move(then)](Result<std::vector<Reply>> replies) {
               if (!replies) return then(tl::unexpected(replies.error()));
               then(c_.runner->Answer(std::move(*replies), waits));
             });
}

void AsyncCalls::RunCommand(const Command& command, bool wait,
                            Deadline deadline, Then then) {
  const bool waits = c_.runner->Waits(wait);
  Send(WithWait(Format(command), waits), waits, deadline, std::move(then));
}

void AsyncCalls::RunScript(const Script& script, const std::string& key,
                           std::span<const std::string_view> args, bool wait,
                           Deadline deadline, Then then) {
  const bool waits = c_.runner->Waits(wait);
  OwnedCommand call = Format(ScriptRunner::ScriptCall(script, key, args));
  std::vector<OwnedCommand> commands = WithWait(call, waits);
  loop_.Send(
      std::move(commands), deadline, /*resends=*/1,
      [this, &script, waits, deadline, call = std::move(call),
       then = std::move(then)](Result<std::vector<Reply>> replies) mutable {
        if (replies && IsError((*replies)[0].get(), "NOSCRIPT")) {
          // A server restarted, failed over or flushed forgets scripts.
          return Send(WithWait(EvalInstead(call, script.source), waits), waits,
                      deadline, std::move(then));
        }
        if (!replies) return then(tl::unexpected(replies.error()));
        then(c_.runner->Answer(std::move(*replies), waits));
      });
}

void AsyncCalls::Claim(const RecordId& id, std::string key,
                       const Fingerprint& fp, TimePoint now, Duration ttl,
                       Duration lock_timeout, StoreCallback<ClaimResult> done) {
  auto call = std::make_shared<ClaimCall>(
      ClaimCall{.id = id,
                .fp = fp,
                .now = now,
                .plan = PlanClaim(std::move(key), fp, now, ttl, lock_timeout),
                .deadline = AsyncLoop::SteadyClock::now() + c_.timeout,
                .answer = Answer<ClaimResult>(std::move(done))});
  ClaimSet(std::move(call));
}

void AsyncCalls::ClaimSet(std::shared_ptr<ClaimCall> call) {
  ClaimCall& c = *call;
  RunCommand(
      c.plan.Set(), /*wait=*/true, c.deadline,
      [this, call](Result<Reply> reply) {
        call->answer.Guard(c_.display, [&] {
          if (!SetRefusedAsFull(reply)) {
            return ClaimFound(
                call, FoundValue(call->id, c_.display, std::move(reply)));
          }
          // A full server: read the value in the way instead.
          const std::string& key = call->plan.key;
          RunCommand({"GET", key}, /*wait=*/false, call->deadline,
                     [this, call, full = reply.error()](Result<Reply> got) {
                       call->answer.Guard(c_.display, [&] {
                         auto found =
                             FoundValue(call->id, c_.display, std::move(got));
                         if (found && !*found) {
                           return call->answer(tl::unexpected(full));
                         }
                         ClaimFound(call, std::move(found));
                       });
                     });
        });
      });
}

void AsyncCalls::ClaimFound(std::shared_ptr<ClaimCall> call,
                            Result<std::optional<std::string>> found) {
  ClaimCall& c = *call;
  if (!found) return c.answer(tl::unexpected(std::move(found.error())));
  std::optional<Result<ClaimResult>> answer;
  Record existing;
  switch (AfterSet(c.id, c_.display, c.plan, *found, c.fp, c.now, answer,
                   existing)) {
    case ClaimStep::kAcquired:
      return c.answer(Acquired(*c_.memo, c.id, c.plan, /*takeover=*/false));
    case ClaimStep::kAnswered:
      return c.answer(std::move(*answer));
    case ClaimStep::kReclaim:
      break;
  }
  if (c_.reclaim_hook != nullptr && *c_.reclaim_hook) {
    (*c_.reclaim_hook)(c.attempt);
  }
  const bool takeover = !existing.Expired(c.now);
  const auto args = ReclaimArgs(c.plan, **found);
  RunScript(ReclaimScript(), c.plan.key, args, /*wait=*/true, c.deadline,
            [this, call, takeover](Result<Reply> reply) {
              call->answer.Guard(c_.display, [&] {
                if (!reply) {
                  return call->answer(tl::unexpected(reply.error()));
                }
                if (Reclaimed(**reply)) {
                  return call->answer(
                      Acquired(*c_.memo, call->id, call->plan, takeover));
                }
                if (++call->attempt < c_.claim_attempts) {
                  return ClaimSet(call);
                }
                call->answer(LostEveryRace(call->now));
              });
            });
}

void AsyncCalls::Complete(const RecordId& id, std::string key,
                          const Token& token,
                          std::shared_ptr<const Response> response,
                          StoreCallback<bool> done) {
  auto call = std::make_shared<CompleteCall>(
      CompleteCall{.id = id,
                   .key = std::move(key),
                   .token = token,
                   .response = std::move(response),
                   .deadline = AsyncLoop::SteadyClock::now() + c_.timeout,
                   .answer = Answer<bool>(std::move(done))});
  std::optional<ClaimFields> fields = c_.memo->Take(token);
  if (fields && fields->id == id)
    return CompleteWrite(std::move(call), *fields);
  // A claim this store did not make (or forgot): read the record first.
  RunCommand({"GET", call->key}, /*wait=*/false, call->deadline,
             [this, call](Result<Reply> reply) {
               call->answer.Guard(c_.display, [&] {
                 auto value =
                     FoundValue(call->id, c_.display, std::move(reply));
                 if (!value) {
                   return call->answer(tl::unexpected(value.error()));
                 }
                 if (!*value) return call->answer(c_.vanished(call->id));
                 auto record = DecodeValue(call->id, c_.display, **value);
                 if (!record) {
                   return call->answer(tl::unexpected(record.error()));
                 }
                 auto held = HeldFields(call->id, *record, call->token);
                 if (!held) return call->answer(false);
                 CompleteWrite(call, *held);
               });
             });
}

void AsyncCalls::CompleteWrite(std::shared_ptr<CompleteCall> call,
                               const ClaimFields& fields) {
  CompleteCall& c = *call;
  // The call id lets a resend of this call recognise its own write.
  const std::string value = CompletionValue(fields, c.token, *c.response);
  const std::array<std::string_view, 2> args = {c.token.view(), value};
  RunScript(CompleteScript(), c.key, args, /*wait=*/true, c.deadline,
            [this, call](Result<Reply> reply) {
              call->answer.Guard(c_.display, [&] {
                if (!reply) {
                  return call->answer(tl::unexpected(reply.error()));
                }
                switch (VerdictOf(**reply)) {
                  case CompleteVerdict::kCompleted:
                    return call->answer(true);
                  case CompleteVerdict::kVanished:
                    return call->answer(c_.vanished(call->id));
                  case CompleteVerdict::kNotHeld:
                    return call->answer(false);
                }
              });
            });
}

}  // namespace idem::redis
