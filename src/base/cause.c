/* The causes' names, as the audit log and status print them.  */
#include <string.h>

#include "base/cause.h"

static const char *const cause_names[SP_CAUSE_COUNT] = {
  [SP_CAUSE_NONE] = "none",
  [SP_CAUSE_UNRECORDED] = "unrecorded",
  [SP_CAUSE_OTHER] = "other",
  [SP_CAUSE_FRAME] = "frame",
  [SP_CAUSE_UNKNOWN_REPOSITORY] = "unknown_repository",
  [SP_CAUSE_BAD_REQUEST] = "bad_request",
  [SP_CAUSE_QUEUE_FULL] = "queue_full",
  [SP_CAUSE_QUEUE_WAIT] = "queue_wait",
  [SP_CAUSE_TOO_MANY_UNREAD] = "too_many_unread",
  [SP_CAUSE_SHUTDOWN] = "shutdown",
  [SP_CAUSE_STOPPED] = "stopped",
  [SP_CAUSE_CLIENT_GONE] = "client_gone",
  [SP_CAUSE_HALTED] = "halted",
  [SP_CAUSE_NO_SEED] = "no_seed",
  [SP_CAUSE_SEALED] = "sealed",
  [SP_CAUSE_SEED_GONE] = "seed_gone",
  [SP_CAUSE_BUDGET_SPENT] = "budget_spent",
  [SP_CAUSE_BIT_BUDGET_SPENT] = "bit_budget_spent",
  [SP_CAUSE_RUN_BIT_BUDGET_SPENT] = "run_bit_budget_spent",
  [SP_CAUSE_LEDGER_WRITE] = "ledger_write",
  [SP_CAUSE_AUDIT_WRITE] = "audit_write",
  [SP_CAUSE_ENVIRONMENT] = "environment",
  [SP_CAUSE_WORKSPACE] = "workspace",
  [SP_CAUSE_BUNDLE] = "bundle",
  [SP_CAUSE_SNAPSHOT] = "snapshot",
  [SP_CAUSE_RUNTIME] = "runtime",
  [SP_CAUSE_TIMEOUT] = "timeout",
  [SP_CAUSE_PROBE_SIGNAL] = "probe_signal",
  [SP_CAUSE_PROBE_EXIT] = "probe_exit",
  [SP_CAUSE_PROBE_OUTPUT] = "probe_output",
  [SP_CAUSE_CLEANUP] = "cleanup",
  [SP_CAUSE_RELEASE_OVERFLOW] = "release_overflow",
};

const char *
sp_cause_name (enum sp_cause cause)
{
  return (unsigned)cause < SP_CAUSE_COUNT ? cause_names[cause] : "?";
}

enum sp_cause
sp_cause_from_name (const char *name)
{
  if (name == NULL)
    return SP_CAUSE_UNRECORDED;
  for (int c = 0; c < SP_CAUSE_COUNT; c++)
    if (c != SP_CAUSE_UNRECORDED && c != SP_CAUSE_OTHER && strcmp (name, cause_names[c]) == 0)
      return (enum sp_cause)c;
  return SP_CAUSE_OTHER;
}
