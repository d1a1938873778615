/* What `status` reads: the audit log's lines summed up by run, status,
   repository and cause, beside the ledger; a torn last line tolerated, a
   malformed line or ledger refused without quoting it, a large log read
   from its end in bounded windows, nothing written, and nothing of an
   outcome, a reason or a script kept.  The lines are rendered by the real
   sp_audit_render, as serve writes them.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "os/fileio.h"
#include "serve/audit.h"
#include "serve/ledger.h"
#include "status/run_status.h"

#include "sp_check.h"
#include "sp_tmpdir.h"

#define CANARY "ghp_CANARYrunstatus0123456789abcdefABCD"

#define OUTCOME(s)                                                                                           \
  {                                                                                                          \
    (const uint8_t *)(s), sizeof (s) - 1                                                                     \
  }

/* The agent's outcomes carry the canary: nothing of them may be kept.  */
static const struct sp_bytes outcomes[SP_OUTCOME_COUNT]
    = { OUTCOME ("YES-" CANARY), OUTCOME ("NO-" CANARY), OUTCOME ("UNKNOWN") };

#define T0 1796022062345678901ULL

static char dir_path[64];
static int dir_fd = -1;

static void
setup (void)
{
  strcpy (dir_path, "/tmp/sp-status-XXXXXX");
  dir_fd = sp_tmpdir_make (dir_path);
}

static void
teardown (void)
{
  close (dir_fd);
  dir_fd = -1;
  sp_tmpdir_remove (dir_path);
}

/* STATE/audit (0700) and an empty audit.jsonl (0600), as serve makes them.  */
static void
make_audit (void)
{
  int fd;

  ck_assert_int_eq (mkdirat (dir_fd, SP_AUDIT_DIR, 0700), 0);
  fd = openat (dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ck_assert_int_ge (fd, 0);
  close (fd);
}

static void
append_bytes (const char *data, size_t len)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_close int fd = openat (dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, O_WRONLY | O_APPEND | O_CLOEXEC);

  ck_assert_int_ge (fd, 0);
  if (sp_write_all (fd, data, len, &err) < 0)
    ck_abort_msg ("append: %s", sp_error_message (err));
}

static void
append_text (const char *text)
{
  append_bytes (text, strlen (text));
}

static void
write_ledger (const char *text)
{
  cleanup_error sp_error_t err = NULL;

  if (sp_write_file_atomic_at (dir_fd, SP_LEDGER_FILE, text, strlen (text), 0600, &err) < 0)
    ck_abort_msg ("write the ledger: %s", sp_error_message (err));
}

/* One record as serve renders it.  */
struct rec
{
  const char *run;
  unsigned inv;
  const char *status; /* SP_AUDIT_STATUS_* */
  const char *repo;
  bool debited;
  const char *reason;
  uint8_t answer;
  int exit_code; /* -2: not launched; -1: no exit status */
  int signal;
  bool overflow;
  enum sp_cause cause; /* none unless given */
};

static char *
render (const struct rec *r, size_t *len)
{
  cleanup_error sp_error_t err = NULL;
  bool admission = strcmp (r->status, SP_AUDIT_STATUS_ADMITTED) == 0;
  struct sp_run_facts facts = {
    .launched = true,
    .exit_code = r->exit_code,
    .signal = r->signal,
    .wall_ns = 1000000,
  };
  char id[80];
  struct sp_audit_record rec = {
    .id = id,
    .run = r->run,
    .received_ns = T0 + r->inv * 1000000000ULL,
    .started_ns = T0 + r->inv * 1000000000ULL,
    .finished_ns = admission ? 0 : T0 + r->inv * 1000000000ULL + 500000000ULL,
    .repo = r->repo,
    .outcomes = r->repo ? outcomes : NULL,
    .script_sha256
    = r->repo ? "sha256:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff" : NULL,
    .debited = r->debited,
    .budget_remaining = 5,
    .answer = r->answer,
    .admission = admission,
    .status = r->status,
    .cause = r->cause,
    .reason = r->reason,
    .facts = !admission && r->exit_code != -2 ? &facts : NULL,
    .release = "immediate",
    .release_ms = -1,
    .release_overflow = r->overflow,
    .charged = r->debited,
    .millibits = 2000,
    .timing_unbounded = true,
    .repo_millibits = 2000,
  };
  char *line = NULL;

  snprintf (id, sizeof (id), "%s-%u", r->run, r->inv);
  if (sp_audit_render (&rec, &line, len, &err) < 0)
    ck_abort_msg ("sp_audit_render: %s", sp_error_message (err));
  return line;
}

static void
append_rec (const struct rec *r)
{
  size_t len;
  cleanup_free char *line = render (r, &len);

  append_bytes (line, len);
}

/* An invocation that ran: its admission record, then its result.  */
static void
append_ran (const char *run, unsigned inv, const char *repo, const char *status, uint8_t answer,
            int exit_code, enum sp_cause cause, const char *reason)
{
  append_rec (
      &(struct rec){ run, inv, SP_AUDIT_STATUS_ADMITTED, repo, true, NULL, 0, -2, 0, false, SP_CAUSE_NONE });
  append_rec (&(struct rec){ run, inv, status, repo, true, reason, answer, exit_code, 0, false, cause });
}

static void
append_refused (const char *run, unsigned inv, const char *repo, enum sp_cause cause, const char *reason)
{
  append_rec (
      &(struct rec){ run, inv, SP_AUDIT_STATUS_REFUSED, repo, false, reason, 0, -2, 0, false, cause });
}

static struct sp_run_status *
read_ok_window (uint64_t window)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_run_status_options opt = { .owner = geteuid (), .scan_max_bytes = window };
  struct sp_run_status *st = NULL;

  if (sp_run_status_read (dir_fd, &opt, &st, &err) < 0)
    ck_abort_msg ("sp_run_status_read: %s", sp_error_message (err));
  ck_assert_ptr_nonnull (st);
  return st;
}

static struct sp_run_status *
read_ok (void)
{
  return read_ok_window (0);
}

static char *
read_fails (void)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_run_status_options opt = { .owner = geteuid () };
  struct sp_run_status *st = NULL;

  ck_assert_int_eq (sp_run_status_read (dir_fd, &opt, &st, &err), -1);
  ck_assert_ptr_null (st);
  return strdup (sp_error_message (err));
}

static const struct sp_run_status_repo *
repo_of (const struct sp_run_status *st, const char *name)
{
  for (size_t i = 0; i < st->n_repos; i++)
    if (strcmp (st->repos[i].name, name) == 0)
      return &st->repos[i];
  return NULL;
}

/* A typical state: run "aaa" (killed with one invocation admitted and never
   finished), then run "bbb", on two repositories.  */
static void
typical_state (void)
{
  make_audit ();
  append_ran ("aaa", 2, "acme/alpha", SP_AUDIT_STATUS_ANSWERED, 1, 0, SP_CAUSE_NONE, NULL);
  append_refused ("aaa", 3, NULL, SP_CAUSE_UNKNOWN_REPOSITORY, "request: repo: not in the allowlist");
  append_rec (&(struct rec){ "aaa", 4, SP_AUDIT_STATUS_ADMITTED, "acme/beta", true, NULL, 0, -2, 0, false,
                             SP_CAUSE_NONE });
  append_ran ("bbb", 2, "acme/alpha", SP_AUDIT_STATUS_ANSWERED, 2, 0, SP_CAUSE_NONE, NULL);
  append_ran ("bbb", 3, "acme/beta", SP_AUDIT_STATUS_PROBE, 0, 1, SP_CAUSE_PROBE_EXIT,
              "the probe exited with status 1");
  append_ran ("bbb", 4, "acme/alpha", SP_AUDIT_STATUS_TIMED_OUT, 0, -1, SP_CAUSE_TIMEOUT,
              "the probe ran past the 5 s timeout");
  append_refused ("bbb", 5, "acme/alpha", SP_CAUSE_BUDGET_SPENT, "the invocation budget is spent");
  write_ledger ("{\"version\":2,\"limit\":5,\"used\":5,\"repositories\":{\"acme/alpha\":{\"millibits\":6000,"
                "\"unbounded_calls\":3},\"acme/beta\":{\"millibits\":4000,\"unbounded_calls\":2}}}\n");
}

START_TEST (counts_by_run_status_and_repository)
{
  cleanup_run_status struct sp_run_status *st = NULL;
  const struct sp_run_status_repo *alpha, *beta;

  typical_state ();
  st = read_ok ();
  ck_assert_uint_eq (st->ledger->limit, 5);
  ck_assert_uint_eq (st->ledger->used, 5);
  ck_assert_uint_eq (st->records, 11);
  ck_assert_uint_eq (st->runs, 2);
  ck_assert_str_eq (st->latest_run, "bbb");
  ck_assert_uint_eq (st->read_from, 0);
  ck_assert_uint_eq (st->torn_tail_bytes, 0);

  ck_assert_uint_eq (st->latest.outcomes[SP_RUN_OUTCOME_ANSWERED], 1);
  ck_assert_uint_eq (st->latest.outcomes[SP_RUN_OUTCOME_PROBE], 1);
  ck_assert_uint_eq (st->latest.outcomes[SP_RUN_OUTCOME_TIMED_OUT], 1);
  ck_assert_uint_eq (st->latest.outcomes[SP_RUN_OUTCOME_REFUSED], 1);
  ck_assert_uint_eq (st->latest.admitted, 3);
  ck_assert_uint_eq (st->latest.unfinished, 0);

  ck_assert_uint_eq (st->all.outcomes[SP_RUN_OUTCOME_ANSWERED], 2);
  ck_assert_uint_eq (st->all.outcomes[SP_RUN_OUTCOME_REFUSED], 2);
  ck_assert_uint_eq (st->all.admitted, 5);
  /* aaa-4 was admitted and never finished (a kill -9).  */
  ck_assert_uint_eq (st->all.unfinished, 1);

  alpha = repo_of (st, "acme/alpha");
  beta = repo_of (st, "acme/beta");
  ck_assert_ptr_nonnull (alpha);
  ck_assert_ptr_nonnull (beta);
  ck_assert_uint_eq (st->n_repos, 2);
  ck_assert_uint_eq (alpha->invocations, 3);
  ck_assert_uint_eq (beta->invocations, 2);
  ck_assert (alpha->in_ledger);
  ck_assert_uint_eq (alpha->millibits, 6000);
  ck_assert_uint_eq (beta->unbounded_calls, 2);
}
END_TEST

START_TEST (failures_keep_order_cause_and_numbers)
{
  cleanup_run_status struct sp_run_status *st = NULL;
  const struct sp_run_failure *f;

  typical_state ();
  st = read_ok ();
  ck_assert_uint_eq (st->failures_total, 4);
  ck_assert_uint_eq (st->n_failures, 4);
  f = sp_run_status_failure (st, 0);
  ck_assert_str_eq (f->id, "aaa-3");
  ck_assert_str_eq (f->repo, "");
  ck_assert_int_eq (f->cause, SP_CAUSE_UNKNOWN_REPOSITORY);
  f = sp_run_status_failure (st, 1);
  ck_assert_str_eq (f->id, "bbb-3");
  ck_assert_str_eq (f->repo, "acme/beta");
  ck_assert_int_eq (f->status, SP_RUN_OUTCOME_PROBE);
  ck_assert_int_eq (f->cause, SP_CAUSE_PROBE_EXIT);
  ck_assert (f->has_exit);
  ck_assert_int_eq (f->exit_code, 1);
  ck_assert_str_eq (f->time, "2026-11-30T07:01:05.845Z");
  f = sp_run_status_failure (st, 2);
  ck_assert_int_eq (f->cause, SP_CAUSE_TIMEOUT);
  ck_assert (!f->has_exit);
  f = sp_run_status_failure (st, 3);
  ck_assert_int_eq (f->cause, SP_CAUSE_BUDGET_SPENT);
  ck_assert_int_eq (f->oom, -1);
  ck_assert_uint_eq (st->causes[SP_CAUSE_UNKNOWN_REPOSITORY], 1);
  ck_assert_uint_eq (st->causes[SP_CAUSE_BUDGET_SPENT], 1);
}
END_TEST

START_TEST (only_the_last_failures_are_kept_oldest_first)
{
  cleanup_run_status struct sp_run_status *st = NULL;

  make_audit ();
  for (unsigned i = 1; i <= 25; i++)
    append_refused ("ccc", i, NULL, SP_CAUSE_QUEUE_FULL, "the queue is full");
  st = read_ok ();
  ck_assert_uint_eq (st->failures_total, 25);
  ck_assert_uint_eq (st->n_failures, SP_RUN_STATUS_FAILURES_MAX);
  for (size_t i = 0; i < SP_RUN_STATUS_FAILURES_MAX; i++)
    {
      char want[16];

      snprintf (want, sizeof (want), "ccc-%zu", 25 - SP_RUN_STATUS_FAILURES_MAX + 1 + i);
      ck_assert_str_eq (sp_run_status_failure (st, i)->id, want);
    }
}
END_TEST

/* The cause is the one serve recorded, as a value: a reason's words never
   decide it, a line older than causes says so, and a name this version
   does not know is `other`.  */
START_TEST (causes_are_read_as_recorded_never_from_reasons)
{
  cleanup_run_status struct sp_run_status *st = NULL;
  cleanup_free char *line = NULL;
  char *at;
  size_t len;

  make_audit ();
  /* The words say "queue full"; the value says timeout.  */
  append_ran ("eee", 2, "acme/alpha", SP_AUDIT_STATUS_TIMED_OUT, 0, -1, SP_CAUSE_TIMEOUT,
              "the queue is full");
  append_ran ("eee", 3, "acme/alpha", SP_AUDIT_STATUS_CANCELLED, 0, -1, SP_CAUSE_CLIENT_GONE,
              "the client went away while the probe ran");
  /* A line written before causes were recorded: no `cause` key.  */
  line = render (&(struct rec){ "eee", 4, SP_AUDIT_STATUS_REFUSED, NULL, false, "the queue is full", 0, -2, 0,
                                false, SP_CAUSE_QUEUE_FULL },
                 &len);
  at = strstr (line, ",\"cause\":\"queue_full\"");
  ck_assert_ptr_nonnull (at);
  memmove (at, at + strlen (",\"cause\":\"queue_full\""),
           strlen (at + strlen (",\"cause\":\"queue_full\"")) + 1);
  append_bytes (line, strlen (line));
  free (line);
  /* A cause a newer serve wrote.  */
  line = render (&(struct rec){ "eee", 5, SP_AUDIT_STATUS_REFUSED, NULL, false, NULL, 0, -2, 0, false,
                                SP_CAUSE_QUEUE_FULL },
                 &len);
  at = strstr (line, "\"queue_full\"");
  ck_assert_ptr_nonnull (at);
  memcpy (at, "\"quux_fuzzy\"", 12);
  append_bytes (line, len);
  write_ledger ("{\"version\":2,\"limit\":9,\"used\":2,\"repositories\":{}}\n");
  st = read_ok ();
  ck_assert_uint_eq (st->failures_total, 4);
  ck_assert_int_eq (sp_run_status_failure (st, 0)->cause, SP_CAUSE_TIMEOUT);
  ck_assert_int_eq (sp_run_status_failure (st, 1)->cause, SP_CAUSE_CLIENT_GONE);
  ck_assert_int_eq (sp_run_status_failure (st, 1)->status, SP_RUN_OUTCOME_CANCELLED);
  ck_assert_int_eq (sp_run_status_failure (st, 2)->cause, SP_CAUSE_UNRECORDED);
  ck_assert_int_eq (sp_run_status_failure (st, 3)->cause, SP_CAUSE_OTHER);
  ck_assert_uint_eq (st->all.outcomes[SP_RUN_OUTCOME_CANCELLED], 1);
}
END_TEST

/* Every cause has a name, and each name reads back as its cause.  */
START_TEST (every_cause_name_round_trips)
{
  for (int c = 0; c < SP_CAUSE_COUNT; c++)
    {
      const char *name = sp_cause_name ((enum sp_cause)c);

      ck_assert_str_ne (name, "?");
      if (c != SP_CAUSE_UNRECORDED && c != SP_CAUSE_OTHER)
        ck_assert_int_eq (sp_cause_from_name (name), c);
    }
  ck_assert_int_eq (sp_cause_from_name (NULL), SP_CAUSE_UNRECORDED);
  ck_assert_int_eq (sp_cause_from_name ("snapshot: x"), SP_CAUSE_OTHER);
  ck_assert_str_eq (sp_cause_name (SP_CAUSE_COUNT), "?");
}
END_TEST

/* The canary is in the outcomes, the results and the reasons: no byte of
   the summary may hold it.  */
START_TEST (summary_keeps_nothing_of_outcomes_or_reasons)
{
  cleanup_run_status struct sp_run_status *st = NULL;

  make_audit ();
  append_ran ("ddd", 2, "acme/alpha", SP_AUDIT_STATUS_ANSWERED, 1, 0, SP_CAUSE_NONE, NULL);
  append_ran ("ddd", 3, "acme/alpha", SP_AUDIT_STATUS_PROBE, 0, 0, SP_CAUSE_PROBE_OUTPUT,
              "/probe/out: result: " CANARY);
  append_refused ("ddd", 4, NULL, SP_CAUSE_BAD_REQUEST, "request: " CANARY);
  append_refused ("ddd", 5, NULL, SP_CAUSE_FRAME, CANARY);
  write_ledger ("{\"version\":2,\"limit\":9,\"used\":2,\"repositories\":{}}\n");
  st = read_ok ();
  ck_assert_uint_eq (st->failures_total, 3);
  ck_assert_ptr_null (memmem (st, sizeof (*st), "CANARY", 6));
  ck_assert_ptr_null (memmem (st->repos, st->n_repos * sizeof (*st->repos), "CANARY", 6));
  ck_assert_int_eq (sp_run_status_failure (st, 2)->cause, SP_CAUSE_FRAME);
}
END_TEST

START_TEST (torn_last_line_is_counted_not_read)
{
  cleanup_run_status struct sp_run_status *st = NULL;
  size_t len;
  cleanup_free char *line = render (
      &(struct rec){ "eee", 9, SP_AUDIT_STATUS_REFUSED, NULL, false, "x", 0, -2, 0, false, SP_CAUSE_NONE },
      &len);

  typical_state ();
  /* A kill -9 (or a read) in the middle of a write: all but its newline.  */
  append_bytes (line, len - 1);
  st = read_ok ();
  ck_assert_uint_eq (st->records, 11);
  ck_assert_uint_eq (st->torn_tail_bytes, len - 1);
  ck_assert_str_eq (st->latest_run, "bbb");
  ck_assert_uint_eq (st->failures_total, 4);
}
END_TEST

/* A log kept across an upgrade: lines written before the release modes
   have no `release_overflow`, and are read as not overflowed; the key, when
   present, is still checked.  */
START_TEST (records_from_before_the_release_modes_are_read)
{
  static const char key[] = ",\"release_overflow\":false";
  cleanup_run_status struct sp_run_status *st = NULL;
  size_t len;
  cleanup_free char *line
      = render (&(struct rec){ "fff", 2, SP_AUDIT_STATUS_PROBE, "acme/alpha", true,
                               "the probe exited with status 1", 0, 1, 0, false, SP_CAUSE_NONE },
                &len);
  cleanup_free char *wrong = strdup (line);
  char *at = strstr (line, key);
  cleanup_free char *msg = NULL;

  ck_assert_ptr_nonnull (at);
  memmove (at, at + strlen (key), strlen (at + strlen (key)) + 1);
  make_audit ();
  append_rec (&(struct rec){ "fff", 2, SP_AUDIT_STATUS_ADMITTED, "acme/alpha", true, NULL, 0, -2, 0, false,
                             SP_CAUSE_NONE });
  append_bytes (line, strlen (line));
  write_ledger ("{\"version\":2,\"limit\":5,\"used\":1,\"repositories\":{\"acme/alpha\":{\"millibits\":2000,"
                "\"unbounded_calls\":1}}}\n");
  st = read_ok ();
  ck_assert_uint_eq (st->records, 2);
  ck_assert_uint_eq (st->failures_total, 1);
  ck_assert (!sp_run_status_failure (st, 0)->release_overflow);

  /* Present, the key must still be a boolean.  */
  at = strstr (wrong, key);
  ck_assert_ptr_nonnull (at);
  memcpy (at + strlen (key) - 5, "\"no\" ", 5);
  append_bytes (wrong, strlen (wrong));
  msg = read_fails ();
  ck_assert_msg (strstr (msg, "`release_overflow` must be a boolean") != NULL, "%s", msg);
}
END_TEST

START_TEST (empty_log_and_no_ledger_yet)
{
  cleanup_run_status struct sp_run_status *st = NULL;
  cleanup_run_status struct sp_run_status *st2 = NULL;
  cleanup_free char *msg = NULL;
  int fd;

  /* Nothing at all: not a state directory.  */
  msg = read_fails ();
  ck_assert_ptr_nonnull (strstr (msg, "not a state directory"));

  /* Staged, never served.  */
  fd = openat (dir_fd, "staged.json", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ck_assert_int_ge (fd, 0);
  close (fd);
  st = read_ok ();
  ck_assert_ptr_null (st->ledger);
  ck_assert (!st->audit_present);
  ck_assert_uint_eq (st->records, 0);

  /* Served once, nothing asked: an empty log.  */
  make_audit ();
  write_ledger ("{\"version\":2,\"limit\":32,\"used\":0,\"repositories\":{}}\n");
  st2 = read_ok ();
  ck_assert (st2->audit_present);
  ck_assert_uint_eq (st2->records, 0);
  ck_assert_uint_eq (st2->runs, 0);
  ck_assert_str_eq (st2->latest_run, "");
  ck_assert_uint_eq (st2->ledger->limit, 32);
}
END_TEST

START_TEST (version_1_ledger_has_no_bits)
{
  cleanup_run_status struct sp_run_status *st = NULL;

  make_audit ();
  append_ran ("fff", 2, "acme/alpha", SP_AUDIT_STATUS_ANSWERED, 1, 0, SP_CAUSE_NONE, NULL);
  write_ledger ("{\"version\":1,\"limit\":10,\"used\":1}\n");
  st = read_ok ();
  ck_assert_int_eq (st->ledger->version, 1);
  ck_assert_uint_eq (st->n_repos, 1);
  ck_assert (!st->repos[0].in_ledger);
  ck_assert_uint_eq (st->repos[0].invocations, 1);
}
END_TEST

/* A malformed line is refused, naming its byte offset and the key, never its
   text.  */
static void
assert_line_refused (const char *bad, const char *want)
{
  cleanup_free char *msg = NULL;

  make_audit ();
  append_ran ("ggg", 2, "acme/alpha", SP_AUDIT_STATUS_ANSWERED, 1, 0, SP_CAUSE_NONE, NULL);
  append_text (bad);
  append_ran ("ggg", 3, "acme/alpha", SP_AUDIT_STATUS_ANSWERED, 1, 0, SP_CAUSE_NONE, NULL);
  write_ledger ("{\"version\":2,\"limit\":10,\"used\":2,\"repositories\":{}}\n");
  msg = read_fails ();
  ck_assert_msg (strstr (msg, "audit/audit.jsonl") && strstr (msg, "the line at byte "), "%s", msg);
  ck_assert_msg (strstr (msg, want) != NULL, "%s lacks %s", msg, want);
  ck_assert_msg (strstr (msg, "CANARY") == NULL, "%s", msg);
}

START_TEST (malformed_json_line_is_refused)
{
  assert_line_refused ("{\"id\":\"" CANARY "\",\n", "parse");
}
END_TEST

START_TEST (unknown_status_is_refused_unquoted)
{
  cleanup_free char *line = NULL;
  size_t len;
  char *p;

  line = render (
      &(struct rec){ "ggg", 7, SP_AUDIT_STATUS_REFUSED, NULL, false, "x", 0, -2, 0, false, SP_CAUSE_NONE },
      &len);
  p = strstr (line, "\"status\":\"refused\"");
  ck_assert_ptr_nonnull (p);
  memcpy (p, "\"status\":\"CANARYx\"", 18);
  assert_line_refused (line, "`status`");
}
END_TEST

START_TEST (bad_repository_name_is_refused_unquoted)
{
  assert_line_refused (
      "{\"id\":\"ggg-9\",\"run\":\"ggg\",\"received\":\"2026-11-30T07:01:02.345Z\","
      "\"finished\":\"2026-11-30T07:01:02.345Z\",\"repo\":\"https://x:ghp_CANARY@github.com/a/b\","
      "\"debited\":false,\"status\":\"refused\",\"reason\":null,\"exit\":null,\"signal\":null,"
      "\"oom\":null,\"timed_out\":null,\"release_overflow\":false}\n",
      "`repo`");
}
END_TEST

START_TEST (missing_key_is_refused)
{
  assert_line_refused ("{\"id\":\"ggg-9\",\"run\":\"ggg\"}\n", "is missing");
}
END_TEST

START_TEST (empty_line_is_refused)
{
  assert_line_refused ("\n", "empty document");
}
END_TEST

START_TEST (overlong_line_is_refused)
{
  cleanup_free char *msg = NULL;
  char big[SP_AUDIT_LINE_MAX_BYTES + 2];

  make_audit ();
  memset (big, 'x', sizeof (big) - 2);
  big[sizeof (big) - 2] = '\n';
  big[sizeof (big) - 1] = '\0';
  append_text (big);
  write_ledger ("{\"version\":2,\"limit\":10,\"used\":0,\"repositories\":{}}\n");
  msg = read_fails ();
  ck_assert_msg (strstr (msg, "longer than 32768 bytes") != NULL, "%s", msg);
}
END_TEST

START_TEST (malformed_ledger_is_refused)
{
  cleanup_free char *msg = NULL;

  make_audit ();
  write_ledger ("{\"version\":2,\"limit\":10,\"used\":11,\"repositories\":{}}\n");
  msg = read_fails ();
  ck_assert_msg (strstr (msg, "budget.json") && strstr (msg, "used"), "%s", msg);
}
END_TEST

START_TEST (ledger_behind_the_log_is_refused)
{
  cleanup_free char *msg = NULL;

  typical_state ();
  write_ledger ("{\"version\":2,\"limit\":10,\"used\":2,\"repositories\":{}}\n");
  msg = read_fails ();
  ck_assert_msg (strstr (msg, "reset or replaced") != NULL, "%s", msg);
}
END_TEST

START_TEST (log_without_ledger_is_refused)
{
  cleanup_free char *msg = NULL;

  make_audit ();
  append_ran ("hhh", 2, "acme/alpha", SP_AUDIT_STATUS_ANSWERED, 1, 0, SP_CAUSE_NONE, NULL);
  msg = read_fails ();
  ck_assert_msg (strstr (msg, "budget is unknown") != NULL, "%s", msg);
}
END_TEST

START_TEST (log_open_to_others_is_refused)
{
  cleanup_free char *msg = NULL;

  typical_state ();
  ck_assert_int_eq (fchmodat (dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, 0644, 0), 0);
  msg = read_fails ();
  ck_assert_msg (strstr (msg, "group or others") != NULL, "%s", msg);
}
END_TEST

START_TEST (log_that_is_a_fifo_or_symlink_is_refused_without_hanging)
{
  cleanup_free char *msg = NULL;
  cleanup_free char *msg2 = NULL;

  typical_state ();
  ck_assert_int_eq (unlinkat (dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, 0), 0);
  ck_assert_int_eq (mkfifoat (dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, 0600), 0);
  msg = read_fails ();
  ck_assert_msg (strstr (msg, "not a regular file") != NULL, "%s", msg);
  ck_assert_int_eq (unlinkat (dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, 0), 0);
  ck_assert_int_eq (symlinkat ("/etc/passwd", dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE), 0);
  msg2 = read_fails ();
  ck_assert_msg (strstr (msg2, "audit/audit.jsonl") != NULL, "%s", msg2);
}
END_TEST

static bool
same_time (const struct timespec *a, const struct timespec *b)
{
  return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* Reading writes nothing: no lock file, no temporary, no change.  */
START_TEST (reading_writes_nothing)
{
  cleanup_run_status struct sp_run_status *st = NULL;
  struct stat before_ledger, after_ledger, before_log, after_log, before_dir, after_dir;

  typical_state ();
  ck_assert_int_eq (fstatat (dir_fd, SP_LEDGER_FILE, &before_ledger, 0), 0);
  ck_assert_int_eq (fstatat (dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, &before_log, 0), 0);
  ck_assert_int_eq (fstat (dir_fd, &before_dir), 0);
  st = read_ok ();
  ck_assert_int_eq (fstatat (dir_fd, SP_LEDGER_FILE, &after_ledger, 0), 0);
  ck_assert_int_eq (fstatat (dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, &after_log, 0), 0);
  ck_assert_int_eq (fstat (dir_fd, &after_dir), 0);
  ck_assert_int_eq (faccessat (dir_fd, SP_LEDGER_LOCK, F_OK, AT_SYMLINK_NOFOLLOW), -1);
  ck_assert_int_eq (before_ledger.st_ino, after_ledger.st_ino);
  ck_assert (same_time (&before_ledger.st_mtim, &after_ledger.st_mtim));
  ck_assert_int_eq (before_log.st_size, after_log.st_size);
  ck_assert (same_time (&before_log.st_mtim, &after_log.st_mtim));
  ck_assert (same_time (&before_dir.st_mtim, &after_dir.st_mtim));
  ck_assert_int_eq (before_dir.st_nlink, after_dir.st_nlink);
}
END_TEST

/* A large log, 20000 invocations in 40000 lines (about 30 MB), read whole,
   then through a 1 MiB window from its end that starts on a whole line.  */
#define LARGE_INVOCATIONS 20000

static void
large_state (void)
{
  cleanup_free char *buf = NULL;
  size_t cap = 0, len = 0;

  make_audit ();
  for (unsigned i = 1; i <= LARGE_INVOCATIONS; i++)
    {
      size_t n1, n2;
      cleanup_free char *a = render (&(struct rec){ "lll", i, SP_AUDIT_STATUS_ADMITTED, "acme/alpha", true,
                                                    NULL, 0, -2, 0, false, SP_CAUSE_NONE },
                                     &n1);
      cleanup_free char *b
          = render (&(struct rec){ "lll", i, i % 4 ? SP_AUDIT_STATUS_ANSWERED : SP_AUDIT_STATUS_PROBE,
                                   "acme/alpha", true, i % 4 ? NULL : "the probe exited with status 3",
                                   i % 4 ? 1 : 0, i % 4 ? 0 : 3, 0, false, SP_CAUSE_NONE },
                    &n2);

      if (len + n1 + n2 > cap)
        {
          cap = (cap + n1 + n2) * 2;
          buf = realloc (buf, cap);
          ck_assert_ptr_nonnull (buf);
        }
      memcpy (buf + len, a, n1);
      memcpy (buf + len + n1, b, n2);
      len += n1 + n2;
    }
  append_bytes (buf, len);
  write_ledger ("{\"version\":2,\"limit\":100000,\"used\":20000,\"repositories\":{\"acme/alpha\":{"
                "\"millibits\":40000000,\"unbounded_calls\":20000}}}\n");
}

START_TEST (large_log_read_whole)
{
  cleanup_run_status struct sp_run_status *st = NULL;
  struct timespec t0, t1;

  large_state ();
  clock_gettime (CLOCK_MONOTONIC, &t0);
  st = read_ok ();
  clock_gettime (CLOCK_MONOTONIC, &t1);
  ck_assert_uint_eq (st->records, 2 * LARGE_INVOCATIONS);
  ck_assert_uint_eq (st->all.admitted, LARGE_INVOCATIONS);
  ck_assert_uint_eq (st->all.outcomes[SP_RUN_OUTCOME_PROBE], LARGE_INVOCATIONS / 4);
  ck_assert_uint_eq (st->all.unfinished, 0);
  ck_assert_uint_eq (st->failures_total, LARGE_INVOCATIONS / 4);
  ck_assert_str_eq (sp_run_status_failure (st, SP_RUN_STATUS_FAILURES_MAX - 1)->id, "lll-20000");
  ck_assert_uint_eq (st->repos[0].invocations, LARGE_INVOCATIONS);
  /* Generous: a bound against a quadratic read, not a benchmark.  */
  ck_assert_int_lt (t1.tv_sec - t0.tv_sec, 20);
}
END_TEST

START_TEST (large_log_read_from_its_end)
{
  cleanup_run_status struct sp_run_status *st = NULL;
  cleanup_free char *text = NULL;
  cleanup_close int fd = -1;
  cleanup_error sp_error_t err = NULL;
  const uint64_t window = 1 << 20;
  uint64_t whole_lines = 0;
  size_t len;

  large_state ();
  st = read_ok_window (window);
  fd = openat (dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, O_RDONLY | O_CLOEXEC);
  ck_assert_int_ge (fd, 0);
  if (sp_read_fd_capped (fd, 1 << 30, &text, &len, &err) < 0)
    ck_abort_msg ("%s", sp_error_message (err));
  ck_assert_uint_eq (st->audit_bytes, len);
  ck_assert_uint_gt (st->read_from, 0);
  ck_assert_uint_ge (st->read_from, len - window);
  /* The window starts on a line, and holds every line from there.  */
  ck_assert_int_eq (text[st->read_from - 1], '\n');
  for (size_t i = st->read_from; i < len; i++)
    whole_lines += text[i] == '\n';
  ck_assert_uint_eq (st->records, whole_lines);
  ck_assert_uint_lt (st->records, 2 * LARGE_INVOCATIONS);
  ck_assert_str_eq (sp_run_status_failure (st, SP_RUN_STATUS_FAILURES_MAX - 1)->id, "lll-20000");
}
END_TEST

static Suite *
run_status_suite (void)
{
  Suite *s = suite_create ("run_status");
  TCase *tc = tcase_create ("core");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, counts_by_run_status_and_repository);
  tcase_add_test (tc, failures_keep_order_cause_and_numbers);
  tcase_add_test (tc, only_the_last_failures_are_kept_oldest_first);
  tcase_add_test (tc, causes_are_read_as_recorded_never_from_reasons);
  tcase_add_test (tc, every_cause_name_round_trips);
  tcase_add_test (tc, summary_keeps_nothing_of_outcomes_or_reasons);
  tcase_add_test (tc, torn_last_line_is_counted_not_read);
  tcase_add_test (tc, empty_log_and_no_ledger_yet);
  tcase_add_test (tc, version_1_ledger_has_no_bits);
  tcase_add_test (tc, malformed_json_line_is_refused);
  tcase_add_test (tc, unknown_status_is_refused_unquoted);
  tcase_add_test (tc, bad_repository_name_is_refused_unquoted);
  tcase_add_test (tc, missing_key_is_refused);
  tcase_add_test (tc, records_from_before_the_release_modes_are_read);
  tcase_add_test (tc, empty_line_is_refused);
  tcase_add_test (tc, overlong_line_is_refused);
  tcase_add_test (tc, malformed_ledger_is_refused);
  tcase_add_test (tc, ledger_behind_the_log_is_refused);
  tcase_add_test (tc, log_without_ledger_is_refused);
  tcase_add_test (tc, log_open_to_others_is_refused);
  tcase_add_test (tc, log_that_is_a_fifo_or_symlink_is_refused_without_hanging);
  tcase_add_test (tc, reading_writes_nothing);
  tcase_add_test (tc, large_log_read_whole);
  tcase_add_test (tc, large_log_read_from_its_end);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (run_status_suite)
