/* libFuzzer harness for what `status` makes of audit lines
   (sp_run_status_add_line, fed line by line as the log's reader feeds it).
   Invariants:
   - a refused line leaves a one-line printable message;
   - after every accepted line the counts add up: records are the outcomes
     plus the admissions, failures are the outcomes other than answered,
     split by cause, and the invocations per repository are the admissions;
   - everything kept is a number, an enumeration in range or text of a fixed
     shape (run and invocation ids, times, repository names), whatever the
     input's other fields held;
   - finishing without a ledger refuses exactly when something was debited.  */
#include <stdint.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/repo_name.h"
#include "status/run_status.h"

#include "fuzz.h"

static bool
shaped (const char *s, const char *allowed, size_t max)
{
  size_t n = strlen (s);

  return n <= max && strspn (s, allowed) == n;
}

static void
check (const struct sp_run_status *st)
{
  uint64_t outcomes = 0, failures = 0, causes = 0, invocations = 0;

  for (int o = 0; o < SP_RUN_OUTCOME_COUNT; o++)
    {
      FUZZ_REQUIRE (st->latest.outcomes[o] <= st->all.outcomes[o]);
      outcomes += st->all.outcomes[o];
      if (o != SP_RUN_OUTCOME_ANSWERED)
        failures += st->all.outcomes[o];
    }
  for (int c = 0; c < SP_CAUSE_COUNT; c++)
    causes += st->causes[c];
  FUZZ_REQUIRE (st->records == outcomes + st->all.admitted);
  FUZZ_REQUIRE (st->failures_total == failures && causes == failures);
  FUZZ_REQUIRE (st->n_failures
                == (failures < SP_RUN_STATUS_FAILURES_MAX ? failures : SP_RUN_STATUS_FAILURES_MAX));
  FUZZ_REQUIRE (st->latest.admitted <= st->all.admitted && st->runs <= st->records);
  FUZZ_REQUIRE (shaped (st->latest_run, "0123456789abcdefghijklmnopqrstuvwxyz", SP_ID_MAX_CHARS));
  FUZZ_REQUIRE (shaped (st->latest_first, "0123456789-T:.Z", SP_AUDIT_TIME_BYTES - 1));
  for (size_t i = 0; i < st->n_repos; i++)
    {
      cleanup_error sp_error_t err = NULL;

      FUZZ_REQUIRE (sp_repo_name_check (st->repos[i].name, strlen (st->repos[i].name), &err) == 0);
      FUZZ_REQUIRE (i == 0 || strcmp (st->repos[i - 1].name, st->repos[i].name) < 0);
      invocations += st->repos[i].invocations;
    }
  FUZZ_REQUIRE (invocations == st->all.admitted);
  for (size_t i = 0; i < st->n_failures; i++)
    {
      const struct sp_run_failure *f = sp_run_status_failure (st, i);
      cleanup_error sp_error_t err = NULL;

      FUZZ_REQUIRE (f->status < SP_RUN_OUTCOME_COUNT && f->status != SP_RUN_OUTCOME_ANSWERED);
      FUZZ_REQUIRE (f->cause < SP_CAUSE_COUNT);
      FUZZ_REQUIRE (strlen (f->time) == SP_AUDIT_TIME_BYTES - 1 && shaped (f->time, "0123456789-T:.Z", 24));
      FUZZ_REQUIRE (shaped (f->id, "0123456789abcdefghijklmnopqrstuvwxyz-", 2 * SP_ID_MAX_CHARS + 1));
      FUZZ_REQUIRE (f->repo[0] == '\0' || sp_repo_name_check (f->repo, strlen (f->repo), &err) == 0);
      FUZZ_REQUIRE (f->oom >= -1 && f->oom <= 1 && f->timed_out >= -1 && f->timed_out <= 1);
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  cleanup_run_status struct sp_run_status *st = sp_run_status_new ();
  cleanup_error sp_error_t err = NULL;
  size_t pos = 0;
  bool refused = false;

  FUZZ_REQUIRE (st != NULL);
  while (pos < size && !refused)
    {
      const uint8_t *nl = memchr (data + pos, '\n', size - pos);
      size_t len = (nl ? (size_t)(nl - data) : size) - pos;
      cleanup_free char *line = fuzz_exact_copy (data + pos, len);

      if (sp_run_status_add_line (st, line, len, pos, &err) < 0)
        {
          FUZZ_REQUIRE (fuzz_message_ok (sp_error_message (err)));
          refused = true;
        }
      else
        check (st);
      pos += len + 1;
    }
  if (!refused)
    {
      bool debited = st->all.admitted > 0;

      FUZZ_REQUIRE ((sp_run_status_finish (st, NULL, &err) < 0) == debited);
      if (debited)
        FUZZ_REQUIRE (fuzz_message_ok (sp_error_message (err)));
    }
  return 0;
}
