// idemctl's command line (CLI11) and its four subcommands over the Store
// SPI. Design notes:
//  - The key is taken as the client sent it in its Idempotency-Key header
//    (bare or as a quoted sf-string: both name the same key) and parsed
//    with ParseIdempotencyKey, as the Guard parses it, so that an operator
//    can paste the header value from a request log. A value the Guard would
//    have refused (400) cannot name a record: a usage error, not "absent".
//  - Nothing a store returns reaches stderr unscrubbed (secrets.h).
//  - The sweeper is off and embedded stores must already exist: idemctl
//    changes a store only when told to (revoke, purge).

#include "idemctl.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "idem/error.h"
#include "idem/idempotency_key.h"
#include "idem/open_store.h"
#include "idem/record.h"
#include "idem/record_id.h"
#include "idem/store.h"
#include "idem/store_uri.h"
#include "render.h"
#include "secrets.h"

namespace idem::idemctl {
namespace {

// PurgeExpired's batch: bounds each call's work (and each SQL transaction)
// while keeping the number of round trips small.
constexpr std::size_t kPurgeBatch = 1000;

struct Args {
  std::string store;
  // Which record: a key (with its scope and, for per-operation keys, its
  // method and route pattern) or a record id.
  std::string scope;
  std::string key;
  std::string method;
  std::string path;
  std::string record_id;
  std::size_t max_key_length = kDefaultMaxKeyLength;
  bool json = false;
  bool body = false;
  std::uint64_t limit = 0;  // 0: no limit.
};

class Output {
 public:
  Output(std::ostream& out, std::ostream& err, const Secrets& secrets)
      : out_(out), err_(err), secrets_(secrets) {}

  std::ostream& out() { return out_; }

  // One line on stderr, scrubbed; returns `code`.
  int Fail(int code, std::string_view message) {
    // One line: a backend's message may carry newlines and tabs.
    std::string line;
    for (const char c : secrets_.Scrub(message)) {
      const bool blank = static_cast<unsigned char>(c) < 0x20 || c == ' ';
      if (blank && (line.empty() || line.back() == ' ')) continue;
      line += blank ? ' ' : c;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    err_ << "idemctl: " << line << '\n';
    return code;
  }

  int StoreFailed(std::string_view doing, const Error& error) {
    const int code =
        error.code() == ErrorCode::kInvalidArgument ? kUsage : kStoreError;
    return Fail(code, std::string(doing) + ": " + error.ToString());
  }

 private:
  std::ostream& out_;
  std::ostream& err_;
  const Secrets& secrets_;
};

// `uri` without its `sweep_interval_s` query parameter: idemctl must not
// start the application's sweeper.
std::string WithoutSweeper(std::string_view uri) {
  const auto q = uri.find('?');
  if (q == std::string_view::npos) return std::string(uri);
  const auto hash = uri.find('#', q);
  const std::string_view query =
      uri.substr(q + 1, hash == std::string_view::npos ? std::string_view::npos
                                                       : hash - q - 1);
  std::string kept;
  std::size_t start = 0;
  while (start <= query.size()) {
    auto end = query.find('&', start);
    if (end == std::string_view::npos) end = query.size();
    const std::string_view param = query.substr(start, end - start);
    const std::string_view name = param.substr(0, param.find('='));
    if (!param.empty() && name != "sweep_interval_s") {
      if (!kept.empty()) kept += '&';
      kept += param;
    }
    start = end + 1;
  }
  std::string out(uri.substr(0, q));
  if (!kept.empty()) out += "?" + kept;
  if (hash != std::string_view::npos) out += uri.substr(hash);
  return out;
}

// Opens the store of args.store, or fails with the exit code to return.
Result<std::unique_ptr<Store>> Open(const Args& args, Output& output,
                                    int* code) {
  auto fail = [&](int c, const std::string& message) {
    *code = output.Fail(c, message);
    return MakeError(ErrorCode::kInvalidArgument, message);
  };
  // The scheme as text: a redis-cluster:// URI with several hosts is not
  // one StoreUri::Parse reads (OpenStore rewrites it first).
  std::string scheme = args.store.substr(0, args.store.find(':'));
  for (char& c : scheme) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (scheme == "memory") {
    return fail(kUsage,
                "a memory: store lives inside its application's process; "
                "idemctl cannot reach it (use a store the application shares: "
                "rocksdb, sqlite, postgresql, redis)");
  }
  // An embedded store that does not exist yet would be created empty, and
  // every lookup would then answer "no such record".
  if (scheme == "sqlite" || scheme == "rocksdb") {
    auto parsed = StoreUri::Parse(args.store);
    if (!parsed) return fail(kUsage, parsed.error().message());
    std::error_code ec;
    if (!parsed->path().empty() &&
        !std::filesystem::exists(parsed->path(), ec)) {
      return fail(kStoreError, "cannot open the store " + parsed->redacted() +
                                   ": " + parsed->path() + " does not exist");
    }
  }
  StoreOptions options;
  options.sweep_interval = Duration::zero();
  auto store = OpenStore(WithoutSweeper(args.store), options);
  if (!store) {
    *code = output.StoreFailed("cannot open the store", store.error());
    return tl::unexpected(store.error());
  }
  return store;
}

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
            Output& output) {
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
  std::ostream& out = output.out();
  if (args.json) {
    nlohmann::json j;
    j["record_id"] = id.ToHex();
    j["state"] = std::string(RecordStateName(r.state));
    j["expires_at"] = IsoUtc(r.expires_at);
    j["locked_until"] = IsoUtc(r.locked_until);
    j["locked"] = r.state == RecordState::kInProgress && r.locked_until > now;
    if (completed) {
      const Response& response = *r.response;
      j["status"] = response.status;
      nlohmann::json headers = nlohmann::json::array();
      for (const auto& [name, value] : response.headers) {
        headers.push_back({name, value});
      }
      j["headers"] = headers;
      j["body_size"] = response.body.size();
      if (args.body) j["body_base64"] = Base64(response.body);
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
    const Response& response = *r.response;
    out << "status: " << response.status << '\n';
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
                          {"expired", s.expired}}
               .dump()
        << '\n';
  } else {
    out << "in_progress: " << s.in_progress << '\n'
        << "completed: " << s.completed << '\n'
        << "expired: " << s.expired << '\n';
  }
  return kOk;
}

constexpr char kKeyHelp[] =
    "The Idempotency-Key header's value as the client sent it: bare (abc) or "
    "quoted (\"abc\"), both the same key; parsed as the server parses it";
constexpr char kScopeHelp[] =
    "The scope the application resolved for the client (idem-demo: the "
    "Bearer token's text); omit it for anonymous requests";
constexpr char kMethodHelp[] =
    "With --path: the HTTP method of a route protected with per-operation "
    "keys (key_per_operation), e.g. POST (uppercased)";
constexpr char kPathHelp[] =
    "With --method: the ROUTE PATTERN the application protected, e.g. "
    "/orders/{id}, not the request's path";

void AddKeyOptions(CLI::App& sub, Args& args) {
  auto* scope = sub.add_option("--scope", args.scope, kScopeHelp);
  auto* key = sub.add_option("--key", args.key, kKeyHelp);
  auto* method = sub.add_option("--method", args.method, kMethodHelp);
  auto* path = sub.add_option("--path", args.path, kPathHelp);
  method->needs(path);
  path->needs(method);
  scope->needs(key);
  method->needs(key);
  sub.add_option("--max-key-length", args.max_key_length,
                 "The application's max_key_length (default 255)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
      ->needs(key);
  sub.add_option("--record-id", args.record_id,
                 "The record's id, 64 hex digits, as idem's log lines name "
                 "it (instead of --scope/--key)")
      ->excludes(key)
      ->excludes(scope);
}

}  // namespace

int Run(int argc, const char* const* argv, std::ostream& out,
        std::ostream& err) {
  Secrets secrets;
  for (int i = 1; i < argc; ++i) secrets.LearnFrom(argv[i]);
  if (const char* env = std::getenv("IDEM_STORE")) secrets.LearnFrom(env);
  Output output(out, err, secrets);

  Args args;
  CLI::App app(
      "idemctl: inspect, revoke and purge the records of an idem store.\n"
      "Exit status: 0 found/done, 1 no such record, 2 usage, 3 store error.",
      "idemctl");
  app.require_subcommand(1);
  app.fallthrough();
  app.add_option("--store", args.store,
                 "The store URI, as the application uses it (not memory:); "
                 "IDEM_STORE keeps a password out of the process list")
      ->envname("IDEM_STORE")
      ->required();

  auto* inspect = app.add_subcommand(
      "inspect",
      "Print a live record: state, times, status, headers, body "
      "size (exit 1 when none, 3 when damaged)");
  AddKeyOptions(*inspect, args);
  inspect->add_flag("--body", args.body,
                    "Also the body: escaped text (\\xNN for bytes that are "
                    "not printable ASCII), base64 with --json");

  auto* revoke = app.add_subcommand(
      "revoke",
      "Delete a record whatever its state (also a damaged one): "
      "its key runs the handler again");
  AddKeyOptions(*revoke, args);

  auto* purge =
      app.add_subcommand("purge", "Delete the records expired by now");
  purge->add_option("--limit", args.limit, "Delete at most N records")
      ->check(CLI::Range(std::uint64_t{1},
                         std::numeric_limits<std::uint64_t>::max()));

  auto* stats = app.add_subcommand(
      "stats", "Count records by state, where the store can count them");

  for (CLI::App* sub : {inspect, revoke, purge, stats}) {
    sub->add_flag("--json", args.json, "One JSON object on stdout");
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help.
      app.exit(e, out, err);
      return kOk;
    }
    return output.Fail(kUsage, std::string(e.what()) + " (see idemctl --help)");
  }

  try {
    int code = kOk;
    // Usage errors first, before any connection is tried.
    std::optional<RecordId> id;
    if (inspect->parsed() || revoke->parsed()) {
      id = ResolveId(args, output, &code);
      if (!id) return code;
    }
    auto store = Open(args, output, &code);
    if (!store) return code;
    if (inspect->parsed()) return Inspect(args, *id, **store, output);
    if (revoke->parsed()) return Revoke(args, *id, **store, output);
    if (purge->parsed()) return Purge(args, **store, output);
    return Stats(args, **store, output);
  } catch (const std::exception& e) {
    return output.Fail(kStoreError,
                       std::string("unexpected error: ") + e.what());
  }
}

}  // namespace idem::idemctl
