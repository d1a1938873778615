/* Repository names: exactly the normalized form `owner/repo`, lowercase.
   Pure, libc only: the agent-side client links it too.  */
#ifndef SP_BASE_REPO_NAME_H
#define SP_BASE_REPO_NAME_H

#include <stddef.h>

#include "base/error.h"

/* Returns 0 when s[0..len) is a normalized repository name:
   - owner: 1..SP_REPO_OWNER_MAX (39) of [a-z0-9-], no leading or trailing
     hyphen, no "--";
   - then exactly one "/";
   - repo: 1..SP_REPO_NAME_MAX (100) of [a-z0-9._-], not "." or "..", not
     ending in ".git".
   Nothing is ever fixed up: an uppercase letter, a URL, a ".git" suffix is an
   error, never silently normalized.  Otherwise returns -1 with *err saying
   why (a URL, credentials, a wildcard, a query, traversal, whitespace, ...).
   The message NEVER contains the value, which may carry a credential.  s may
   hold any byte, NUL included.  */
int sp_repo_name_check (const char *s, size_t len, sp_error_t *err);

#endif
