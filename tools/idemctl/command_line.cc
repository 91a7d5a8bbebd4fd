// idemctl's options. Numbers are checked as text before CLI11 converts
// them, since its conversion of an unsigned option takes "-5" as 2^64 - 5
// and "1e23" through a double: a --limit that purges everything is not a
// typo idemctl may accept.

#include "command_line.h"

#include <charconv>
#include <limits>
#include <string_view>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>

#include "idem/store_uri.h"
#include "idem/version.h"
#include "idemctl.h"

namespace idem::idemctl {
namespace {

// A whole decimal number in [min, max]: digits only, no sign, exponent or
// blank, no overflow.
CLI::Validator Number(std::uint64_t min, std::uint64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        std::uint64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [at, ec] = std::from_chars(text.data(), end, value);
        if (ec == std::errc() && at == end && value >= min && value <= max) {
          return {};
        }
        return "must be a whole number from " + std::to_string(min) + " to " +
               std::to_string(max) + ", got '" + text + "'";
      },
      "N in " + std::to_string(min) + ".." + std::to_string(max));
}

// Whether `port` is a TCP port: 1 to 65535, digits only.
bool IsPort(std::string_view port) {
  unsigned value = 0;
  const auto [at, ec] =
      std::from_chars(port.data(), port.data() + port.size(), value);
  return ec == std::errc() && at == port.data() + port.size() && value >= 1 &&
         value <= 65535;
}

// What every store URI must be before it is opened: a scheme, and a port
// from 1 to 65535 for every host it names (each of a redis-cluster:// list,
// whose commas StoreUri does not parse). The rest of the syntax and the
// parameters are the stores' to judge; their kInvalidArgument is exit 2
// too. The host list starts after the last '@', as RedactUri takes the
// password to end there.
CLI::Validator StoreUriCheck() {
  return CLI::Validator(
      [](std::string& uri) -> std::string {
        const std::size_t colon = uri.find(':');
        if (colon == std::string::npos || colon == 0) {
          return "'" + RedactUri(uri) +
                 "' is not a store URI (scheme:..., e.g. "
                 "sqlite:/path/file.db)";
        }
        if (uri.compare(colon, 3, "://") != 0) return {};
        std::string_view rest = std::string_view(uri).substr(colon + 3);
        const std::size_t at = rest.rfind('@');
        if (at != std::string_view::npos) rest.remove_prefix(at + 1);
        rest = rest.substr(0, rest.find_first_of("/?#"));
        while (!rest.empty()) {
          const std::size_t comma = rest.find(',');
          const std::string_view host = rest.substr(0, comma);
          rest = comma == std::string_view::npos ? std::string_view()
                                                 : rest.substr(comma + 1);
          const std::size_t close = host.starts_with('[') ? host.find(']') : 0;
          const std::size_t port_colon = close == std::string_view::npos
                                             ? std::string_view::npos
                                             : host.find(':', close);
          if (port_colon == std::string_view::npos) continue;
          if (!IsPort(host.substr(port_colon + 1))) {
            return "the port of '" + std::string(host) +
                   "' must be a number from 1 to 65535 (store URI '" +
                   RedactUri(uri) + "')";
          }
        }
        return {};
      },
      "URI");
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
      ->check(Number(1, std::size_t{1} << 20))
      ->needs(key);
  sub.add_option("--record-id", args.record_id,
                 "The record's id, 64 hex digits, as idem's log lines name "
                 "it (instead of --scope/--key)")
      ->excludes(key)
      ->excludes(scope);
}

}  // namespace

std::optional<int> ParseCommandLine(int argc, const char* const* argv,
                                    std::ostream& out, std::ostream& err,
                                    Output& output, Args& args) {
  CLI::App app(
      "idemctl: inspect, revoke and purge the records of an idem store.\n"
      "Exit status: 0 found/done, 1 no such record, 2 usage, 3 store error.",
      "idemctl");
  app.require_subcommand(1);
  // The idem library's version (idemctl is built with it); like --help it
  // needs no --store and no subcommand.
  app.set_version_flag("--version", "idemctl " + std::string(Version()),
                       "Print idemctl's version (the idem library's) and exit");
  app.fallthrough();
  app.add_option("--store", args.store,
                 "The store URI, as the application uses it (not memory:); "
                 "IDEM_STORE keeps a password out of the process list")
      ->envname("IDEM_STORE")
      ->required()
      ->check(StoreUriCheck());

  auto* inspect = app.add_subcommand(
      "inspect",
      "Print a live record: state, times, status, headers, body "
      "size (exit 1 when none, 3 when damaged)");
  AddKeyOptions(*inspect, args);
  inspect->add_flag("--body", args.body,
                    "Also the body: escaped text (\\xNN for bytes that are "
                    "not printable ASCII), base64 with --json");
  inspect->add_option("--response-keys", args.response_keys,
                      "The application's response key file (id:64-hex per "
                      "line, readable by its owner only): opens sealed "
                      "responses; without it inspect says the headers and "
                      "body are sealed");

  auto* revoke = app.add_subcommand(
      "revoke",
      "Delete a record whatever its state (also a damaged one): "
      "its key runs the handler again");
  AddKeyOptions(*revoke, args);

  auto* purge =
      app.add_subcommand("purge", "Delete the records expired by now");
  purge->add_option("--limit", args.limit, "Delete at most N records")
      ->check(Number(1, std::numeric_limits<std::uint64_t>::max()));

  auto* stats = app.add_subcommand(
      "stats", "Count records by state, where the store can count them");

  const std::vector<std::pair<CLI::App*, Command>> commands = {
      {inspect, Command::kInspect},
      {revoke, Command::kRevoke},
      {purge, Command::kPurge},
      {stats, Command::kStats}};
  for (const auto& [sub, command] : commands) {
    sub->add_flag("--json", args.json, "One JSON object on stdout");
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help, --version.
      app.exit(e, out, err);
      return kOk;
    }
    // CLI11 says "A subcommand is required" also when the word given is
    // not one: name it.
    bool any = false;
    for (const auto& entry : commands) any = any || entry.first->parsed();
    const std::vector<std::string> left = app.remaining();
    if (!any && !left.empty() && !left.front().starts_with('-')) {
      return output.Fail(kUsage, "unknown subcommand '" + left.front() +
                                     "' (inspect, revoke, purge or stats; "
                                     "see idemctl --help)");
    }
    return output.Fail(kUsage, std::string(e.what()) + " (see idemctl --help)");
  }
  for (const auto& [sub, command] : commands) {
    if (sub->parsed()) args.command = command;
  }
  return std::nullopt;
}

}  // namespace idem::idemctl
