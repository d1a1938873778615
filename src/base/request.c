/* Request validation: see src/base/request.h.  */
#include "base/request.h"

#include <string.h>

#include "base/outcome.h"

static bool
repo_allowed (struct sp_bytes repo, char *const *allowlist, size_t n_allowlist)
{
  /* Byte-exact: repo may hold a NUL, so compare lengths, not C strings.  */
  for (size_t i = 0; i < n_allowlist; i++)
    if (allowlist[i] != NULL && sp_bytes_equal_str (repo, allowlist[i]))
      return true;
  return false;
}

int
sp_request_validate (const struct sp_request *req, char *const *allowlist, size_t n_allowlist,
                     sp_error_t *err)
{
  if (req->repo.len == 0 || req->repo.len > SP_REPO_MAX_BYTES)
    return sp_make_error (err, 0, "repo: %zu bytes, not 1..%d", req->repo.len, SP_REPO_MAX_BYTES);
  if (!repo_allowed (req->repo, allowlist, n_allowlist))
    {
      sp_make_error (err, 0, "repo: not in the allowlist");
      return SP_REQUEST_REPO_UNKNOWN;
    }
  switch (req->version)
    {
    case SP_FRAME_VERSION_V1:
      if (req->schema.len != 0)
        return sp_make_error (err, 0, "schema: present in a v1 request");
      if (sp_outcomes_check (req->outcomes, err) < 0)
        return -1;
      break;
    case SP_FRAME_VERSION_V2:
      for (size_t i = 0; i < SP_OUTCOME_COUNT; i++)
        if (req->outcomes[i].len != 0)
          return sp_make_error (err, 0, "outcome %zu: present in a v2 request", i + 1);
      /* Structural only: serve parses it (sp_answer_schema_parse), and the
         client links no JSON reader.  */
      if (req->schema.len == 0 || req->schema.len > SP_ANSWER_SCHEMA_MAX_BYTES)
        return sp_make_error (err, 0, "schema: %zu bytes, not 1..%d", req->schema.len,
                              SP_ANSWER_SCHEMA_MAX_BYTES);
      break;
    default:
      return sp_make_error (err, 0, "request: version %u, not 1 or 2", req->version);
    }
  if (req->script.len == 0 || req->script.len > SP_SCRIPT_MAX_BYTES)
    return sp_make_error (err, 0, "script: %zu bytes, not 1..%d", req->script.len, SP_SCRIPT_MAX_BYTES);
  return 0;
}
