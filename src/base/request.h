/* Validation of a decoded request (protocol.h) before anything runs.  Pure;
   no I/O, so that unit tests and fuzzers reach every rule.  */
#ifndef SP_BASE_REQUEST_H
#define SP_BASE_REQUEST_H

#include <stddef.h>

#include "base/error.h"
#include "base/protocol.h"

/* Accepts req only when:
   - repo is byte-for-byte one of allowlist[0..n_allowlist), NUL-terminated
     normalized names; repo bytes may hold anything, NUL included, so the
     lengths are compared too, and no case folding is done;
   - version is SP_FRAME_VERSION_V1 or SP_FRAME_VERSION_V2;
   - v1: the outcomes pass sp_outcomes_check (outcome.h) and the schema is
     empty;
   - v2: the schema is 1..SP_ANSWER_SCHEMA_MAX_BYTES bytes (its structure
     only: serve parses it with sp_answer_schema_parse) and the outcomes are
     empty;
   - the script is 1..SP_SCRIPT_MAX_BYTES bytes.
   Messages never echo the repository, the outcomes, the schema or
   the script.  */
/* sp_request_validate's return for a repository outside the allowlist, so
   that the caller tells it apart from a malformed request as a value.  */
#define SP_REQUEST_REPO_UNKNOWN (-2)

int sp_request_validate (const struct sp_request *req, char *const *allowlist, size_t n_allowlist,
                         sp_error_t *err);

#endif
