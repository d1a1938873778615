/* The invocation budget ledger: how many probes this run may still answer.
   Debited and persisted (tmp, fsync, rename, fsync dir) before anything runs,
   never refunded, and kept across proxy restarts.  See docs/threat-model.md.  */
#ifndef SEALED_PROBE_LEDGER_H
#define SEALED_PROBE_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include <sealed-probe/error.h>

#define SP_LEDGER_FILE "budget.json"
#define SP_LEDGER_LOCK "budget.lock"

/* sp_ledger_debit's answer when nothing is left.  Not an error: the caller
   answers ERROR without launching.  */
#define SP_LEDGER_EXHAUSTED 1

struct sp_ledger;

/* Opens the ledger in state_dirfd, creating it with `used` 0 the first time.
   Holds an exclusive lock until sp_ledger_close, so that no two processes can
   spend one budget.  An existing ledger whose limit differs from `limit` is an
   error: a run's budget never changes, and raising it means a new run (a new
   state directory).  A malformed ledger is an error, never a reset.  */
int sp_ledger_open (int state_dirfd, uint32_t limit, struct sp_ledger **out, sp_error_t *err);

/* Debits one invocation and persists it before returning 0.  Returns
   SP_LEDGER_EXHAUSTED, writing nothing, when the budget is spent.  On a write
   failure returns -1 and poisons the ledger: every later debit fails too, since
   the count on disk is no longer known to match.  Safe across threads.  */
int sp_ledger_debit (struct sp_ledger *ledger, uint32_t *remaining, sp_error_t *err);

uint32_t sp_ledger_remaining (struct sp_ledger *ledger);

void sp_ledger_close (struct sp_ledger *ledger);

static inline void
sp_ledger_closep (struct sp_ledger **ledger)
{
  if (*ledger)
    sp_ledger_close (*ledger);
  *ledger = NULL;
}
#define cleanup_ledger __attribute__ ((cleanup (sp_ledger_closep)))

#endif
