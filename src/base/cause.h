/* Why an invocation ended as it did (docs/audit.md, "cause"): one value,
   set where the failure happens (sp_error_set_cause) and written into the
   audit record as its own key, which status counts.  No reader ever
   recovers a cause from a message's words.  Pure.  */
#ifndef SP_BASE_CAUSE_H
#define SP_BASE_CAUSE_H

/* Why an invocation ended as it did, set where it happened (docs/audit.md,
   "cause"): a value, never read back out of a reason's words.  The names
   are the audit log's and status's.  */
enum sp_cause
{
  SP_CAUSE_NONE = 0,   /* answered: nothing went wrong */
  SP_CAUSE_UNRECORDED, /* a line written before causes were recorded (reader only) */
  SP_CAUSE_OTHER,      /* a name this version does not know (reader only) */
  SP_CAUSE_FRAME,      /* the request frame was malformed, or did not arrive in time */
  SP_CAUSE_UNKNOWN_REPOSITORY,
  SP_CAUSE_BAD_REQUEST, /* outcomes or script out of bounds */
  SP_CAUSE_QUEUE_FULL,
  SP_CAUSE_QUEUE_WAIT,      /* waited longer than --queue-wait */
  SP_CAUSE_TOO_MANY_UNREAD, /* SP_SERVE_UNREAD_MAX connections were still sending */
  SP_CAUSE_SHUTDOWN,        /* serve was stopping before it started */
  SP_CAUSE_STOPPED,         /* serve stopped while it ran */
  SP_CAUSE_CLIENT_GONE,     /* the client closed its connection before its answer */
  SP_CAUSE_HALTED,
  SP_CAUSE_NO_SEED,
  SP_CAUSE_SEALED,    /* the repository is of the sensitivity class `sealed`: never runs */
  SP_CAUSE_SEED_GONE, /* the seed serve verified is no longer where it was */
  SP_CAUSE_BUDGET_SPENT,
  SP_CAUSE_BIT_BUDGET_SPENT,     /* the repository's --bit-budget */
  SP_CAUSE_RUN_BIT_BUDGET_SPENT, /* the run's --run-bit-budget */
  SP_CAUSE_LEDGER_WRITE,
  SP_CAUSE_AUDIT_WRITE,
  SP_CAUSE_ENVIRONMENT, /* the host: full disk, runtime unreachable, rootfs gone */
  SP_CAUSE_WORKSPACE,
  SP_CAUSE_BUNDLE,
  SP_CAUSE_SNAPSHOT,
  SP_CAUSE_RUNTIME, /* the runtime failed, or answered what cannot be read */
  SP_CAUSE_TIMEOUT,
  SP_CAUSE_PROBE_SIGNAL,
  SP_CAUSE_PROBE_EXIT,
  SP_CAUSE_PROBE_OUTPUT, /* /probe/out missing or invalid */
  SP_CAUSE_CLEANUP,
  SP_CAUSE_RELEASE_OVERFLOW,
  SP_CAUSE_COUNT
};

/* The cause's name ("snapshot"), "?" out of range.  Pure.  */
const char *sp_cause_name (enum sp_cause cause);
/* The cause a name names: SP_CAUSE_OTHER for one this version does
   not know, SP_CAUSE_UNRECORDED for NULL.  Pure.  */
enum sp_cause sp_cause_from_name (const char *name);

#endif
