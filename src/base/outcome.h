/* The rules for an outcome, the agent-chosen answer the proxy may return.
   Pure; libc only, so that the client checks outcomes before it sends them.

   An outcome is 1..SP_OUTCOME_MAX_BYTES of strict UTF-8 (utf8.h), is never
   exactly "ERROR" (the answer reserved for failures), and holds no control
   characters: no C0 (U+0000..U+001F), DEL (U+007F) or C1 (U+0080..U+009F),
   no line or paragraph separator (U+2028, U+2029), and no bidirectional
   control (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069).  The
   outcome is echoed into the agent's transcript and the operator's audit
   log, where such characters would break lines or reorder the text around
   them, so that what is shown differs from what was sent.

   Messages say which rule failed and, from sp_outcomes_check, which outcome
   by position; they never echo the outcome itself.  */
#ifndef SP_BASE_OUTCOME_H
#define SP_BASE_OUTCOME_H

#include <stdbool.h>
#include <stdint.h>

#include "base/bounds.h"
#include "base/bytes.h"
#include "base/error.h"

/* The answer reserved for failures: no outcome may be spelled so.  */
#define SP_OUTCOME_RESERVED "ERROR"

/* True for a code point no outcome may hold: the controls, separators and
   bidi controls above.  Answer schemas' literal strings share the rule.  */
bool sp_outcome_char_forbidden (uint32_t cp);

/* Checks one outcome against every rule above.  */
int sp_outcome_check (struct sp_bytes outcome, sp_error_t *err);

/* Checks all SP_OUTCOME_COUNT outcomes, and that no two are byte-equal.  */
int sp_outcomes_check (const struct sp_bytes outcomes[SP_OUTCOME_COUNT], sp_error_t *err);

#endif
