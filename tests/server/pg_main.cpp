// main() of the programs that need PostgreSQL (pg_harness.hpp).
#include "pg_harness.hpp"

int main(int argc, char** argv) {
  return lft::run_pg_tests(argc, argv);
}
