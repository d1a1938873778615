/* The budget ledger: persisted before launch, never refunded, kept across
   restarts, exact under concurrency, and never silently reset; each
   repository's bits of disclosure summed, bounded by its budget, and kept
   with the count in one write.  */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "os/fileio.h"
#include "serve/ledger.h"

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

  if (sp_ledger_open (state_fd, limit, 0, &ledger, &err) < 0)
    ck_abort_msg ("sp_ledger_open: %s", sp_error_message (err));
  return ledger;
}

static char *
open_fails (uint32_t limit)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_ledger *ledger = NULL;

  ck_assert_int_eq (sp_ledger_open (state_fd, limit, 0, &ledger, &err), -1);
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
  ck_assert_int_eq (sp_read_fd_capped (fd, SP_LEDGER_FILE_MAX_BYTES, &text, &len, &err), 0);
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
  ck_assert_str_eq (text, "{\"version\":2,\"limit\":5,\"used\":0,\"repositories\":{}}\n");
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
  ck_assert_str_eq (after, "{\"version\":2,\"limit\":2,\"used\":2,\"repositories\":{}}\n");
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
      if (sp_ledger_open (state_fd, 3, 0, &ledger, &err) < 0 || sp_ledger_debit (ledger, NULL, &err) != 0)
        _exit (1);
      _exit (0);
    }
  ck_assert_int_eq (waitpid (pid, &status, 0), pid);
  ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  text = read_ledger_file ();
  ck_assert_str_eq (text, "{\"version\":2,\"limit\":3,\"used\":1,\"repositories\":{}}\n");
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
  ck_assert_str_eq (text, "{\"version\":2,\"limit\":5,\"used\":0,\"repositories\":{}}\n");
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
  snprintf (expected, sizeof (expected), "{\"version\":2,\"limit\":%u,\"used\":%u,\"repositories\":{}}\n",
            limit, limit);
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

/* Version 2: each repository's bits of disclosure.  */

#define V2_HEAD(limit, used) "{\"version\":2,\"limit\":" #limit ",\"used\":" #used ",\"repositories\":{"
#define ENTRY(name, millibits, unbounded)                                                                    \
  "\"" name "\":{\"millibits\":" #millibits ",\"unbounded_calls\":" #unbounded "}"

static int
charge_full (struct sp_ledger *ledger, const char *repo, uint64_t millibits, bool unbounded, uint64_t budget,
             uint64_t *repo_millibits)
{
  cleanup_error sp_error_t err = NULL;
  const struct sp_ledger_charge c = {
    .repo = repo, .millibits = millibits, .timing_unbounded = unbounded, .bit_budget_millibits = budget
  };
  int ret = sp_ledger_debit_call (ledger, &c, NULL, repo_millibits, &err);

  ck_assert_msg (ret >= 0 || err != NULL, "-1 without an error");
  return ret;
}

static int
charge (struct sp_ledger *ledger, const char *repo, uint64_t millibits, uint64_t budget)
{
  return charge_full (ledger, repo, millibits, false, budget, NULL);
}

static void
assert_totals (struct sp_ledger *ledger, const char *repo, uint64_t millibits, uint64_t unbounded)
{
  uint64_t m = 99, u = 99;

  sp_ledger_repo_totals (ledger, repo, &m, &u);
  ck_assert_uint_eq (m, millibits);
  ck_assert_uint_eq (u, unbounded);
}

START_TEST (v1_ledger_opens_and_is_upgraded_on_next_debit)
{
  static const char v1[] = "{\"version\":1,\"limit\":5,\"used\":2}\n";
  cleanup_ledger struct sp_ledger *ledger = NULL;
  cleanup_free char *opened = NULL;
  cleanup_free char *debited = NULL;
  cleanup_free char *charged = NULL;

  write_ledger_file (v1);
  ledger = open_ok (5);
  ck_assert_uint_eq (sp_ledger_remaining (ledger), 3);
  assert_totals (ledger, "acme/app", 0, 0);
  opened = read_ledger_file ();
  ck_assert_str_eq (opened, v1);

  ck_assert_int_eq (debit (ledger), 0);
  debited = read_ledger_file ();
  ck_assert_str_eq (debited, V2_HEAD (5, 3) "}}\n");
  ck_assert_int_eq (charge (ledger, "acme/app", 7, 0), 0);
  charged = read_ledger_file ();
  ck_assert_str_eq (charged, V2_HEAD (5, 4) ENTRY ("acme/app", 7, 0) "}}\n");
}
END_TEST

START_TEST (charges_sum_per_repository_and_persist_across_restart)
{
  struct sp_ledger *ledger = open_ok (10);
  cleanup_free char *text = NULL;
  cleanup_free char *reopened = NULL;
  cleanup_error sp_error_t err = NULL;
  uint64_t repo_millibits = 0;
  uint32_t left = 0;

  ck_assert_int_eq (charge_full (ledger, "zeta/z", 10, false, 0, &repo_millibits), 0);
  ck_assert_uint_eq (repo_millibits, 10);
  ck_assert_int_eq (charge_full (ledger, "acme/app", 1500, false, 0, &repo_millibits), 0);
  ck_assert_uint_eq (repo_millibits, 1500);
  ck_assert_int_eq (charge_full (ledger, "acme/app", 2001, false, 0, &repo_millibits), 0);
  ck_assert_uint_eq (repo_millibits, 3501);
  ck_assert_int_eq (sp_ledger_debit (ledger, &left, &err), 0);
  ck_assert_uint_eq (left, 6);
  assert_totals (ledger, "acme/app", 3501, 0);
  assert_totals (ledger, "zeta/z", 10, 0);
  assert_totals (ledger, "acme/never", 0, 0);
  text = read_ledger_file ();
  /* Sorted by name, whatever order they were first charged in.  */
  ck_assert_str_eq (text, V2_HEAD (10, 4) ENTRY ("acme/app", 3501, 0) "," ENTRY ("zeta/z", 10, 0) "}}\n");
  sp_ledger_close (ledger);

  ledger = open_ok (10);
  ck_assert_uint_eq (sp_ledger_remaining (ledger), 6);
  assert_totals (ledger, "acme/app", 3501, 0);
  assert_totals (ledger, "zeta/z", 10, 0);
  ck_assert_int_eq (charge_full (ledger, "acme/app", 499, false, 0, &repo_millibits), 0);
  ck_assert_uint_eq (repo_millibits, 4000);
  ck_assert_int_eq (charge (ledger, "midway/m", 1, 0), 0);
  sp_ledger_close (ledger);
  reopened = read_ledger_file ();
  ck_assert_str_eq (reopened, V2_HEAD (10, 6) ENTRY ("acme/app", 4000, 0) "," ENTRY (
                                  "midway/m", 1, 0) "," ENTRY ("zeta/z", 10, 0) "}}\n");
}
END_TEST

START_TEST (bit_budget_allows_equal_and_refuses_above_without_writing)
{
  cleanup_ledger struct sp_ledger *ledger = open_ok (10);
  cleanup_free char *before = NULL;
  cleanup_free char *after = NULL;
  uint64_t repo_millibits = 99;

  ck_assert_int_eq (charge (ledger, "acme/app", 1000, 3000), 0);
  ck_assert_int_eq (charge_full (ledger, "acme/app", 2000, false, 3000, &repo_millibits), 0);
  ck_assert_uint_eq (repo_millibits, 3000); /* exactly the budget is allowed */
  before = read_ledger_file ();

  ck_assert_int_eq (charge_full (ledger, "acme/app", 1, false, 3000, &repo_millibits),
                    SP_LEDGER_BITS_EXHAUSTED);
  ck_assert_uint_eq (repo_millibits, 3000);
  ck_assert_int_eq (charge (ledger, "acme/app", UINT64_MAX, 3000), SP_LEDGER_BITS_EXHAUSTED);
  /* A first charge above the budget adds no entry either.  */
  ck_assert_int_eq (charge (ledger, "acme/lib", 3001, 3000), SP_LEDGER_BITS_EXHAUSTED);
  after = read_ledger_file ();
  ck_assert_str_eq (after, before);
  ck_assert_uint_eq (sp_ledger_remaining (ledger), 8);
  assert_totals (ledger, "acme/app", 3000, 0);
  assert_totals (ledger, "acme/lib", 0, 0);

  /* The budget is per repository, and a call without one is not bounded.  */
  ck_assert_int_eq (charge (ledger, "acme/lib", 3000, 3000), 0);
  ck_assert_int_eq (charge (ledger, "acme/app", 5, 0), 0);
  assert_totals (ledger, "acme/app", 3005, 0);
}
END_TEST

START_TEST (invocation_budget_is_checked_before_the_bit_budget)
{
  cleanup_ledger struct sp_ledger *ledger = open_ok (1);
  cleanup_free char *before = NULL;
  cleanup_free char *after = NULL;

  ck_assert_int_eq (charge (ledger, "acme/app", 1000, 1000), 0);
  before = read_ledger_file ();
  ck_assert_int_eq (charge (ledger, "acme/app", 1, 1000), SP_LEDGER_EXHAUSTED);
  ck_assert_int_eq (charge_full (ledger, "acme/app", 0, true, 1000, NULL), SP_LEDGER_EXHAUSTED);
  ck_assert_int_eq (charge (ledger, "acme/lib", 1, 1000), SP_LEDGER_EXHAUSTED);
  ck_assert_int_eq (charge (ledger, "Not A Repo", 1, 0), SP_LEDGER_EXHAUSTED);
  after = read_ledger_file ();
  ck_assert_str_eq (after, before);
}
END_TEST

START_TEST (unbounded_calls_are_counted_and_never_fit_a_bit_budget)
{
  cleanup_ledger struct sp_ledger *ledger = open_ok (10);
  cleanup_free char *before = NULL;
  cleanup_free char *after = NULL;
  uint64_t repo_millibits = 0;

  ck_assert_int_eq (charge_full (ledger, "acme/app", 2000, true, 0, &repo_millibits), 0);
  ck_assert_uint_eq (repo_millibits, 2000);
  ck_assert_int_eq (charge_full (ledger, "acme/app", 0, true, 0, NULL), 0);
  ck_assert_int_eq (charge (ledger, "acme/app", 500, 0), 0);
  assert_totals (ledger, "acme/app", 2500, 2);
  before = read_ledger_file ();
  ck_assert_str_eq (before, V2_HEAD (10, 3) ENTRY ("acme/app", 2500, 2) "}}\n");

  ck_assert_int_eq (charge_full (ledger, "acme/app", 0, true, UINT64_C (1) << 40, NULL),
                    SP_LEDGER_BITS_EXHAUSTED);
  ck_assert_int_eq (charge_full (ledger, "acme/new", 0, true, 1, NULL), SP_LEDGER_BITS_EXHAUSTED);
  after = read_ledger_file ();
  ck_assert_str_eq (after, before);
  assert_totals (ledger, "acme/app", 2500, 2);
}
END_TEST

START_TEST (malformed_v2_ledger_is_refused_naming_the_key)
{
  static const struct
  {
    const char *text;
    const char *names;
  } bad[] = {
    { V2_HEAD (3, 0) "\"acme/app\":{\"millibits\":1,\"unbounded_calls\":0,\"extra\":1}}}",
      "repositories[\"acme/app\"].extra: unknown key" },
    { V2_HEAD (3, 0) "\"acme/app\":{\"millibits\":1}}}",
      "repositories[\"acme/app\"].unbounded_calls: missing" },
    { V2_HEAD (3, 0) ENTRY ("Acme/App", 1, 0) "}}",
      "repositories: the key of member 0 is not a repository name" },
    { V2_HEAD (3, 0) ENTRY ("acme/app", 1, 0) "," ENTRY ("acme/app.git", 1, 0) "}}",
      "repositories: the key of member 1 is not a repository name" },
    { V2_HEAD (3, 0) ENTRY ("acme/app", -1, 0) "}}",
      "repositories[\"acme/app\"].millibits: must be an integer" },
    { V2_HEAD (3, 0) ENTRY ("acme/app", 9007199254740993, 0) "}}",
      "repositories[\"acme/app\"].millibits: must be an integer from 0 to 9007199254740992" },
    { V2_HEAD (3, 0) ENTRY ("acme/app", 1.0, 0) "}}",
      "repositories[\"acme/app\"].millibits: must be an integer" },
    { V2_HEAD (3, 0) ENTRY ("acme/app", "1", 0) "}}",
      "repositories[\"acme/app\"].millibits: must be an integer" },
    { V2_HEAD (3, 0) ENTRY ("acme/app", 0, 4294967296) "}}",
      "repositories[\"acme/app\"].unbounded_calls: must be an integer from 0 to 4294967295" },
    { V2_HEAD (3, 0) ENTRY ("acme/app", 0, -1) "}}", "repositories[\"acme/app\"].unbounded_calls" },
    { V2_HEAD (3, 0) ENTRY ("acme/app", 1, 0) "," ENTRY ("acme/app", 1, 0) "}}",
      "repositories: duplicate key \"acme/app\"" },
    { V2_HEAD (3, 0) "\"acme/app\":{\"millibits\":1,\"millibits\":1,\"unbounded_calls\":0}}}",
      "duplicate key \"millibits\"" },
    { V2_HEAD (3, 0) "\"acme/app\":7}}", "repositories[\"acme/app\"]: must be an object" },
    { V2_HEAD (3, 0) "},\"extra\":0}", "extra: unknown key" },
    { "{\"version\":2,\"limit\":3,\"used\":0,\"repositories\":[]}", "repositories: must be an object" },
    { "{\"version\":2,\"limit\":3,\"used\":0,\"repositories\":null}", "repositories: must be an object" },
    { "{\"version\":2,\"limit\":3,\"used\":0}", "repositories: missing" },
    { "{\"version\":1,\"limit\":3,\"used\":0,\"repositories\":{}}", "repositories: unknown key" },
    { "{\"version\":4,\"limit\":3,\"used\":0,\"repositories\":{}}",
      "version: must be an integer from 1 to 3" },
    { "{\"version\":3,\"limit\":3,\"used\":0,\"repositories\":{}}", "run_bit_budget: missing" },
    { "{\"version\":3,\"limit\":3,\"used\":0,\"run_bit_budget\":0,\"repositories\":{}}",
      "run_bit_budget: must be an integer from 1 to 1000000" },
    { "{\"version\":3,\"limit\":3,\"used\":0,\"run_bit_budget\":1000001,\"repositories\":{}}",
      "run_bit_budget: must be an integer from 1 to 1000000" },
    { "{\"version\":3,\"limit\":3,\"used\":0,\"run_bit_budget\":null,\"repositories\":{}}",
      "run_bit_budget: must be an integer" },
    { "{\"version\":3,\"limit\":3,\"used\":0,\"run_bit_budget\":\"5\",\"repositories\":{}}",
      "run_bit_budget: must be an integer" },
    { "{\"version\":2,\"limit\":3,\"used\":0,\"run_bit_budget\":5,\"repositories\":{}}",
      "run_bit_budget: unknown key" },
    { "{\"version\":1,\"limit\":3,\"used\":0,\"run_bit_budget\":5}", "run_bit_budget: unknown key" },
    { V2_HEAD (3, 4) "}}", "used: must be an integer from 0 to 3" },
    { V2_HEAD (3, 0) "\"acme/app\":{\"millibits\":1,\"unbounded_calls\":0,\"x\":{\"y\":{}}}}}", "" },
  };

  for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++)
    {
      cleanup_free char *msg = NULL;
      cleanup_free char *after = NULL;

      write_ledger_file (bad[i].text);
      msg = open_fails (3);
      ck_assert_msg (strstr (msg, SP_LEDGER_FILE) != NULL, "case %zu: %s", i, msg);
      ck_assert_msg (strstr (msg, bad[i].names) != NULL, "case %zu: %s", i, msg);
      /* Refused, never reset.  */
      after = read_ledger_file ();
      ck_assert_str_eq (after, bad[i].text);
    }
}
END_TEST

START_TEST (repository_key_that_is_no_name_is_never_echoed)
{
  cleanup_free char *msg = NULL;

  write_ledger_file (V2_HEAD (3, 0) ENTRY ("https://ghp_CANARY123@github.com/acme/app", 0, 0) "}}");
  msg = open_fails (3);
  ck_assert_ptr_nonnull (strstr (msg, "repositories: the key of member 0 is not a repository name"));
  ck_assert_ptr_null (strstr (msg, "CANARY"));
}
END_TEST

/* A ledger of n repositories (n <= 999) whose names are each
   SP_REPO_MAX_BYTES long, each at the largest totals the file allows.  */
static char *
largest_ledger_text (size_t n)
{
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&text, &len);

  ck_assert_ptr_nonnull (f);
  fputs (V2_HEAD (100000, 0), f);
  for (size_t i = 0; i < n; i++)
    fprintf (f, "%s\"%s%.*s/%.*s%03zu\":{\"millibits\":9007199254740992,\"unbounded_calls\":4294967295}",
             i ? "," : "", "o", SP_REPO_OWNER_MAX - 1,
             "oooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo", SP_REPO_NAME_MAX - 3,
             "rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr"
             "rrrrrrrrr",
             i);
  fputs ("}}\n", f);
  ck_assert_int_eq (fclose (f), 0);
  return text;
}

START_TEST (largest_ledger_is_read_and_rewritten_within_its_bound)
{
  cleanup_free char *text = largest_ledger_text (SP_LEDGER_MAX_REPOS);
  cleanup_free char *after = NULL;
  cleanup_error sp_error_t err = NULL;
  struct sp_ledger *ledger;

  ck_assert_uint_le (strlen (text), SP_LEDGER_FILE_MAX_BYTES);
  write_ledger_file (text);
  ledger = open_ok (100000);
  /* Rewriting it whole, at its largest, must fit what open reads back.  */
  ck_assert_int_eq (sp_ledger_debit (ledger, NULL, &err), 0);
  sp_ledger_close (ledger);
  after = read_ledger_file ();
  ck_assert_uint_eq (strlen (after), strlen (text));
  ck_assert_ptr_nonnull (strstr (after, "\"used\":1,"));
  ledger = open_ok (100000);
  sp_ledger_close (ledger);
}
END_TEST

START_TEST (ledger_with_too_many_repositories_is_refused)
{
  cleanup_free char *text = largest_ledger_text (SP_LEDGER_MAX_REPOS + 1);
  cleanup_free char *msg = NULL;

  write_ledger_file (text);
  msg = open_fails (100000);
  ck_assert_ptr_nonnull (strstr (msg, SP_LEDGER_FILE));
  ck_assert_msg (strstr (msg, "repositories: must hold at most 256 repositories") != NULL, "%s", msg);
}
END_TEST

START_TEST (charge_the_file_cannot_hold_is_refused_without_poisoning)
{
  cleanup_free char *full = largest_ledger_text (SP_LEDGER_MAX_REPOS);
  cleanup_ledger struct sp_ledger *ledger = NULL;
  cleanup_free char *before = NULL;
  cleanup_free char *after = NULL;
  char existing[SP_REPO_MAX_BYTES + 1];

  write_ledger_file (full);
  ledger = open_ok (100000);
  before = read_ledger_file ();
  memcpy (existing, full + strlen (V2_HEAD (100000, 0)) + 1, SP_REPO_MAX_BYTES);
  existing[SP_REPO_MAX_BYTES] = '\0';
  assert_totals (ledger, existing, UINT64_C (1) << 53, UINT32_MAX);

  ck_assert_int_eq (charge (ledger, "acme/one-too-many", 0, 0), -1);       /* past SP_LEDGER_MAX_REPOS */
  ck_assert_int_eq (charge (ledger, existing, 1, 0), -1);                  /* past 2^53 millibits */
  ck_assert_int_eq (charge_full (ledger, existing, 0, true, 0, NULL), -1); /* past 2^32 - 1 calls */
  ck_assert_int_eq (charge (ledger, "Acme/App", 0, 0), -1);                /* not a repository name */
  ck_assert_int_eq (charge (ledger, "ghp_CANARY/x?y", 0, 0), -1);
  after = read_ledger_file ();
  ck_assert_str_eq (after, before);
  ck_assert_uint_eq (sp_ledger_remaining (ledger), 100000);

  /* Nothing was written, so nothing is poisoned.  */
  ck_assert_int_eq (charge (ledger, existing, 0, 0), 0);
  ck_assert_int_eq (debit (ledger), 0);
  ck_assert_uint_eq (sp_ledger_remaining (ledger), 99998);
}
END_TEST

START_TEST (failed_persist_of_a_charge_poisons_the_ledger)
{
  cleanup_ledger struct sp_ledger *ledger = open_ok (5);
  cleanup_free char *before = NULL;
  cleanup_free char *after = NULL;

  ck_assert_int_eq (charge (ledger, "acme/app", 10, 0), 0);
  before = read_ledger_file ();
  ck_assert_int_eq (mkdirat (state_fd, SP_LEDGER_FILE ".tmp", 0700), 0);
  ck_assert_int_eq (charge (ledger, "acme/app", 10, 0), -1);
  ck_assert_int_eq (charge (ledger, "acme/lib", 10, 0), -1);
  ck_assert_int_eq (unlinkat (state_fd, SP_LEDGER_FILE ".tmp", AT_REMOVEDIR), 0);
  ck_assert_int_eq (charge (ledger, "acme/app", 10, 0), -1);
  ck_assert_int_eq (debit (ledger), -1);
  after = read_ledger_file ();
  ck_assert_str_eq (after, before);
  assert_totals (ledger, "acme/app", 10, 0);
  assert_totals (ledger, "acme/lib", 0, 0);
  ck_assert_uint_eq (sp_ledger_remaining (ledger), 4);
}
END_TEST

#define CHARGE_THREADS     8
#define CHARGES_PER_THREAD 50
#define CHARGE_MILLIBITS   1001

static void *
charge_many (void *arg)
{
  struct sp_ledger *ledger = arg;
  intptr_t granted = 0;

  for (int i = 0; i < CHARGES_PER_THREAD; i++)
    if (charge (ledger, i % 2 ? "acme/lib" : "acme/app", CHARGE_MILLIBITS, 0) == 0)
      granted++;
  return (void *)granted;
}

START_TEST (concurrent_charges_are_exact)
{
  const uint32_t calls = CHARGE_THREADS * CHARGES_PER_THREAD;
  const uint64_t per_repo = (uint64_t)calls / 2 * CHARGE_MILLIBITS;
  struct sp_ledger *ledger = open_ok (calls + 7);
  cleanup_free char *text = NULL;
  pthread_t threads[CHARGE_THREADS];
  intptr_t granted = 0;
  char expected[256];

  for (int i = 0; i < CHARGE_THREADS; i++)
    ck_assert_int_eq (pthread_create (&threads[i], NULL, charge_many, ledger), 0);
  for (int i = 0; i < CHARGE_THREADS; i++)
    {
      void *ret;
      ck_assert_int_eq (pthread_join (threads[i], &ret), 0);
      granted += (intptr_t)ret;
    }
  ck_assert_int_eq (granted, calls);
  ck_assert_uint_eq (sp_ledger_remaining (ledger), 7);
  assert_totals (ledger, "acme/app", per_repo, 0);
  assert_totals (ledger, "acme/lib", per_repo, 0);
  sp_ledger_close (ledger);

  text = read_ledger_file ();
  snprintf (expected, sizeof (expected),
            "{\"version\":2,\"limit\":%u,\"used\":%u,\"repositories\":{\"acme/app\":{\"millibits\":%" PRIu64
            ",\"unbounded_calls\":0},\"acme/lib\":{\"millibits\":%" PRIu64 ",\"unbounded_calls\":0}}}\n",
            calls + 7, calls, per_repo, per_repo);
  ck_assert_str_eq (text, expected);
  ledger = open_ok (calls + 7);
  ck_assert_uint_eq (sp_ledger_remaining (ledger), 7);
  assert_totals (ledger, "acme/app", per_repo, 0);
  assert_totals (ledger, "acme/lib", per_repo, 0);
  sp_ledger_close (ledger);
}
END_TEST

/* The run bit budget: what every repository's calls together could carry.  */

#define V3_HEAD(limit, used, run_bits)                                                                       \
  "{\"version\":3,\"limit\":" #limit ",\"used\":" #used ",\"run_bit_budget\":" #run_bits ",\"repositories\"" \
  ":{"

static struct sp_ledger *
open_run_ok (uint32_t limit, uint64_t run_bits)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_ledger *ledger = NULL;

  if (sp_ledger_open (state_fd, limit, run_bits * 1000, &ledger, &err) < 0)
    ck_abort_msg ("sp_ledger_open: %s", sp_error_message (err));
  return ledger;
}

static char *
open_run_fails (uint32_t limit, uint64_t run_bits)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_ledger *ledger = NULL;

  ck_assert_int_eq (sp_ledger_open (state_fd, limit, run_bits * 1000, &ledger, &err), -1);
  ck_assert_ptr_null (ledger);
  return strdup (sp_error_message (err));
}

static void
assert_run (struct sp_ledger *ledger, uint64_t budget, uint64_t millibits, uint64_t unbounded)
{
  uint64_t b = 99, m = 99, u = 99;

  sp_ledger_run_totals (ledger, &b, &m, &u);
  ck_assert_uint_eq (b, budget);
  ck_assert_uint_eq (m, millibits);
  ck_assert_uint_eq (u, unbounded);
}

START_TEST (run_bit_budget_spans_repositories_and_refuses_without_writing)
{
  cleanup_ledger struct sp_ledger *ledger = open_run_ok (10, 5);
  cleanup_free char *before = NULL;
  cleanup_free char *after = NULL;
  cleanup_free char *last = NULL;

  /* Each repository stays far below its own budget of 4 bits; together
     they reach the run's 5 exactly, which is allowed.  */
  ck_assert_int_eq (charge (ledger, "acme/alpha", 2000, 4000), 0);
  ck_assert_int_eq (charge (ledger, "acme/beta", 2000, 4000), 0);
  assert_run (ledger, 5000, 4000, 0);
  ck_assert_int_eq (charge (ledger, "acme/alpha", 1000, 4000), 0);
  assert_run (ledger, 5000, 5000, 0);
  before = read_ledger_file ();
  ck_assert_str_eq (before,
                    V3_HEAD (10, 3, 5) ENTRY ("acme/alpha", 3000, 0) "," ENTRY ("acme/beta", 2000, 0) "}}\n");

  /* One millibit more on either repository, or on one never charged, is
     refused, though each repository's own budget would allow it.  */
  ck_assert_int_eq (charge (ledger, "acme/alpha", 1, 4000), SP_LEDGER_RUN_BITS_EXHAUSTED);
  ck_assert_int_eq (charge (ledger, "acme/beta", 1, 4000), SP_LEDGER_RUN_BITS_EXHAUSTED);
  ck_assert_int_eq (charge (ledger, "acme/gamma", 1, 0), SP_LEDGER_RUN_BITS_EXHAUSTED);
  ck_assert_int_eq (charge (ledger, "acme/beta", UINT64_MAX, 0), SP_LEDGER_RUN_BITS_EXHAUSTED);
  after = read_ledger_file ();
  ck_assert_str_eq (after, before);
  ck_assert_uint_eq (sp_ledger_remaining (ledger), 7);
  assert_totals (ledger, "acme/gamma", 0, 0);
  assert_run (ledger, 5000, 5000, 0);

  /* Control: a charge of nothing still fits, so the refusals above were
     the bits', not the ledger's.  */
  ck_assert_int_eq (charge (ledger, "acme/beta", 0, 4000), 0);
  last = read_ledger_file ();
  ck_assert_str_eq (last,
                    V3_HEAD (10, 4, 5) ENTRY ("acme/alpha", 3000, 0) "," ENTRY ("acme/beta", 2000, 0) "}}\n");
}
END_TEST

START_TEST (run_bit_budget_order_is_invocations_then_repository_then_run)
{
  cleanup_ledger struct sp_ledger *ledger = open_run_ok (2, 3);

  ck_assert_int_eq (charge (ledger, "acme/alpha", 3000, 0), 0);
  /* Past both the repository's budget and the run's: the repository's is
     named.  */
  ck_assert_int_eq (charge (ledger, "acme/alpha", 1, 3000), SP_LEDGER_BITS_EXHAUSTED);
  ck_assert_int_eq (charge (ledger, "acme/beta", 1, 3000), SP_LEDGER_RUN_BITS_EXHAUSTED);
  ck_assert_int_eq (charge (ledger, "acme/beta", 0, 0), 0);
  ck_assert_int_eq (charge (ledger, "acme/beta", 1, 3000), SP_LEDGER_EXHAUSTED);
}
END_TEST

START_TEST (unbounded_or_uncharged_calls_never_fit_a_run_bit_budget)
{
  cleanup_ledger struct sp_ledger *ledger = open_run_ok (10, 1000000);
  cleanup_free char *before = read_ledger_file ();
  cleanup_free char *after = NULL;

  ck_assert_int_eq (charge_full (ledger, "acme/alpha", 0, true, 0, NULL), SP_LEDGER_RUN_BITS_EXHAUSTED);
  /* Nor does a debit that charges nothing: its bits would go unseen.  */
  ck_assert_int_eq (debit (ledger), SP_LEDGER_RUN_BITS_EXHAUSTED);
  after = read_ledger_file ();
  ck_assert_str_eq (after, before);
  assert_run (ledger, 1000000000, 0, 0);
}
END_TEST

START_TEST (run_bit_budget_and_total_survive_restart_and_are_pinned)
{
  struct sp_ledger *ledger = open_run_ok (10, 4);
  cleanup_free char *pinned = NULL;
  cleanup_free char *after = NULL;
  cleanup_free char *msg_none = NULL;
  cleanup_free char *msg_more = NULL;
  cleanup_free char *msg_less = NULL;

  ck_assert_int_eq (charge (ledger, "acme/alpha", 2500, 0), 0);
  ck_assert_int_eq (charge (ledger, "acme/beta", 1500, 0), 0);
  sp_ledger_close (ledger);
  pinned = read_ledger_file ();

  /* The same budget: the total goes on, and stays spent.  */
  ledger = open_run_ok (10, 4);
  assert_run (ledger, 4000, 4000, 0);
  ck_assert_uint_eq (sp_ledger_remaining (ledger), 8);
  ck_assert_int_eq (charge (ledger, "acme/beta", 1, 0), SP_LEDGER_RUN_BITS_EXHAUSTED);
  ck_assert_int_eq (charge (ledger, "acme/alpha", 1, 0), SP_LEDGER_RUN_BITS_EXHAUSTED);
  sp_ledger_close (ledger);

  /* Dropped, raised or lowered: refused, naming both, the file untouched.  */
  msg_none = open_run_fails (10, 0);
  ck_assert_msg (strstr (msg_none, "holds a run bit budget of 4 bits but --run-bit-budget is not given")
                     != NULL,
                 "%s", msg_none);
  msg_more = open_run_fails (10, 5);
  ck_assert_msg (strstr (msg_more, "of 4 bits but --run-bit-budget is 5 bits") != NULL, "%s", msg_more);
  msg_less = open_run_fails (10, 3);
  ck_assert_msg (strstr (msg_less, "never changes") != NULL, "%s", msg_less);
  after = read_ledger_file ();
  ck_assert_str_eq (after, pinned);
}
END_TEST

START_TEST (run_bit_budget_given_to_a_v2_ledger_is_pinned_at_open_over_its_sum)
{
  static const char v2[]
      = V2_HEAD (10, 3) ENTRY ("acme/alpha", 2000, 1) "," ENTRY ("acme/beta", 1000, 0) "}}\n";
  struct sp_ledger *ledger;
  cleanup_free char *plain = NULL;
  cleanup_free char *pinned = NULL;
  cleanup_free char *msg = NULL;

  /* Without one, a version 2 ledger stays version 2, byte for byte.  */
  write_ledger_file (v2);
  ledger = open_ok (10);
  assert_run (ledger, 0, 3000, 1);
  sp_ledger_close (ledger);
  plain = read_ledger_file ();
  ck_assert_str_eq (plain, v2);

  /* With one, it is written before open returns: the run's total is the
     repositories' sum, already charged.  */
  ledger = open_run_ok (10, 4);
  pinned = read_ledger_file ();
  ck_assert_str_eq (pinned,
                    V3_HEAD (10, 3, 4) ENTRY ("acme/alpha", 2000, 1) "," ENTRY ("acme/beta", 1000, 0) "}}\n");
  assert_run (ledger, 4000, 3000, 1);
  ck_assert_int_eq (charge (ledger, "acme/gamma", 1001, 0), SP_LEDGER_RUN_BITS_EXHAUSTED);
  ck_assert_int_eq (charge (ledger, "acme/gamma", 1000, 0), 0);
  sp_ledger_close (ledger);
  msg = open_fails (10);
  ck_assert_ptr_nonnull (strstr (msg, "run bit budget"));
}
END_TEST

START_TEST (v1_ledger_takes_a_run_bit_budget_only_when_nothing_was_debited)
{
  cleanup_free char *msg = NULL;
  cleanup_free char *after = NULL;
  cleanup_free char *fresh = NULL;
  struct sp_ledger *ledger;

  write_ledger_file ("{\"version\":1,\"limit\":5,\"used\":2}\n");
  msg = open_run_fails (5, 10);
  ck_assert_msg (strstr (msg, "version 1 ledger whose 2 calls' bits were never recorded") != NULL, "%s", msg);
  after = read_ledger_file ();
  ck_assert_str_eq (after, "{\"version\":1,\"limit\":5,\"used\":2}\n");

  write_ledger_file ("{\"version\":1,\"limit\":5,\"used\":0}\n");
  ledger = open_run_ok (5, 10);
  sp_ledger_close (ledger);
  fresh = read_ledger_file ();
  ck_assert_str_eq (fresh, V3_HEAD (5, 0, 10) "}}\n");
}
END_TEST

START_TEST (snapshot_shows_the_run_bit_budget_and_total)
{
  struct sp_ledger *ledger = open_run_ok (10, 7);
  cleanup_ledger_snapshot struct sp_ledger_snapshot *snap = NULL;
  cleanup_error sp_error_t err = NULL;

  ck_assert_int_eq (charge_full (ledger, "acme/alpha", 2000, false, 0, NULL), 0);
  ck_assert_int_eq (charge_full (ledger, "acme/beta", 2500, false, 0, NULL), 0);
  sp_ledger_close (ledger);
  ck_assert_int_eq (sp_ledger_read_snapshot (state_fd, &snap, &err), 0);
  ck_assert_int_eq (snap->version, 3);
  ck_assert_uint_eq (snap->run_bit_budget_millibits, 7000);
  ck_assert_uint_eq (snap->run_millibits, 4500);
  ck_assert_uint_eq (snap->run_unbounded_calls, 0);
}
END_TEST

START_TEST (out_of_range_run_bit_budget_is_refused)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_ledger *ledger = NULL;

  ck_assert_int_eq (sp_ledger_open (state_fd, 5, 1500, &ledger, &err), -1);
  sp_error_release (&err);
  ck_assert_int_eq (sp_ledger_open (state_fd, 5, (uint64_t)(SP_RUN_BIT_BUDGET_MAX + 1) * 1000, &ledger, &err),
                    -1);
  ck_assert_ptr_null (ledger);
  ck_assert_int_eq (faccessat (state_fd, SP_LEDGER_FILE, F_OK, 0), -1);
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
  tcase_add_test (tc, v1_ledger_opens_and_is_upgraded_on_next_debit);
  tcase_add_test (tc, charges_sum_per_repository_and_persist_across_restart);
  tcase_add_test (tc, bit_budget_allows_equal_and_refuses_above_without_writing);
  tcase_add_test (tc, invocation_budget_is_checked_before_the_bit_budget);
  tcase_add_test (tc, unbounded_calls_are_counted_and_never_fit_a_bit_budget);
  tcase_add_test (tc, malformed_v2_ledger_is_refused_naming_the_key);
  tcase_add_test (tc, repository_key_that_is_no_name_is_never_echoed);
  tcase_add_test (tc, largest_ledger_is_read_and_rewritten_within_its_bound);
  tcase_add_test (tc, ledger_with_too_many_repositories_is_refused);
  tcase_add_test (tc, charge_the_file_cannot_hold_is_refused_without_poisoning);
  tcase_add_test (tc, failed_persist_of_a_charge_poisons_the_ledger);
  tcase_add_test (tc, concurrent_charges_are_exact);
  tcase_add_test (tc, run_bit_budget_spans_repositories_and_refuses_without_writing);
  tcase_add_test (tc, run_bit_budget_order_is_invocations_then_repository_then_run);
  tcase_add_test (tc, unbounded_or_uncharged_calls_never_fit_a_run_bit_budget);
  tcase_add_test (tc, run_bit_budget_and_total_survive_restart_and_are_pinned);
  tcase_add_test (tc, run_bit_budget_given_to_a_v2_ledger_is_pinned_at_open_over_its_sum);
  tcase_add_test (tc, v1_ledger_takes_a_run_bit_budget_only_when_nothing_was_debited);
  tcase_add_test (tc, snapshot_shows_the_run_bit_budget_and_total);
  tcase_add_test (tc, out_of_range_run_bit_budget_is_refused);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
