/* secret_cred.h: the token from systemd's credential directory.  Every
   refusal is checked to hold no byte of the value: each planted value starts
   with a canary that no message may show.  */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "stage/secret_cred.h"
#include "stage/secret_env.h"

#include "sp_check.h"
#include "sp_tmpdir.h"

#define CANARY "ghp_CREDCANARY"
#define MAX    64

static char top[] = "/tmp/sp-secret-cred-XXXXXX";
static int top_fd = -1;

static void
setup (void)
{
  strcpy (top, "/tmp/sp-secret-cred-XXXXXX");
  top_fd = sp_tmpdir_make (top);
  unsetenv (SP_CREDENTIALS_DIRECTORY_ENV);
}

static void
teardown (void)
{
  sp_closep (&top_fd);
  chmod (top, 0700);
  sp_tmpdir_remove (top);
  unsetenv (SP_CREDENTIALS_DIRECTORY_ENV);
}

static void
plant (const char *name, const void *data, size_t len, mode_t mode)
{
  cleanup_close int fd = openat (top_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (write (fd, data, len), (ssize_t)len);
  ck_assert_int_eq (fchmod (fd, mode), 0);
}

/* Reads name and expects the value want.  */
static void
read_ok (const char *name, const char *want)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_secret char *got = NULL;

  ck_assert_msg (sp_secret_cred_read_at (top_fd, name, MAX, &got, &err) == 0, "%s: %s", name,
                 err ? sp_error_message (err) : "");
  ck_assert_ptr_nonnull (got);
  ck_assert_str_eq (got, want);
}

/* Expects name refused with a message holding needle and no canary.  */
static void
read_refused (const char *name, const char *needle)
{
  cleanup_error sp_error_t err = NULL;
  char *got = (char *)"untouched";

  ck_assert_int_eq (sp_secret_cred_read_at (top_fd, name, MAX, &got, &err), -1);
  ck_assert_ptr_null (got);
  ck_assert_msg (strstr (sp_error_message (err), needle) != NULL, "`%s` lacks `%s`", sp_error_message (err),
                 needle);
  ck_assert_msg (strstr (sp_error_message (err), "CANARY") == NULL, "the value leaked: %s",
                 sp_error_message (err));
}

START_TEST (a_token_with_one_trailing_newline_is_read_without_it)
{
  plant ("github-token", CANARY "abc\n", strlen (CANARY "abc\n"), 0400);
  read_ok ("github-token", CANARY "abc");
}
END_TEST

START_TEST (a_token_without_a_newline_is_read_as_is)
{
  plant ("github-token", CANARY "abc", strlen (CANARY "abc"), 0600);
  read_ok ("github-token", CANARY "abc");
}
END_TEST

START_TEST (a_missing_credential_is_no_credential)
{
  cleanup_error sp_error_t err = NULL;
  char *got = (char *)"untouched";

  ck_assert_int_eq (sp_secret_cred_read_at (top_fd, "github-token", MAX, &got, &err), 0);
  ck_assert_ptr_null (got);
  ck_assert_ptr_null (err);
}
END_TEST

START_TEST (only_one_trailing_newline_is_stripped)
{
  plant ("github-token", CANARY "abc\n\n", strlen (CANARY "abc\n\n"), 0400);
  read_refused ("github-token", "control byte");
}
END_TEST

START_TEST (an_empty_credential_is_refused)
{
  plant ("empty", "", 0, 0400);
  plant ("newline", "\n", 1, 0400);
  read_refused ("empty", "is empty");
  read_refused ("newline", "is empty");
}
END_TEST

START_TEST (a_nul_byte_is_refused)
{
  plant ("github-token", CANARY "a\0b", sizeof (CANARY "a\0b") - 1, 0400);
  read_refused ("github-token", "NUL byte");
}
END_TEST

START_TEST (a_control_byte_is_refused)
{
  static const char *const values[]
      = { CANARY "a\rb", CANARY "a\tb", CANARY "\x1b[2J", CANARY "a\x7f", CANARY "a\r\n" };

  for (size_t i = 0; i < sizeof (values) / sizeof (values[0]); i++)
    {
      char name[16];

      snprintf (name, sizeof (name), "c%zu", i);
      plant (name, values[i], strlen (values[i]), 0400);
      read_refused (name, "control byte");
    }
}
END_TEST

START_TEST (a_credential_up_to_the_cap_is_read_and_one_byte_more_is_refused)
{
  char value[MAX + 2];

  memset (value, 'x', sizeof (value));
  memcpy (value, CANARY, strlen (CANARY));
  plant ("at-cap", value, MAX, 0400);
  value[MAX] = '\n';
  plant ("at-cap-newline", value, MAX + 1, 0400);
  value[MAX] = 'x';
  plant ("over-cap", value, MAX + 1, 0400);
  value[MAX + 1] = '\n';
  plant ("over-cap-newline", value, MAX + 2, 0400);
  value[MAX] = '\0';
  read_ok ("at-cap", value);
  read_ok ("at-cap-newline", value);
  read_refused ("over-cap", "longer than 64 bytes");
  read_refused ("over-cap-newline", "longer than 64 bytes");
}
END_TEST

START_TEST (a_huge_credential_is_refused_by_its_size_before_any_read)
{
  cleanup_close int fd = openat (top_fd, "huge", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);

  ck_assert_int_ge (fd, 0);
  /* Sparse: 1 TiB that costs no disk, and would take long to read.  */
  ck_assert_int_eq (ftruncate (fd, 1LL << 40), 0);
  read_refused ("huge", "longer than 64 bytes");
}
END_TEST

START_TEST (a_symlink_is_refused_never_followed)
{
  plant ("real", CANARY "abc\n", strlen (CANARY "abc\n"), 0400);
  ck_assert_int_eq (symlinkat ("real", top_fd, "github-token"), 0);
  read_refused ("github-token", "is a symlink");
}
END_TEST

START_TEST (a_fifo_is_refused_without_blocking)
{
  ck_assert_int_eq (mkfifoat (top_fd, "github-token", 0600), 0);
  read_refused ("github-token", "not a regular file");
}
END_TEST

START_TEST (a_directory_is_refused)
{
  ck_assert_int_eq (mkdirat (top_fd, "github-token", 0700), 0);
  read_refused ("github-token", "not a regular file");
}
END_TEST

START_TEST (group_or_other_access_is_refused)
{
  plant ("group", CANARY "abc", strlen (CANARY "abc"), 0440);
  plant ("other", CANARY "abc", strlen (CANARY "abc"), 0604);
  read_refused ("group", "mode 0440");
  read_refused ("other", "mode 0604");
}
END_TEST

/* Registered only as root, who alone can give a file away (make_suite says
   so otherwise).  */
START_TEST (a_credential_owned_by_another_uid_is_refused)
{
  plant ("github-token", CANARY "abc", strlen (CANARY "abc"), 0400);
  ck_assert_int_eq (fchownat (top_fd, "github-token", 65534, 65534, 0), 0);
  read_refused ("github-token", "owned by uid 65534");
}
END_TEST

START_TEST (take_with_no_credentials_directory_is_no_credential)
{
  cleanup_error sp_error_t err = NULL;
  char *got = (char *)"untouched";

  ck_assert_int_eq (sp_secret_cred_take ("github-token", MAX, &got, &err), 0);
  ck_assert_ptr_null (got);
  setenv (SP_CREDENTIALS_DIRECTORY_ENV, "", 1);
  got = (char *)"untouched";
  ck_assert_int_eq (sp_secret_cred_take ("github-token", MAX, &got, &err), 0);
  ck_assert_ptr_null (got);
}
END_TEST

START_TEST (take_reads_the_credential_from_the_directory)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_secret char *got = NULL;

  plant ("github-token", CANARY "abc\n", strlen (CANARY "abc\n"), 0400);
  setenv (SP_CREDENTIALS_DIRECTORY_ENV, top, 1);
  ck_assert_msg (sp_secret_cred_take ("github-token", MAX, &got, &err) == 0, "%s",
                 err ? sp_error_message (err) : "");
  ck_assert_str_eq (got, CANARY "abc");
}
END_TEST

/* Expects take refused, naming the directory variable and needle.  */
static void
take_refused (const char *dir, const char *needle)
{
  cleanup_error sp_error_t err = NULL;
  char *got = (char *)"untouched";

  setenv (SP_CREDENTIALS_DIRECTORY_ENV, dir, 1);
  ck_assert_int_eq (sp_secret_cred_take ("github-token", MAX, &got, &err), -1);
  ck_assert_ptr_null (got);
  ck_assert_msg (strstr (sp_error_message (err), "$CREDENTIALS_DIRECTORY") != NULL
                     && strstr (sp_error_message (err), needle) != NULL,
                 "`%s` lacks `%s`", sp_error_message (err), needle);
  ck_assert_msg (strstr (sp_error_message (err), "CANARY") == NULL, "the value leaked: %s",
                 sp_error_message (err));
}

START_TEST (take_refuses_a_bad_credentials_directory)
{
  char path[sizeof (top) + 32];

  take_refused ("relative/dir", "not an absolute path");
  snprintf (path, sizeof (path), "%s/missing", top);
  take_refused (path, "No such file or directory");
  ck_assert_int_eq (mkdirat (top_fd, "real", 0500), 0);
  ck_assert_int_eq (symlinkat ("real", top_fd, "link"), 0);
  snprintf (path, sizeof (path), "%s/link", top);
  take_refused (path, "is a symlink; it is never followed");
  snprintf (path, sizeof (path), "%s/plain", top);
  plant ("plain", "x", 1, 0400);
  take_refused (path, "is not a directory");
  ck_assert_int_eq (mkdirat (top_fd, "open", 0700), 0);
  ck_assert_int_eq (fchmodat (top_fd, "open", 0770, 0), 0);
  snprintf (path, sizeof (path), "%s/open", top);
  take_refused (path, "writable by nobody else");
  ck_assert_int_eq (mkdirat (top_fd, "escape", 0700), 0);
  snprintf (path, sizeof (path), "%s/escape\n\x1b[2J", top);
  take_refused (path, "escape\\x0a\\x1b[2J");
}
END_TEST

START_TEST (take_names_the_directory_when_the_file_is_refused)
{
  plant ("github-token", CANARY "a\x01", strlen (CANARY "a\x01"), 0400);
  take_refused (top, "credential `github-token` holds a control byte");
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("secret_cred");
  TCase *tc = tcase_create ("secret_cred");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, a_token_with_one_trailing_newline_is_read_without_it);
  tcase_add_test (tc, a_token_without_a_newline_is_read_as_is);
  tcase_add_test (tc, a_missing_credential_is_no_credential);
  tcase_add_test (tc, only_one_trailing_newline_is_stripped);
  tcase_add_test (tc, an_empty_credential_is_refused);
  tcase_add_test (tc, a_nul_byte_is_refused);
  tcase_add_test (tc, a_control_byte_is_refused);
  tcase_add_test (tc, a_credential_up_to_the_cap_is_read_and_one_byte_more_is_refused);
  tcase_add_test (tc, a_huge_credential_is_refused_by_its_size_before_any_read);
  tcase_add_test (tc, a_symlink_is_refused_never_followed);
  tcase_add_test (tc, a_fifo_is_refused_without_blocking);
  tcase_add_test (tc, a_directory_is_refused);
  tcase_add_test (tc, group_or_other_access_is_refused);
  if (geteuid () == 0)
    tcase_add_test (tc, a_credential_owned_by_another_uid_is_refused);
  else
    printf ("# a_credential_owned_by_another_uid_is_refused: not run: only root can give a file away\n");
  tcase_add_test (tc, take_with_no_credentials_directory_is_no_credential);
  tcase_add_test (tc, take_reads_the_credential_from_the_directory);
  tcase_add_test (tc, take_refuses_a_bad_credentials_directory);
  tcase_add_test (tc, take_names_the_directory_when_the_file_is_refused);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
