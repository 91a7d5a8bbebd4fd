// Where idemctl writes: results on stdout, each error as one scrubbed line
// on stderr ("idemctl: ...") with the exit code it means.
//
// Thread-safety: used by one thread (Run's).

#ifndef IDEM_TOOLS_IDEMCTL_OUTPUT_H_
#define IDEM_TOOLS_IDEMCTL_OUTPUT_H_

#include <ostream>
#include <string_view>

#include "idem/error.h"
#include "secrets.h"

namespace idem::idemctl {

class Output {
 public:
  // The streams and `secrets` must outlive the Output.
  Output(std::ostream& out, std::ostream& err, const Secrets& secrets)
      : out_(out), err_(err), secrets_(secrets) {}

  std::ostream& out() { return out_; }

  // One line on stderr: `message` scrubbed, its control bytes and runs of
  // blanks folded into single spaces (a backend's message may carry
  // newlines and tabs). Returns `code`.
  int Fail(int code, std::string_view message);

  // Fail with "<doing>: <error>": exit 2 (usage) for kInvalidArgument, 3
  // (store error) for every other code.
  int StoreFailed(std::string_view doing, const Error& error);

 private:
  std::ostream& out_;
  std::ostream& err_;
  const Secrets& secrets_;
};

}  // namespace idem::idemctl

#endif  // IDEM_TOOLS_IDEMCTL_OUTPUT_H_
