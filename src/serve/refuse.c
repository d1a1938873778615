/* A request refused off the slots (a bad frame, the queue full, a wait too
   long, serve stopping): audited as refused with its cause, and answered
   ERROR at its release time like any other answer, so that a refusal
   arrives no sooner than a run would have (docs/threat-model.md).  */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/protocol.h"

#include "serve/serve.h"

uint8_t
sp_serve_frame_version (const uint8_t *bytes, size_t got)
{
  if (bytes != NULL && got > SP_FRAME_MAGIC_BYTES && memcmp (bytes, SP_FRAME_MAGIC, SP_FRAME_MAGIC_BYTES) == 0
      && bytes[SP_FRAME_MAGIC_BYTES] == 2)
    return 2;
  return 1;
}

void
sp_serve_refuse (struct sp_serve *s, int client_fd, uint8_t version, const struct sp_serve_arrival *arrival,
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
      || !sp_serve_release_later (s, client_fd, version, &release))
    {
      sp_serve_answer (client_fd, version, SP_RESPONSE_ERROR, NULL, 0);
      close (client_fd);
      sp_serve_report_result (s, SP_AUDIT_STATUS_REFUSED);
    }
}
