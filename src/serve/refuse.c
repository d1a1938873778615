/* A request refused off the slots (a bad frame, the queue full, a wait too
   long, serve stopping): audited as refused with its cause, and answered
   ERROR at its release time like any other answer, so that a refusal
   arrives no sooner than a run would have (docs/threat-model.md).  */
#define _GNU_SOURCE
#include <stdio.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/protocol.h"

#include "serve/serve.h"

void
sp_serve_refuse (struct sp_serve *s, int client_fd, const struct sp_serve_arrival *arrival,
                 enum sp_cause cause, const char *reason)
{
  cleanup_free char *noted = NULL;
  struct sp_serve_release release;

  sp_serve_release_plan (s, arrival->accepted_ns, &release);
  /* The releaser holds the answer, so the loop never waits.  One it cannot
     hold goes at once, and the record says so.  */
  if (release.mode != SP_RELEASE_IMMEDIATE && !release.overflow && !sp_serve_release_room (s))
    {
      if (asprintf (&noted, "%s; the releaser holds %d answers already: released at once", reason,
                    SP_SERVE_RELEASE_HELD_MAX)
          >= 0)
        reason = noted;
      else
        noted = NULL;
      release.overflow = true;
    }
  sp_serve_record_refusal (s, arrival, &release, cause, reason);
  if (release.mode == SP_RELEASE_IMMEDIATE || release.overflow
      || !sp_serve_release_later (s, client_fd, &release))
    {
      sp_serve_answer (client_fd, SP_RESPONSE_ERROR);
      close (client_fd);
      sp_serve_report_result (s, SP_AUDIT_STATUS_REFUSED);
    }
}
