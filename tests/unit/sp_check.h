/* Shared main for the check unit tests: TAP on stdout, so that meson and
   scripts/tally count every named test on its own.  */
#ifndef SP_CHECK_H
#define SP_CHECK_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"

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

/* rel under $SP_TEST_DATA (tests/data, set by tests/meson.build); the
   caller frees it.  */
static inline char *
sp_check_data_path (const char *rel)
{
  const char *data = getenv ("SP_TEST_DATA");
  size_t size;
  char *path;

  ck_assert_msg (data != NULL, "SP_TEST_DATA is not set");
  size = strlen (data) + 1 + strlen (rel) + 1;
  path = malloc (size);
  ck_assert_ptr_nonnull (path);
  snprintf (path, size, "%s/%s", data, rel);
  return path;
}

/* A parser's refusal, as the unit tests check it: ret is -1, the parser
   left its output NULL, and the message holds fragment and, when absent is
   not NULL, does not hold absent (a value the message must not echo).
   Releases *err.  */
static inline void
sp_check_refused (int ret, const void *out, sp_error_t *err, const char *fragment, const char *absent)
{
  const char *msg;

  ck_assert_int_eq (ret, -1);
  ck_assert_ptr_null (out);
  msg = sp_error_message (*err);
  ck_assert_msg (strstr (msg, fragment) != NULL, "message \"%s\" lacks \"%s\"", msg, fragment);
  if (absent != NULL)
    ck_assert_msg (strstr (msg, absent) == NULL, "message echoes a value: %s", msg);
  sp_error_release (err);
}

/* parse (doc, len, &out, &err), a parser of type *, must refuse doc: see
   sp_check_refused.  out starts non-NULL, so that a parser that fails
   without resetting it is caught.  */
#define SP_CHECK_PARSE_REFUSED(parse, type, doc, len, fragment, absent)                                      \
  do                                                                                                         \
    {                                                                                                        \
      sp_error_t err_ = NULL;                                                                                \
      type *out_ = (type *)1;                                                                                \
      int ret_ = parse (doc, len, &out_, &err_);                                                             \
      sp_check_refused (ret_, out_, &err_, fragment, absent);                                                \
    }                                                                                                        \
  while (0)

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
