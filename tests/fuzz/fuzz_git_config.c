/* libFuzzer harness for the strict git config parser (sp_git_parse_config,
   which sanitizing runs on `.git/config`).  Invariants:
   - a failure sets a one-line printable message about `.git/config`;
   - a success reads repositoryformatversion 0 or 1, and sha256 objects
     only with version 1 and an objectformat that was set;
   - the fresh config written for that format (sp_git_config_render) parses
     to the same version and object format.  */
#include <stdint.h>
#include <string.h>

#include "base/bounds.h"
#include "base/cleanup.h"

#include "fuzz.h"
#include "seed/git_parse.h"

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct sp_git_format f, again;
  char fresh[SP_GIT_FRESH_CONFIG_SIZE];
  cleanup_free char *buf = NULL;
  cleanup_free char *fresh_copy = NULL;
  sp_error_t err = NULL;
  int n;

  /* Sanitizing reads no more than this.  */
  if (size > SP_GIT_CONFIG_MAX_BYTES)
    return 0;
  buf = fuzz_exact_copy (data, size);
  if (sp_git_parse_config (buf, size, &f, &err) < 0)
    {
      const char *msg = sp_error_message (err);

      FUZZ_REQUIRE (fuzz_message_ok (msg));
      FUZZ_REQUIRE (strncmp (msg, "`.git/config` ", 14) == 0);
      sp_error_release (&err);
      return 0;
    }
  FUZZ_REQUIRE (err == NULL);
  FUZZ_REQUIRE (f.version == 0 || f.version == 1);
  FUZZ_REQUIRE (!f.sha256 || (f.version == 1 && f.objectformat));

  n = sp_git_config_render (&f, fresh, &err);
  FUZZ_REQUIRE (n > 0 && (size_t)n == strlen (fresh));
  fresh_copy = fuzz_exact_copy (fresh, (size_t)n);
  FUZZ_REQUIRE (sp_git_parse_config (fresh_copy, (size_t)n, &again, &err) == 0);
  FUZZ_REQUIRE (again.version == f.version && again.sha256 == f.sha256 && again.objectformat == f.sha256);
  return 0;
}
