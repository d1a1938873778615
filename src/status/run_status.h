/* What `sealed-probe-proxy status` shows (docs/operations.md, "status"): the
   budget from the ledger, and from the audit log the outcomes by status, the
   invocations per repository and the last failures.  Read beside a running
   serve without its ledger lock, and without writing anything.

   Nothing of a script, its output, an outcome or a reason's text is kept:
   only numbers, names that were validated (repositories, run ids, times) and
   fixed enumerations: the cause is the one serve recorded as a value
   (audit.h), and a reason is never read.  */
#ifndef SP_STATUS_RUN_STATUS_H
#define SP_STATUS_RUN_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/bounds.h"
#include "base/error.h"
#include "serve/audit.h"
#include "serve/ledger.h"

/* The last failures kept, and how much of the audit log's end is read (a
   whole budget of 100000 invocations, two lines each, fits with room).  */
#define SP_RUN_STATUS_FAILURES_MAX   10
#define SP_RUN_STATUS_SCAN_MAX_BYTES (256ULL << 20)
/* Repositories the audit log may name beside the ledger's.  */
#define SP_RUN_STATUS_MAX_REPOS (2 * SP_LEDGER_MAX_REPOS)

/* The verdicts of docs/audit.md ("admitted" is counted apart).  */
enum sp_run_outcome
{
  SP_RUN_OUTCOME_ANSWERED,
  SP_RUN_OUTCOME_REFUSED,
  SP_RUN_OUTCOME_PROBE,
  SP_RUN_OUTCOME_TIMED_OUT,
  SP_RUN_OUTCOME_RUNTIME,
  SP_RUN_OUTCOME_ENVIRONMENT,
  SP_RUN_OUTCOME_INTERNAL,
  SP_RUN_OUTCOME_CANCELLED,
  SP_RUN_OUTCOME_COUNT
};

const char *sp_run_outcome_name (enum sp_run_outcome o);

/* One failure, each field a number, a validated name or an enumeration.  */
struct sp_run_failure
{
  char time[SP_AUDIT_TIME_BYTES]; /* "finished" */
  char id[2 * SP_ID_MAX_CHARS + 2];
  char repo[SP_REPO_MAX_BYTES + 1]; /* "" when the request named none valid */
  enum sp_run_outcome status;
  enum sp_cause cause; /* as serve recorded it (audit.h) */
  bool has_exit, has_signal;
  int64_t exit_code, signal;
  int oom, timed_out; /* -1: null */
  bool release_overflow;
};

struct sp_run_counts
{
  uint64_t outcomes[SP_RUN_OUTCOME_COUNT];
  uint64_t admitted;  /* admission records: invocations debited */
  uint64_t completed; /* result records of debited invocations */
  /* Admitted with no result record: running now, or cut short (kill -9, a
     halt).  Exact when the log is read whole.  */
  uint64_t unfinished;
};

struct sp_run_status_repo
{
  char name[SP_REPO_MAX_BYTES + 1];
  uint64_t invocations; /* admission records naming it */
  bool in_ledger;
  uint64_t millibits;
  uint64_t unbounded_calls;
};

struct sp_run_status
{
  struct sp_ledger_snapshot *ledger; /* NULL: no ledger yet (serve never ran) */

  bool audit_present;
  uint64_t audit_bytes;     /* the log's size when it was read */
  uint64_t read_from;       /* 0: read whole; else where the read window began */
  uint64_t records;         /* whole lines read */
  uint64_t torn_tail_bytes; /* an unterminated end, ignored: a write under way or a crash mid-write */
  uint64_t runs;            /* runs seen in the lines read */

  struct sp_run_counts all;
  char latest_run[SP_ID_MAX_CHARS + 1]; /* "" when no line was read */
  char latest_first[SP_AUDIT_TIME_BYTES], latest_last[SP_AUDIT_TIME_BYTES];
  struct sp_run_counts latest;

  uint64_t causes[SP_CAUSE_COUNT];
  uint64_t failures_total;
  struct sp_run_failure failures[SP_RUN_STATUS_FAILURES_MAX]; /* a ring: see sp_run_status_failure */
  size_t n_failures;

  struct sp_run_status_repo *repos; /* sorted by name, bytewise */
  size_t n_repos;
};

struct sp_run_status_options
{
  uid_t owner;             /* who must own the audit log: root (0) for status */
  uint64_t scan_max_bytes; /* 0: SP_RUN_STATUS_SCAN_MAX_BYTES */
};

/* Reads STATE's audit log (its end, at most scan_max_bytes, whole lines
   only), then its ledger, and sums them up.  Never locks, creates or writes
   anything.  Refuses, naming the file and the reason (never a value from
   it): a state directory with no ledger, no audit log and no staged.json; an
   audit log that is not private to owner, holds a malformed line or a line
   longer than SP_AUDIT_LINE_MAX_BYTES, or records debited invocations when
   there is no ledger or more than the ledger's `used`; a malformed ledger.  */
int sp_run_status_read (int state_dirfd, const struct sp_run_status_options *opt, struct sp_run_status **out,
                        sp_error_t *err);

/* The pieces sp_run_status_read is made of, for tests.  new: an empty
   summary; add_line: one whole audit line (without its newline) that began
   at byte offset; finish: merges the ledger (NULL: none; taken over) and
   checks the two agree.  */
struct sp_run_status *sp_run_status_new (void);
int sp_run_status_add_line (struct sp_run_status *st, const char *line, size_t len, uint64_t offset,
                            sp_error_t *err);
int sp_run_status_finish (struct sp_run_status *st, struct sp_ledger_snapshot *ledger, sp_error_t *err);

/* The i-th of the last failures kept, oldest first (i < n_failures).  */
const struct sp_run_failure *sp_run_status_failure (const struct sp_run_status *st, size_t i);

void sp_run_status_free (struct sp_run_status *st);

static inline void
sp_run_status_freep (struct sp_run_status **st)
{
  sp_run_status_free (*st);
  *st = NULL;
}
#define cleanup_run_status __attribute__ ((cleanup (sp_run_status_freep)))

#endif
