// Keeps passwords out of idemctl's messages.
//
// A store URI's password may come back inside any message: OpenStore
// redacts the URIs it names, but a backend library's own text (libpq's
// conninfo errors, a CLI11 complaint echoing an argument) may quote it
// verbatim or percent-decoded. So every line idemctl prints on stderr goes
// through Secrets::Scrub, which replaces each known secret, wherever it
// appears, by "***".
//
// Thread-safety: plain value; Scrub is const.

#ifndef IDEM_TOOLS_IDEMCTL_SECRETS_H_
#define IDEM_TOOLS_IDEMCTL_SECRETS_H_

#include <string>
#include <string_view>
#include <vector>

namespace idem::idemctl {

class Secrets {
 public:
  // Learns the secrets `text` carries when it is (or contains, after an
  // `--opt=`) a URI: the userinfo password (between the first ':' after
  // "//" and the last '@', as RedactUri sees it), raw and percent-decoded,
  // and the value of any `password=` query parameter. Other text adds
  // nothing.
  void LearnFrom(std::string_view text);

  // `text` with every learned secret replaced by "***" (longest first, so
  // that one secret inside another leaves nothing behind).
  std::string Scrub(std::string_view text) const;

 private:
  void Add(std::string secret);

  std::vector<std::string> secrets_;
};

}  // namespace idem::idemctl

#endif  // IDEM_TOOLS_IDEMCTL_SECRETS_H_
