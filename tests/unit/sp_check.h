/* Shared main for the check unit tests: TAP on stdout, so that meson and
   scripts/tally count every named test on its own.  */
#ifndef SP_CHECK_H
#define SP_CHECK_H

#include <check.h>
#include <stdlib.h>

#define SP_CHECK_MAIN(make_suite)                                                                            \
  int main (void)                                                                                            \
  {                                                                                                          \
    SRunner *runner = srunner_create (make_suite ());                                                        \
    int failed;                                                                                              \
    srunner_set_tap (runner, "-");                                                                           \
    srunner_run_all (runner, CK_SILENT);                                                                     \
    failed = srunner_ntests_failed (runner);                                                                 \
    srunner_free (runner);                                                                                   \
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;                                                        \
  }

#endif
