#include "command_line.h"

#include <iostream>
#include <string>

namespace idem::demo {

void AddLockFlags(boost::program_options::options_description& flags,
                  LockFlagsText& text, const LockFlagsWords& words) {
  namespace po = boost::program_options;
  const std::string work(words.work);
  auto max = [](const DurationFlag& flag) {
    return DurationFlagText(flag, flag.max);
  };
  // clang-format off
  flags.add_options()
      ("ttl", po::value(&text.ttl)->value_name("SECONDS"),
       ("how long a key's record lives, at most " + max(TtlFlag()) +
        " = 365 days (default " + text.ttl + ")").c_str())
      ("lock-timeout", po::value(&text.lock_timeout)->value_name("SECONDS"),
       ("how long an in-progress " + work + " blocks its key, fractions "
        "allowed (0.3), at most " + max(LockTimeoutFlag()) +
        " and at most --ttl (default " + text.lock_timeout + ")").c_str())
      ("lock-renewal", po::value(&text.lock_renewal)->value_name("SECONDS"),
       ("renew an in-progress " + work + "'s lock this often while its "
        "handler runs, so a slow handler is not taken over; fractions "
        "allowed (0.3), below --lock-timeout; 0 = off (default " +
        text.lock_renewal + ")").c_str())
      ("lock-wait", po::value(&text.lock_wait)->value_name("MILLISECONDS"),
       ("how long a duplicate waits for the first " + work + " before " +
        std::string(words.busy_answer) + ", at most " + max(LockWaitFlag()) +
        " (default " + text.lock_wait + ")").c_str());
  // clang-format on
}

int BadFlags(std::string_view program, std::string_view message) {
  std::cerr << program << ": " << message << "\n"
            << "Try '" << program << " --help'." << std::endl;
  return kExitBadFlags;
}

std::optional<int> ParseCommandLine(
    int argc, char** argv,
    const boost::program_options::options_description& flags,
    std::string_view program, std::string_view version_line,
    boost::program_options::variables_map& vm) {
  namespace po = boost::program_options;
  try {
    po::store(po::command_line_parser(argc, argv).options(flags).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return BadFlags(program, e.what());
  }
  if (vm.count("help")) {
    std::cout << flags << std::endl;
    return 0;
  }
  if (vm.count("version")) {
    std::cout << version_line << std::endl;
    return 0;
  }
  return std::nullopt;
}

}  // namespace idem::demo
