/* Strict validation of the sandbox's answer file /probe/out.  The only form
   accepted is a JSON object with exactly one member, "result", whose string
   value is byte-identical, after JSON unescaping, to exactly one declared
   outcome.  Anything else is an error, and the agent sees ERROR.  Pure: no
   I/O, no globals, no allocation beyond yajl's own (and the error value).
   See docs/result-contract.md.  */
#ifndef SP_TEXT_RESULT_H
#define SP_TEXT_RESULT_H

#include <stddef.h>

#include "base/bounds.h"
#include "base/bytes.h"
#include "base/error.h"

/* Returns the 1-based index (1..SP_OUTCOME_COUNT) of the outcome that buf
   equals, or -1 with *err set to the internal reason (for the audit log;
   never shown to the agent).

   Checked in this order, stopping at the first failure:
   - 0 < len <= SP_RESULT_MAX_BYTES, before any byte is read;
   - the outcomes themselves: non-empty, at most SP_OUTCOME_MAX_BYTES, strict
     UTF-8, no byte below 0x20, none equal to "ERROR" (they were validated
     with the request; this only refuses to trust that);
   - sp_json_text_check (buf, len, SP_RESULT_MAX_DEPTH): strict UTF-8, no
     BOM, no \u0000, no unpaired surrogate escape, JSON whitespace only;
   - yajl's callback parser, no comments, no trailing garbage, no second
     value, no partial value, through a state machine that accepts only
     { "result" : <string> } with the key compared after unescaping;
   - the decoded value matches exactly one outcome, bytes and length.  */
int sp_result_validate (const char *buf, size_t len, const struct sp_bytes outcomes[SP_OUTCOME_COUNT],
                        sp_error_t *err);

#endif
