// idemctl: see idemctl.h and docs/OPERATIONS.md.

#include <iostream>

#include "idemctl.h"

int main(int argc, char** argv) {
  return idem::idemctl::Run(argc, argv, std::cout, std::cerr);
}
