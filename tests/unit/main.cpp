// The unit tests' main: Catch2's session (tests/catch_session.cpp), no MPI.
#include "catch_session.hpp"

int main(int argc, char** argv) {
  return strider::testing::run_catch_session(argc, argv);
}
