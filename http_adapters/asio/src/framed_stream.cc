#include "idem/asio/framed_stream.h"

#include <string>

namespace idem::asio {
namespace {

class Category : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "idem.framing"; }
  std::string message(int) const override {
    return "the request breaks the server's framing rules";
  }
};

}  // namespace

const boost::system::error_category& FramingErrorCategory() {
  static const Category category;
  return category;
}

}  // namespace idem::asio
