// The Beast adapter's routes are core's (idem/route.h): a route names its
// method as a string ("POST"); IdempotentHandler::Protect takes a verb.

#ifndef IDEM_BEAST_ROUTE_H_
#define IDEM_BEAST_ROUTE_H_

#include "idem/route.h"

namespace idem::beast {

using ::idem::Route;
using ::idem::RoutePattern;
using ::idem::RouteTable;

}  // namespace idem::beast

#endif  // IDEM_BEAST_ROUTE_H_
