// idemctl's four subcommands over the Store SPI. Design notes:
//  - The key is taken as the client sent it in its Idempotency-Key header
//    (bare or as a quoted sf-string: both name the same key) and parsed
//    with ParseIdempotencyKey, as the Guard parses it, so that an operator
//    can paste the header value from a request log. A value the Guard would
//    have refused (400) cannot name a record: a usage error, not "absent".
//  - Nothing a store returns reaches stderr unscrubbed (secrets.h).
//  - The options and their checks are in command_line.cc; the store is
//    opened without creating or migrating anything (open_existing.h), so
//    idemctl changes a store only when told to (revoke, purge).

#include "idemctl.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "command_line.h"
#include "idem/error.h"
#include "idem/idempotency_key.h"
#include "idem/record.h"
#include "idem/record_id.h"
#include "idem/response_keys.h"
#include "idem/store.h"
#include "open_existing.h"
#include "output.h"
#include "render.h"
#include "secrets.h"
#include "stored_body.h"

namespace idem::idemctl {
namespace {

// PurgeExpired's batch: bounds each call's work (and each SQL transaction)
// while keeping the number of round trips small.
constexpr std::size_t kPurgeBatch = 1000;

// The record id args name, or fails with the exit code to return.
std::optional<RecordId> ResolveId(const Args& args, Output& output, int* code) {
  if (!args.record_id.empty()) {
    if (!IsRecordIdHex(args.record_id)) {
      *code = output.Fail(kUsage,
                          "--record-id must be 64 hex digits (the id idem's "
                          "log lines name), got " +
                              std::to_string(args.record_id.size()) +
                              " characters");
      return std::nullopt;
    }
    RecordId id;
    for (std::size_t i = 0; i < RecordId::kSize; ++i) {
      id.bytes[i] = static_cast<std::uint8_t>(
          std::stoi(args.record_id.substr(2 * i, 2), nullptr, 16));
    }
    return id;
  }
  if (args.key.empty()) {
    *code = output.Fail(kUsage, "give --key (with --scope) or --record-id");
    return std::nullopt;
  }
  auto key = ParseIdempotencyKey(args.key, args.max_key_length);
  if (!key) {
    *code = output.Fail(kUsage,
                        "--key is not a key the server accepts (" +
                            std::string(KeyErrorName(key.error())) +
                            "): " + std::string(KeyErrorDetail(key.error())) +
                            " Give the Idempotency-Key header's value as the "
                            "client sent it");
    return std::nullopt;
  }
  if (args.method.empty()) return MakeRecordId(args.scope, *key);
  if (!args.path.starts_with('/')) {
    *code = output.Fail(kUsage,
                        "--path must be the route pattern the application "
                        "protected, starting with '/', e.g. /orders/{id}");
    return std::nullopt;
  }
  std::string method = args.method;
  for (char& c : method) {
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return MakeRecordId(args.scope, OperationName(method, args.path), *key);
}

int Inspect(const Args& args, const RecordId& id, Store& store,
            const ResponseKeyRing* keys, Output& output) {
  const TimePoint now = std::chrono::system_clock::now();
  auto record = store.Inspect(id, now);
  if (!record) {
    if (record.error().code() == ErrorCode::kDataLoss) {
      return output.Fail(
          kStoreError,
          "record " + id.ToHex() + " is damaged (" + record.error().ToString() +
              "); remove it with: idemctl revoke --record-id " + id.ToHex());
    }
    return output.StoreFailed("inspect failed", record.error());
  }
  if (!*record) {
    return output.Fail(kNotFound, "no live record " + id.ToHex());
  }
  const Record& r = **record;
  const bool completed = r.state == RecordState::kCompleted && r.response;
  ShownResponse shown;
  if (completed) {
    auto opened = ShowStoredResponse(r, id, keys);
    if (!opened) {
      return output.Fail(
          kStoreError,
          "record " + id.ToHex() + " is damaged (" + opened.error().ToString() +
              "); remove it with: idemctl revoke --record-id " + id.ToHex());
    }
    shown = std::move(*opened);
  }
  std::ostream& out = output.out();
  if (args.json) {
    nlohmann::json j;
    j["record_id"] = id.ToHex();
    j["state"] = std::string(RecordStateName(r.state));
    j["expires_at"] = IsoUtc(r.expires_at);
    j["locked_until"] = IsoUtc(r.locked_until);
    j["locked"] = r.state == RecordState::kInProgress && r.locked_until > now;
    if (completed) {
      const Response& response = shown.response;
      j["status"] = response.status;
      j["sealed"] = shown.key_id.has_value();
      if (shown.key_id) j["key_id"] = *shown.key_id;
      j["compressed"] = shown.compressed;
      j["stored_bytes"] = shown.stored_bytes;
      if (!shown.sealed_unread) {
        nlohmann::json headers = nlohmann::json::array();
        for (const auto& [name, value] : response.headers) {
          headers.push_back({name, value});
        }
        j["headers"] = headers;
        j["body_size"] = response.body.size();
        if (args.body) j["body_base64"] = Base64(response.body);
      }
    }
    // A header that is not UTF-8 must not abort the dump; the exact bytes
    // are in the text output's escapes.
    out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
        << '\n';
    return kOk;
  }
  out << "record_id: " << id.ToHex() << '\n'
      << "state: " << RecordStateName(r.state) << '\n'
      << "expires_at: " << IsoUtc(r.expires_at) << '\n'
      << "locked_until: " << IsoUtc(r.locked_until) << '\n';
  if (r.state == RecordState::kInProgress) {
    out << "locked: " << (r.locked_until > now ? "yes" : "no, timed out")
        << '\n';
  }
  if (completed) {
    const Response& response = shown.response;
    out << "status: " << response.status << '\n';
    if (shown.key_id) out << "sealed: key " << *shown.key_id << '\n';
    if (shown.key_id || shown.compressed) {
      out << "stored_bytes: " << shown.stored_bytes
          << (shown.compressed ? " (zstd)" : "") << '\n';
    }
    if (shown.sealed_unread) {
      out << "headers and body: sealed (pass --response-keys FILE to read "
             "them)\n";
      return kOk;
    }
    for (const auto& [name, value] : response.headers) {
      out << "header: " << Escape(name) << ": " << Escape(value) << '\n';
    }
    out << "body_size: " << response.body.size() << '\n';
    if (args.body) out << "body: \"" << Escape(response.body) << "\"\n";
  }
  return kOk;
}

int Revoke(const Args& args, const RecordId& id, Store& store, Output& output) {
  auto revoked = store.Revoke(id);
  if (!revoked) return output.StoreFailed("revoke failed", revoked.error());
  if (!*revoked) return output.Fail(kNotFound, "no record " + id.ToHex());
  if (args.json) {
    output.out()
        << nlohmann::json{{"record_id", id.ToHex()}, {"revoked", true}}.dump()
        << '\n';
  } else {
    output.out() << "revoked record " << id.ToHex() << '\n';
  }
  return kOk;
}

int Purge(const Args& args, Store& store, Output& output) {
  // One `now` for the whole run, so the loop ends: only records expired
  // when it started are deleted.
  const TimePoint now = std::chrono::system_clock::now();
  std::uint64_t purged = 0;
  for (;;) {
    std::uint64_t want = kPurgeBatch;
    if (args.limit != 0)
      want = std::min<std::uint64_t>(want, args.limit - purged);
    if (want == 0) break;
    auto n = store.PurgeExpired(now, static_cast<std::size_t>(want));
    if (!n) {
      return output.StoreFailed(
          "purge failed after " + std::to_string(purged) + " records",
          n.error());
    }
    purged += *n;
    if (*n < want) break;  // Nothing expired is left.
  }
  if (args.json) {
    output.out() << nlohmann::json{{"purged", purged}}.dump() << '\n';
  } else {
    output.out() << "purged " << purged << " expired records\n";
  }
  return kOk;
}

int Stats(const Args& args, Store& store, Output& output) {
  auto stats = store.Stats(std::chrono::system_clock::now());
  if (!stats) return output.StoreFailed("stats failed", stats.error());
  std::ostream& out = output.out();
  if (!*stats) {
    // Not an error: the store keeps no counts and cannot cheaply read
    // every record (exit 0; --json says "counted": false).
    if (args.json) {
      out << nlohmann::json{{"counted", false}}.dump() << '\n';
    } else {
      out << "this store cannot count its records\n";
    }
    return kOk;
  }
  const StoreStats& s = **stats;
  if (args.json) {
    out << nlohmann::json{{"counted", true},
                          {"in_progress", s.in_progress},
                          {"completed", s.completed},
                          {"expired", s.expired},
                          {"damaged", s.damaged}}
               .dump()
        << '\n';
  } else {
    out << "in_progress: " << s.in_progress << '\n'
        << "completed: " << s.completed << '\n'
        << "expired: " << s.expired << '\n'
        << "damaged: " << s.damaged << '\n';
  }
  return kOk;
}

}  // namespace

int Run(int argc, const char* const* argv, std::ostream& out,
        std::ostream& err) {
  Secrets secrets;
  for (int i = 1; i < argc; ++i) secrets.LearnFrom(argv[i]);
  if (const char* env = std::getenv("IDEM_STORE")) secrets.LearnFrom(env);
  Output output(out, err, secrets);

  Args args;
  if (auto done = ParseCommandLine(argc, argv, out, err, output, args)) {
    return *done;
  }

  try {
    int code = kOk;
    // Usage errors first, before any connection is tried.
    std::optional<RecordId> id;
    if (args.command == Command::kInspect || args.command == Command::kRevoke) {
      id = ResolveId(args, output, &code);
      if (!id) return code;
    }
    // The key file is read before the store is opened: a bad one is a usage
    // error (exit 2), named by its flag and line, never echoing a key.
    std::shared_ptr<const ResponseKeyRing> keys;
    if (!args.response_keys.empty()) {
      auto loaded = ResponseKeyRing::LoadFile(args.response_keys);
      if (!loaded) {
        return output.Fail(kUsage,
                           "--response-keys: " + loaded.error().message());
      }
      keys = std::move(*loaded);
    }
    auto store = OpenExisting(args.store, output, &code);
    if (!store) return code;
    switch (args.command) {
      case Command::kInspect:
        return Inspect(args, *id, **store, keys.get(), output);
      case Command::kRevoke:
        return Revoke(args, *id, **store, output);
      case Command::kPurge:
        return Purge(args, **store, output);
      case Command::kStats:
        break;
    }
    return Stats(args, **store, output);
  } catch (const std::exception& e) {
    return output.Fail(kStoreError,
                       std::string("unexpected error: ") + e.what());
  }
}

}  // namespace idem::idemctl
