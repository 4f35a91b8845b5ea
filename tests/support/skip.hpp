// A unit test case that cannot check anything here (no root, no such hardware) calls
// rpcie::test::skip(reason) and returns. The test executable (tests/support/doctest_main.cc)
// then exits 77 (meson: skipped) with "SKIP: reason" on stderr when nothing failed, so a
// check never passes without having run; under CI=true, where every capability is present,
// it fails instead (as tests/integration/lib.sh's skip does).
// Thread-safety: skip() may be called from any thread.
#pragma once

#include <string>

namespace rpcie::test {

void skip(const std::string& reason);

}  // namespace rpcie::test
