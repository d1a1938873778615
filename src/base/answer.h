/* The canonical answer: the only bytes the agent ever sees.  Pure; libc only,
   so that the client links it.  See docs/result-contract.md.  */
#ifndef SP_BASE_ANSWER_H
#define SP_BASE_ANSWER_H

#include <sys/types.h>

#include "base/bounds.h"
#include "base/bytes.h"

#define SP_ANSWER_ERROR "{\"result\":\"ERROR\"}"

/* {"result":" + every outcome byte escaped + "} */
#define SP_ANSWER_MAX_BYTES (11 + 2 * SP_OUTCOME_MAX_BYTES + 2)

/* Renders {"result":"X"} (no newline) into buf, where X is the outcome, or
   ERROR when outcome is NULL.  Only '"' and '\\' are escaped: a valid outcome
   has no control characters, so the form is unique.  Returns the length, or
   -1 when the outcome holds a byte below 0x20 or buf is too small; the caller
   then answers SP_ANSWER_ERROR.  */
ssize_t sp_answer_render (const struct sp_bytes *outcome, char *buf, size_t cap);

#endif
