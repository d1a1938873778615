/* Whose an invocation's end is (docs/audit.md, "status" and "cause"): the
   probe's (a timeout, a signal, an exit status), the runtime's, the host's
   or the proxy's own.  A verdict is a status and a cause, both values; no
   message is ever read back to find them.  Apart from invocation.c so that
   every class is unit-tested without a sandbox (tests/unit/check_serve.c).  */
#ifndef SP_SERVE_VERDICT_H
#define SP_SERVE_VERDICT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/cause.h"
#include "base/error.h"
#include "runtimes/runtime.h"

struct sp_verdict
{
  const char *status; /* one of serve/audit.h's SP_AUDIT_STATUS_* */
  enum sp_cause cause;
};

/* A probe that the runtime ran to its end: 0 when it exited 0 (its answer
   is then /probe/out's to give); otherwise -1, with *v the probe's verdict
   (timed out, killed by a signal, a non-zero exit) and *err saying which.  */
int sp_verdict_of_end (const struct sp_run_facts *facts, uint32_t timeout_seconds, struct sp_verdict *v,
                       sp_error_t *err);

/* A failure outside the probe: the host's when a cause is found there (a
   full disk or file system, the runtime unreachable or its binary not
   executable, the seed or the rootfs gone), else the runtime's once it
   ran, else the proxy's own, keeping the cause the failing step set.  ran:
   the runtime was asked to run; facts: what it said (NULL: nothing);
   state_path: the file system checked for room (NULL: not checked); rootfs_root: checked for
   existence (NULL: not checked).  What is found on the host is added to
   *err's reason.  */
void sp_verdict_of_failure (bool ran, const struct sp_run_facts *facts, const char *state_path,
                            const char *rootfs_root, sp_error_t *err, struct sp_verdict *v);

#endif
