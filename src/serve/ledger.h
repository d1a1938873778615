/* The budget ledger: how many probes this run may still answer, and how many
   bits each repository's calls could carry (what was charged to them, not
   what was learned about the repository: a call on one repository can carry
   another's data through shared host state, docs/threat-model.md).  Their
   sum is the run's total, which an optional run bit budget bounds.  Debited
   and persisted (tmp, fsync, rename, fsync dir) before anything runs, never
   refunded, and kept across proxy restarts.  A run is the ledger's lifetime:
   one state directory, however many times serve starts on it.

   STATE/budget.json, one line, written by yajl's generator:
     {"version":2,"limit":N,"used":U,
      "repositories":{"acme/app":{"millibits":X,"unbounded_calls":K},...}}
   (no line breaks in the file itself), repositories sorted by name (bytewise),
   each present once it was charged at least once.  A run with a run bit
   budget is version 3, the same with "run_bit_budget":B (bits) after "used":
   a binary that cannot keep that budget refuses the file rather than ignore
   it.  The run's totals are the sums of the repositories' (every charge
   goes to one), so the file holds them once.  A version 1 file
   ({"version":1,"limit":N,"used":U}) is read as one with no repositories and
   rewritten as version 2 by the next debit.  */
#ifndef SP_SERVE_LEDGER_H
#define SP_SERVE_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/bounds.h"
#include "base/error.h"

#define SP_LEDGER_FILE "budget.json"
#define SP_LEDGER_LOCK "budget.lock"

/* sp_ledger_debit's answer when nothing is left.  Not an error: the caller
   answers ERROR without launching.  */
#define SP_LEDGER_EXHAUSTED 1

/* sp_ledger_debit_call's answer when the repository's bit budget would be
   exceeded: nothing is written, the caller answers ERROR without launching. */
#define SP_LEDGER_BITS_EXHAUSTED 2

/* sp_ledger_debit_call's answer when the run's bit budget (all
   repositories together) would be exceeded: nothing is written, the caller
   answers ERROR without launching.  */
#define SP_LEDGER_RUN_BITS_EXHAUSTED 3

/* The file's bounds.  At most as many repositories as a config may name; a
   repository's millibits stay within 2^53 (exact in a double, so any JSON
   reader agrees) and its unbounded calls within 2^32 - 1.  The largest file
   is their sum: a fixed head, and per repository its quoted name plus at
   most 64 bytes of keys, digits and punctuation.  */
#define SP_LEDGER_MAX_REPOS      SP_CONFIG_MAX_REPOS
#define SP_LEDGER_MILLIBITS_MAX  (UINT64_C (1) << 53)
#define SP_LEDGER_UNBOUNDED_MAX  UINT32_MAX
#define SP_LEDGER_REPO_MAX_BYTES (SP_REPO_MAX_BYTES + 64)
#define SP_LEDGER_FILE_MAX_BYTES (128 + SP_LEDGER_MAX_REPOS * SP_LEDGER_REPO_MAX_BYTES)

/* What one call may disclose about one repository (docs/threat-model.md). */
struct sp_ledger_charge
{
  const char *repo;              /* the repository the call reads */
  uint64_t millibits;            /* bits it could carry, x1000, rounded up: content + timing */
  bool timing_unbounded;         /* release mode immediate: the timing part has no bound */
  uint64_t bit_budget_millibits; /* the repository's budget, x1000; 0: none */
};

/* One repository's totals, as the file holds them.  */
struct sp_ledger_repo
{
  char name[SP_REPO_MAX_BYTES + 1];
  uint64_t millibits;
  uint64_t unbounded_calls;
};

/* The ledger as one read of the file saw it, without its lock: what
   `status` shows.  The file is only ever replaced by a rename, so one
   open and read sees one whole version, never a write in progress.  */
struct sp_ledger_snapshot
{
  int version; /* 1: no repositories (no bits); 2; 3: 2 with a run bit budget */
  uint32_t limit;
  uint32_t used;
  uint64_t run_bit_budget_millibits; /* x1000; 0: none (versions 1 and 2) */
  uint64_t run_millibits;            /* the repositories' sum */
  uint64_t run_unbounded_calls;      /* the repositories' sum */
  struct sp_ledger_repo *repos;      /* sorted by name, bytewise */
  size_t n_repos;
};

struct sp_ledger;

/* Reads STATE/budget.json with the checks sp_ledger_open makes (a
   malformed ledger is an error), but neither takes nor touches the lock,
   and writes nothing: safe beside a running serve.  Sets *out to NULL, and
   returns 0, when there is no ledger yet.  */
int sp_ledger_read_snapshot (int state_dirfd, struct sp_ledger_snapshot **out, sp_error_t *err);

void sp_ledger_snapshot_free (struct sp_ledger_snapshot *snap);

static inline void
sp_ledger_snapshot_freep (struct sp_ledger_snapshot **snap)
{
  sp_ledger_snapshot_free (*snap);
  *snap = NULL;
}
#define cleanup_ledger_snapshot __attribute__ ((cleanup (sp_ledger_snapshot_freep)))

/* Opens the ledger in state_dirfd, creating it with `used` 0 the first time.
   Holds an exclusive lock until sp_ledger_close, so that no two processes can
   spend one budget.  An existing ledger whose limit differs from `limit` is an
   error: a run's budget never changes, and raising it means a new run (a new
   state directory).  A malformed ledger is an error, never a reset.

   run_bit_budget_millibits (x1000, a whole number of bits; 0: none) is the
   run's bit budget, pinned in the file the first time it is given (written
   before this returns): a ledger that holds one refuses any other, none
   included, so that no restart drops or raises it.  A version 1 ledger that
   debited anything is refused one, since its calls' bits were never
   recorded.  */
int sp_ledger_open (int state_dirfd, uint32_t limit, uint64_t run_bit_budget_millibits,
                    struct sp_ledger **out, sp_error_t *err);

/* Debits one invocation, charging no repository, and persists it before
   returning 0: sp_ledger_debit_call with no charge.  Returns
   SP_LEDGER_EXHAUSTED, writing nothing, when the budget is spent.  On a write
   failure returns -1 and poisons the ledger: every later debit fails too, since
   the count on disk is no longer known to match.  Safe across threads.  */
int sp_ledger_debit (struct sp_ledger *ledger, uint32_t *remaining, sp_error_t *err);

/* Debits one invocation and charges the repository in one atomic, persisted
   write, before returning 0.  SP_LEDGER_EXHAUSTED when no invocation is left,
   SP_LEDGER_BITS_EXHAUSTED when the repository's millibits plus this charge
   would exceed its budget, SP_LEDGER_RUN_BITS_EXHAUSTED when the run's would
   exceed the run's (checked in that order, after the invocation budget); none
   writes anything.  A charge with timing_unbounded adds 1 to the repository's
   unbounded_calls and its content millibits as given; under either bit budget
   it is always refused, since no budget bounds it.
   -1 on a write failure, which poisons the ledger as sp_ledger_debit does.
   -1 too, writing nothing and poisoning nothing, for a charge the file cannot
   hold: an invalid repository name, a new repository past
   SP_LEDGER_MAX_REPOS, totals past SP_LEDGER_MILLIBITS_MAX or
   SP_LEDGER_UNBOUNDED_MAX.  charge may be NULL: sp_ledger_debit, which a
   ledger with a run bit budget refuses (SP_LEDGER_RUN_BITS_EXHAUSTED), as
   a call it charges nothing for would carry bits the budget never saw.
   *remaining and *repo_millibits (may be NULL) get the state after the call. Safe across threads. */
int sp_ledger_debit_call (struct sp_ledger *ledger, const struct sp_ledger_charge *charge,
                          uint32_t *remaining, uint64_t *repo_millibits, sp_error_t *err);

/* The run's bit budget (x1000; 0: none) and totals so far: every
   repository's calls together.  Any pointer may be NULL.  */
void sp_ledger_run_totals (struct sp_ledger *ledger, uint64_t *bit_budget_millibits, uint64_t *millibits,
                           uint64_t *unbounded_calls);

/* The repository's totals so far (0, 0 for one never charged). */
void sp_ledger_repo_totals (struct sp_ledger *ledger, const char *repo, uint64_t *millibits,
                            uint64_t *unbounded_calls);

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
