/* The audit log (docs/audit.md): one JSON line per invocation, isolate-style,
   in STATE/audit/audit.jsonl.  The directory is root's and 0700, the file
   0600 and append-only in use; no agent and no sandbox can see it.  It never
   holds the script, the repository's content or anything the sandbox wrote:
   only facts the proxy established, and the request's validated fields.  */
#ifndef SP_SERVE_AUDIT_H
#define SP_SERVE_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/bounds.h"
#include "base/bytes.h"
#include "base/cause.h"
#include "base/error.h"
#include "runtimes/runtime.h"

#define SP_AUDIT_DIR  "audit"
#define SP_AUDIT_FILE "audit.jsonl"

/* The verdicts (docs/audit.md, "status").  "admitted" is no verdict: it
   marks the line written before anything is launched.  */
#define SP_AUDIT_STATUS_ADMITTED    "admitted"    /* before a launch; the result line follows */
#define SP_AUDIT_STATUS_ANSWERED    "answered"    /* a valid answer came back */
#define SP_AUDIT_STATUS_REFUSED     "refused"     /* not run: bad frame or request, budget, queue, shutdown */
#define SP_AUDIT_STATUS_PROBE       "probe"       /* the probe ran; its answer was missing or invalid */
#define SP_AUDIT_STATUS_TIMED_OUT   "timed_out"   /* the probe hit the wall-clock timeout */
#define SP_AUDIT_STATUS_RUNTIME     "runtime"     /* the runtime failed: create, start, kill, delete */
#define SP_AUDIT_STATUS_ENVIRONMENT "environment" /* the host: full disk, runtime binary, rootfs */
#define SP_AUDIT_STATUS_INTERNAL    "internal"    /* the proxy itself failed (snapshot, bundle, cleanup) */
#define SP_AUDIT_STATUS_CANCELLED                                                                            \
  "cancelled" /* the client went away, or serve stopped, before the answer                                   \
               */

/* Who asked: the client's credentials when it connected (SO_PEERCRED), as
   serve's namespaces see them: a pid from a pid namespace serve cannot see
   is 0, an id its user namespace does not map the overflow id.  known is
   false where there is no client (the canary).  */
struct sp_audit_peer
{
  bool known;
  uint32_t uid;
  uint32_t gid;
  uint32_t pid;
};

struct sp_audit_record
{
  const char *id;       /* "<run>-<invocation>" */
  const char *run;      /* the proxy run */
  uint64_t received_ns; /* CLOCK_REALTIME, when the request was accepted */
  struct sp_audit_peer peer;
  uint64_t started_ns;  /* when its slot began (0: never) */
  uint64_t finished_ns; /* when the answer was ready */
  /* The request, only once validated (NULL before: invalid bytes are never
     logged).  */
  const char *repo;
  const struct sp_bytes *outcomes; /* SP_OUTCOME_COUNT of them; NULL for a schema's request */
  /* A v2 request's answer schema: its text's digest ("sha256:<hex>") and
     content bits, ceil(log2(N + 1)); NULL and 0 for three outcomes.  Once
     answered, the canonical value the agent got, value[0..value_len).  */
  const char *schema_sha256;
  unsigned schema_content_bits;
  const char *value;
  size_t value_len;
  const char *script_sha256; /* "sha256:<hex>", or NULL when no script was read */
  const char *seed_commit;   /* NULL when no seed was used */
  const char *seed_digest;
  /* How many submodules that seed omits (empty directories), as staged.json
     records them (it holds their paths); NULL when no seed was used or its
     record cannot say (a GitHub seed).  A count, never a path: nothing of
     the repository's names is logged.  */
  const size_t *seed_omitted_submodules;
  const char *snapshot; /* "overlay" or "copy", NULL when none was made */
  /* The sandbox the probe was given: its workspace's name and its container
     id's last part, "7" when made for this request, "p000003" when made ahead
     (docs/operations.md); NULL when none was.  */
  const char *sandbox;
  bool debited; /* the budget was debited for this request */
  uint32_t budget_remaining;
  uint8_t answer; /* 0 for ERROR, else the 1-based outcome index (1 for a schema's value) */
  /* An admission record (status SP_AUDIT_STATUS_ADMITTED): written once the
     budget is debited and before anything is launched, so that nothing runs
     unaudited.  Its "finished" and "result" are null.  */
  bool admission;
  /* The verdict, kept apart from the proxy's own failures as isolate does:
     one of the SP_AUDIT_STATUS_* below.  The agent sees ERROR for all but
     "answered".  */
  const char *status;
  enum sp_cause cause;              /* rendered null for an admission record */
  const char *reason;               /* the internal failure reason, NULL when answered */
  const struct sp_run_facts *facts; /* NULL when nothing was launched */
  /* When the answer left (base/release_ladder.h; docs/audit.md): the mode's name, the
     release time in ms after acceptance (-1: none, as in immediate mode or
     an admission record), and whether it was ready past its last release
     and left at once as ERROR.  */
  const char *release;
  int64_t release_ms;
  bool release_overflow;
  /* What the call could disclose, charged to its repository when `charged`:
     millibits (content and timing, x1000), the timing part unbounded
     (immediate mode), and the repository's total after the charge.  */
  bool charged;
  uint64_t millibits;
  uint64_t content_millibits; /* the content part of millibits */
  bool timing_unbounded;
  uint64_t repo_millibits;
};

/* Renders one record as a single JSON line ending in "\n", at most
   SP_AUDIT_LINE_MAX_BYTES (a longer reason is cut, marked, at a UTF-8
   boundary).  Pure.  Strings are escaped so that no byte of theirs can end
   the line or the string.  */
int sp_audit_render (const struct sp_audit_record *rec, char **line, size_t *len, sp_error_t *err);

/* Formats ns (CLOCK_REALTIME) as RFC 3339 UTC with milliseconds,
   "2026-11-30T07:01:02.345Z", into out (SP_AUDIT_TIME_BYTES with its NUL).
   Pure.  Returns 0, or -1 when the time cannot be formatted.  The audit
   line's "received", "started" and "finished" are in this form.  */
#define SP_AUDIT_TIME_BYTES 25
int sp_audit_format_time (uint64_t ns, char out[SP_AUDIT_TIME_BYTES]);

struct sp_audit;

/* Opens (creating) STATE/audit (root, 0700) and audit.jsonl (0600,
   O_APPEND).  Refuses a directory or file that is not root's, or that group
   or others may read, and a file that ends in a partial line (a crash
   mid-write): the operator looks at it before anything is appended.  */
int sp_audit_open (int state_dirfd, struct sp_audit **out, sp_error_t *err);

/* Opens STATE/audit/audit.jsonl read-only for a reader beside a running
   serve (status): the same checks as sp_audit_open, with owner for root,
   but it creates, locks and writes nothing.  Sets *fd to -1, and returns 0,
   when there is no log yet (no directory or no file).  */
int sp_audit_open_read (int state_dirfd, uid_t owner, int *fd, sp_error_t *err);

/* Appends one line, whole or not at all: one write (a short write's rest
   retried once), then fdatasync; on any failure the file is truncated back
   to its size before, so that no partial line stays.  The first failure
   poisons the log: every later append fails too, without writing, until
   the proxy restarts (the caller stops answering, docs/audit.md).
   Thread-safe.  */
int sp_audit_append (struct sp_audit *audit, const struct sp_audit_record *rec, sp_error_t *err);

void sp_audit_close (struct sp_audit *audit);

static inline void
sp_audit_closep (struct sp_audit **audit)
{
  if (*audit)
    sp_audit_close (*audit);
  *audit = 0;
}
#define cleanup_audit __attribute__ ((cleanup (sp_audit_closep)))

#endif
