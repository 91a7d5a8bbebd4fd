#include "idem/version.h"

namespace idem {

// Compiled into the library, so it reports the library's version even to a
// program built against other headers.
std::string_view Version() { return IDEM_VERSION; }

}  // namespace idem
