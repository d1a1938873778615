/* The budget ledger: persisted before launch, never refunded, kept across
   restarts, exact under concurrency, and never silently reset.  */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sealed-probe/cleanup.h>
#include <sealed-probe/fileio.h>
#include <sealed-probe/ledger.h>

#include "sp_check.h"

static char state_dir[64];
static int state_fd = -1;

static void
make_state_dir (void)
{
  strcpy (state_dir, "/tmp/sp-ledger-XXXXXX");
  ck_assert_ptr_nonnull (mkdtemp (state_dir));
  state_fd = open (state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (state_fd, 0);
}

static void
remove_state_dir (void)
{
  cleanup_dir DIR *dir = fdopendir (dup (state_fd));
  struct dirent *de;

  while (dir && (de = readdir (dir)))
    if (strcmp (de->d_name, ".") && strcmp (de->d_name, ".."))
      ck_assert_int_eq (unlinkat (state_fd, de->d_name, de->d_type == DT_DIR ? AT_REMOVEDIR : 0), 0);
  close (state_fd);
  state_fd = -1;
  ck_assert_int_eq (rmdir (state_dir), 0);
}

static struct sp_ledger *
open_ok (uint32_t limit)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_ledger *ledger = NULL;

  if (sp_ledger_open (state_fd, limit, &ledger, &err) < 0)
    ck_abort_msg ("sp_ledger_open: %s", sp_error_message (err));
  return ledger;
}

static char *
open_fails (uint32_t limit)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_ledger *ledger = NULL;

  ck_assert_int_eq (sp_ledger_open (state_fd, limit, &ledger, &err), -1);
  ck_assert_ptr_null (ledger);
  return strdup (sp_error_message (err));
}

static int
debit (struct sp_ledger *ledger)
{
  cleanup_error sp_error_t err = NULL;
  return sp_ledger_debit (ledger, NULL, &err);
}

static char *
read_ledger_file (void)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_close int fd = openat (state_fd, SP_LEDGER_FILE, O_RDONLY | O_CLOEXEC);
  char *text = NULL;
  size_t len;

  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (sp_read_fd_capped (fd, 4096, &text, &len, &err), 0);
  return text;
}

static void
write_ledger_file (const char *text)
{
  cleanup_error sp_error_t err = NULL;
  ck_assert_int_eq (sp_write_file_atomic_at (state_fd, SP_LEDGER_FILE, text, strlen (text), 0600, &err), 0);
}

START_TEST (first_open_creates_ledger_with_nothing_used)
{
  cleanup_ledger struct sp_ledger *ledger = open_ok (5);
  cleanup_free char *text = read_ledger_file ();

  ck_assert_uint_eq (sp_ledger_remaining (ledger), 5);
  ck_assert_str_eq (text, "{\"version\":1,\"limit\":5,\"used\":0}\n");
}
END_TEST

START_TEST (debits_until_exhausted_then_refuses_without_writing)
{
  cleanup_ledger struct sp_ledger *ledger = open_ok (2);
  cleanup_free char *after = NULL;
  uint32_t left = 99;
  cleanup_error sp_error_t err = NULL;

  ck_assert_int_eq (sp_ledger_debit (ledger, &left, &err), 0);
  ck_assert_uint_eq (left, 1);
  ck_assert_int_eq (debit (ledger), 0);
  ck_assert_int_eq (debit (ledger), SP_LEDGER_EXHAUSTED);
  ck_assert_int_eq (debit (ledger), SP_LEDGER_EXHAUSTED);
  after = read_ledger_file ();
  ck_assert_str_eq (after, "{\"version\":1,\"limit\":2,\"used\":2}\n");
}
END_TEST

START_TEST (exhausted_budget_stays_exhausted_after_restart)
{
  struct sp_ledger *ledger = open_ok (1);

  ck_assert_int_eq (debit (ledger), 0);
  sp_ledger_close (ledger);

  ledger = open_ok (1);
  ck_assert_uint_eq (sp_ledger_remaining (ledger), 0);
  ck_assert_int_eq (debit (ledger), SP_LEDGER_EXHAUSTED);
  sp_ledger_close (ledger);
}
END_TEST

START_TEST (debit_is_on_disk_before_it_returns)
{
  cleanup_free char *text = NULL;
  pid_t pid = fork ();
  int status;

  ck_assert_int_ge (pid, 0);
  if (pid == 0)
    {
      /* Debit, then die without closing: a crash right after launch.  */
      struct sp_ledger *ledger = NULL;
      sp_error_t err = NULL;
      if (sp_ledger_open (state_fd, 3, &ledger, &err) < 0 || sp_ledger_debit (ledger, NULL, &err) != 0)
        _exit (1);
      _exit (0);
    }
  ck_assert_int_eq (waitpid (pid, &status, 0), pid);
  ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  text = read_ledger_file ();
  ck_assert_str_eq (text, "{\"version\":1,\"limit\":3,\"used\":1}\n");
}
END_TEST

START_TEST (changed_limit_is_refused_not_reset)
{
  cleanup_free char *msg = NULL;
  struct sp_ledger *ledger = open_ok (3);

  ck_assert_int_eq (debit (ledger), 0);
  sp_ledger_close (ledger);
  msg = open_fails (10);
  ck_assert_ptr_nonnull (strstr (msg, "a run's budget never changes"));
}
END_TEST

START_TEST (malformed_ledger_is_refused_not_reset)
{
  static const char *const bad[] = {
    "",
    "garbage",
    "{\"version\":1,\"limit\":3}",
    "{\"version\":1,\"limit\":3,\"used\":4}",
    "{\"version\":1,\"limit\":3,\"used\":-1}",
    "{\"version\":1,\"limit\":3,\"used\":1.0}",
    "{\"version\":2,\"limit\":3,\"used\":0}",
    "{\"version\":1,\"limit\":3,\"used\":0,\"extra\":0}",
    "{\"version\":1,\"limit\":3,\"used\":0,\"used\":0}",
    "[1,3,0]",
  };

  for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++)
    {
      cleanup_free char *msg = NULL;
      write_ledger_file (bad[i]);
      msg = open_fails (3);
      ck_assert_msg (strstr (msg, SP_LEDGER_FILE) != NULL, "case %zu: %s", i, msg);
    }
}
END_TEST

START_TEST (ledger_that_is_a_symlink_is_refused)
{
  cleanup_free char *msg = NULL;

  ck_assert_int_eq (symlinkat ("/etc/hostname", state_fd, SP_LEDGER_FILE), 0);
  msg = open_fails (3);
  ck_assert_ptr_nonnull (strstr (msg, SP_LEDGER_FILE));
}
END_TEST

START_TEST (second_holder_of_the_same_ledger_is_refused)
{
  cleanup_ledger struct sp_ledger *first = open_ok (3);
  cleanup_free char *msg = open_fails (3);

  ck_assert_ptr_nonnull (strstr (msg, "in use"));
}
END_TEST

START_TEST (failed_persist_poisons_the_ledger)
{
  cleanup_ledger struct sp_ledger *ledger = open_ok (5);
  cleanup_free char *text = NULL;

  /* A directory where the temporary file must go makes the write fail.  */
  ck_assert_int_eq (mkdirat (state_fd, SP_LEDGER_FILE ".tmp", 0700), 0);
  ck_assert_int_eq (debit (ledger), -1);
  ck_assert_int_eq (unlinkat (state_fd, SP_LEDGER_FILE ".tmp", AT_REMOVEDIR), 0);
  ck_assert_int_eq (debit (ledger), -1);
  text = read_ledger_file ();
  ck_assert_str_eq (text, "{\"version\":1,\"limit\":5,\"used\":0}\n");
}
END_TEST

#define THREADS        4
#define DEBITS_PER_ONE 40

static void *
debit_many (void *arg)
{
  struct sp_ledger *ledger = arg;
  intptr_t granted = 0;

  for (int i = 0; i < DEBITS_PER_ONE; i++)
    if (debit (ledger) == 0)
      granted++;
  return (void *)granted;
}

START_TEST (concurrent_debits_are_exact)
{
  const uint32_t limit = THREADS * DEBITS_PER_ONE - 25;
  cleanup_ledger struct sp_ledger *ledger = open_ok (limit);
  cleanup_free char *text = NULL;
  pthread_t threads[THREADS];
  intptr_t granted = 0;
  char expected[128];

  for (int i = 0; i < THREADS; i++)
    ck_assert_int_eq (pthread_create (&threads[i], NULL, debit_many, ledger), 0);
  for (int i = 0; i < THREADS; i++)
    {
      void *ret;
      ck_assert_int_eq (pthread_join (threads[i], &ret), 0);
      granted += (intptr_t)ret;
    }
  ck_assert_int_eq (granted, limit);
  text = read_ledger_file ();
  snprintf (expected, sizeof (expected), "{\"version\":1,\"limit\":%u,\"used\":%u}\n", limit, limit);
  ck_assert_str_eq (text, expected);
}
END_TEST

START_TEST (out_of_range_budget_is_refused)
{
  cleanup_free char *zero = open_fails (0);
  cleanup_free char *huge = open_fails (100001);

  ck_assert_ptr_nonnull (strstr (zero, "budget must be"));
  ck_assert_ptr_nonnull (strstr (huge, "budget must be"));
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("ledger");
  TCase *tc = tcase_create ("ledger");

  tcase_add_checked_fixture (tc, make_state_dir, remove_state_dir);
  tcase_add_test (tc, first_open_creates_ledger_with_nothing_used);
  tcase_add_test (tc, debits_until_exhausted_then_refuses_without_writing);
  tcase_add_test (tc, exhausted_budget_stays_exhausted_after_restart);
  tcase_add_test (tc, debit_is_on_disk_before_it_returns);
  tcase_add_test (tc, changed_limit_is_refused_not_reset);
  tcase_add_test (tc, malformed_ledger_is_refused_not_reset);
  tcase_add_test (tc, ledger_that_is_a_symlink_is_refused);
  tcase_add_test (tc, second_holder_of_the_same_ledger_is_refused);
  tcase_add_test (tc, failed_persist_poisons_the_ledger);
  tcase_add_test (tc, concurrent_debits_are_exact);
  tcase_add_test (tc, out_of_range_budget_is_refused);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
