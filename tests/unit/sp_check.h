/* Shared main for the check unit tests: TAP on stdout, so that meson and
   scripts/tally count every named test on its own.  */
#ifndef SP_CHECK_H
#define SP_CHECK_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline int
sp_check_run (Suite *suite)
{
  SRunner *runner = srunner_create (suite);
  int failed;

  srunner_set_tap (runner, "-");
  srunner_run_all (runner, CK_SILENT);
  failed = srunner_ntests_failed (runner);
  srunner_free (runner);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#define SP_CHECK_MAIN(make_suite)                                                                            \
  int main (void)                                                                                            \
  {                                                                                                          \
    return sp_check_run (make_suite ());                                                                     \
  }

/* For programs that need root: without it, the whole program skips and says
   why (TAP "1..0 # SKIP").  */
#define SP_CHECK_MAIN_AS_ROOT(make_suite, why)                                                               \
  int main (void)                                                                                            \
  {                                                                                                          \
    if (geteuid () != 0)                                                                                     \
      {                                                                                                      \
        printf ("1..0 # SKIP needs root: %s\n", why);                                                        \
        return EXIT_SUCCESS;                                                                                 \
      }                                                                                                      \
    return sp_check_run (make_suite ());                                                                     \
  }

#endif
