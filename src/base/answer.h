/* The canonical answer: the only bytes the agent ever sees.  Pure; libc only,
   so that the client links it.  See docs/result-contract.md.  */
#ifndef SP_BASE_ANSWER_H
#define SP_BASE_ANSWER_H

#include <stdbool.h>
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

/* {"result": + a v2 answer's canonical value + } */
#define SP_ANSWER_VALUE_PREFIX    "{\"result\":"
#define SP_ANSWER_VALUE_MAX_BYTES (sizeof (SP_ANSWER_VALUE_PREFIX) - 1 + SP_ANSWER_OUTPUT_MAX_BYTES + 1)

/* True when value could be a canonical answer as the client sees it, from
   its bytes alone (the client links no JSON reader): 1..SP_ANSWER_OUTPUT_MAX_BYTES
   bytes of strict UTF-8 holding no character sp_outcome_char_forbidden
   refuses (so no newline, no control, separator or bidi control).  The
   canonical form (docs/answer-schemas.md) never holds one, so a value that
   does is a broken or hostile reply.  */
bool sp_answer_value_ok (struct sp_bytes value);

/* Renders {"result":V} (no newline) into buf, where V is value as it is, or
   {"result":"ERROR"} when value is NULL.  Returns the length, or -1 when
   value fails sp_answer_value_ok or buf is too small; the caller then
   answers SP_ANSWER_ERROR.  */
ssize_t sp_answer_render_value (const struct sp_bytes *value, char *buf, size_t cap);

#endif
