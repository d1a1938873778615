/* The client's settings from its environment (base/client_env.h): the rules
   the client applies and `doctor` explains, held to docs/protocol.md, "The
   client".  */
#define _GNU_SOURCE
#include <string.h>
#include <sys/un.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/client_env.h"

#include "sp_check.h"

_Static_assert(SP_CLIENT_SOCKET_MAX_BYTES == sizeof (((struct sockaddr_un *)0)->sun_path) - 1,
               "the documented bound is sun_path less its NUL");

static int
socket_check (const char *path)
{
  cleanup_error sp_error_t err = NULL;
  int ret = sp_client_socket_check (path, &err);

  ck_assert (ret == SP_CLIENT_SOCKET_OK ? err == NULL : err != NULL);
  /* A message states the rule and never echoes the path.  */
  if (ret != SP_CLIENT_SOCKET_OK && path[0] != '\0')
    ck_assert_ptr_null (strstr (sp_error_message (err), path));
  return ret;
}

START_TEST (unset_socket_is_the_default)
{
  ck_assert_str_eq (sp_client_socket_path (NULL, "/run/x.sock"), "/run/x.sock");
  ck_assert_str_eq (sp_client_socket_path ("/tmp/y", "/run/x.sock"), "/tmp/y");
  ck_assert_str_eq (sp_client_socket_path ("", "/run/x.sock"), "");
}
END_TEST

START_TEST (absolute_socket_within_sun_path_is_accepted)
{
  char path[SP_CLIENT_SOCKET_MAX_BYTES + 1];

  ck_assert_int_eq (socket_check ("/run/sealed-probe/probe.sock"), SP_CLIENT_SOCKET_OK);
  ck_assert_int_eq (socket_check ("/"), SP_CLIENT_SOCKET_OK);
  memset (path, 'a', sizeof (path) - 1);
  path[0] = '/';
  path[sizeof (path) - 1] = '\0';
  ck_assert_int_eq (socket_check (path), SP_CLIENT_SOCKET_OK);
}
END_TEST

START_TEST (empty_socket_is_refused)
{
  ck_assert_int_eq (socket_check (""), SP_CLIENT_SOCKET_EMPTY);
}
END_TEST

START_TEST (relative_socket_is_refused)
{
  ck_assert_int_eq (socket_check ("probe.sock"), SP_CLIENT_SOCKET_RELATIVE);
  ck_assert_int_eq (socket_check ("./probe.sock"), SP_CLIENT_SOCKET_RELATIVE);
  ck_assert_int_eq (socket_check ("~/probe.sock"), SP_CLIENT_SOCKET_RELATIVE);
}
END_TEST

START_TEST (socket_one_byte_above_sun_path_is_refused)
{
  char path[SP_CLIENT_SOCKET_MAX_BYTES + 2];

  memset (path, 'a', sizeof (path) - 1);
  path[0] = '/';
  path[sizeof (path) - 1] = '\0';
  ck_assert_int_eq (socket_check (path), SP_CLIENT_SOCKET_TOO_LONG);
}
END_TEST

static int
timeout_of (const char *value, int *seconds)
{
  cleanup_error sp_error_t err = NULL;
  int ret = sp_client_timeout_parse (value, seconds, &err);

  ck_assert (ret == 0 ? err == NULL : err != NULL);
  return ret;
}

START_TEST (unset_timeout_is_the_default)
{
  int seconds = 0;

  ck_assert_int_eq (timeout_of (NULL, &seconds), 0);
  ck_assert_int_eq (seconds, SP_CLIENT_TIMEOUT_DEFAULT_SECONDS);
}
END_TEST

START_TEST (timeout_from_one_to_the_maximum_is_accepted)
{
  int seconds = 0;

  ck_assert_int_eq (timeout_of ("1", &seconds), 0);
  ck_assert_int_eq (seconds, 1);
  ck_assert_int_eq (timeout_of ("3600", &seconds), 0);
  ck_assert_int_eq (seconds, SP_CLIENT_TIMEOUT_MAX_SECONDS);
  ck_assert_int_eq (timeout_of ("0030", &seconds), 0);
  ck_assert_int_eq (seconds, 30);
}
END_TEST

START_TEST (invalid_timeout_is_refused_not_defaulted)
{
  static const char *const bad[] = { "",    "0",    "000", "3601", "99999999999999999999",
                                     "-5",  "+5",   " 5",  "5 ",   "5s",
                                     "1e3", "0x10", "abc" };

  for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++)
    {
      int seconds = -7;

      ck_assert_msg (timeout_of (bad[i], &seconds) == -1, "accepted `%s`", bad[i]);
      ck_assert_int_eq (seconds, -7);
    }
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("check_client_env");
  TCase *tc = tcase_create ("client_env");

  tcase_add_test (tc, unset_socket_is_the_default);
  tcase_add_test (tc, absolute_socket_within_sun_path_is_accepted);
  tcase_add_test (tc, empty_socket_is_refused);
  tcase_add_test (tc, relative_socket_is_refused);
  tcase_add_test (tc, socket_one_byte_above_sun_path_is_refused);
  tcase_add_test (tc, unset_timeout_is_the_default);
  tcase_add_test (tc, timeout_from_one_to_the_maximum_is_accepted);
  tcase_add_test (tc, invalid_timeout_is_refused_not_defaulted);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
