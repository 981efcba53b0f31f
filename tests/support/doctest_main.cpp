// main() of the doctest unit tests (luaflame_add_unit_test): doctest's own,
// plus one rule. CTest runs each case alone, selected by name
// (--test-case=NAME); a name CMake split or mangled (a ';' in it) matches no
// case, and doctest then exits 0 having run nothing: a pass that checked
// nothing. Here a run whose filters selected no test case fails instead.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {

unsigned g_selected = 0;
bool g_ran = false;

// A listener that only counts the cases that passed the filters.
struct SelectedCount : doctest::IReporter {
  explicit SelectedCount(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& s) override {
    g_selected = s.numTestCasesPassingFilters;
    g_ran = true;
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

REGISTER_LISTENER("luaflame_selected_count", 1, SelectedCount);

int main(int argc, char** argv) {
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  if (ctx.shouldExit() || !g_ran) return rc;  // --list-test-cases, --help, ...
  if (rc == 0 && g_selected == 0) {
    std::fprintf(stderr, "no test case matched the filters: nothing ran (a ';' in a name?)\n");
    return 1;
  }
  return rc;
}
