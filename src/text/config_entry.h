/* What both forms of the config read the same way (config.c for the
   `sealedProbes` block, config_enclaves.c for the firewall's `enclaves`
   list): a repository entry with its sensitivity, the duplicate check, and
   the timeout and memory checks with their reasons.  Each takes the full
   key path of what it reads, e.g. "enclaves[0].timeout", and its messages
   read "<path>: <reason>", never echoing a string value.  Pure.  */
#ifndef SP_TEXT_CONFIG_ENTRY_H
#define SP_TEXT_CONFIG_ENTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "text/config.h"
#include "text/json.h"

/* A repository entry: the object {"repo": "owner/repo", "sensitivity":
   "public"|"internal"|"confidential"|"sealed"}, both keys required and no
   other (the firewall's own rule for its `repos` items), or, when
   string_allowed, a plain "owner/repo" string, which has no class.  The
   name must pass sp_repo_name_check.  *name is allocated.  */
int sp_config_repo_entry (const struct sp_json *item, const char *path, bool string_allowed, char **name,
                          enum sp_sensitivity *sensitivity, sp_error_t *err);

/* Allocates c's per-repository arrays for n repositories (at least one
   slot, each zero: no name, SP_SUBMODULES_OMIT, SP_SENSITIVITY_NONE);
   n_private_repos stays 0 until names are set.  -1 when out of memory.  */
int sp_config_alloc_repos (struct sp_config *c, size_t n);

/* The first repeated name of repos[0..n), as "<path>[j]: duplicate of
   <path>[i]", or 0.  O(n log n).  */
int sp_config_repo_duplicates (char **repos, size_t n, const char *path, sp_error_t *err);

/* True when v is a plain decimal integer above max: an integer this proxy
   refuses for its bound, not for its spelling.  Digits past int64 count.  */
bool sp_config_integer_above (const struct sp_json *v, int64_t max);

/* timeout: whole seconds from SP_TIMEOUT_MIN_SECONDS to
   SP_TIMEOUT_MAX_SECONDS, with the tighter-than-the-firewall reason above
   the maximum.  */
int sp_config_timeout (const struct sp_json *v, const char *path, uint32_t *seconds, sp_error_t *err);

/* memoryLimit: sp_size_text_parse from SP_MEMORY_MIN_BYTES to
   SP_MEMORY_MAX_BYTES, each bound refused with its reason.  *text (the
   size as written) is replaced on success.  */
int sp_config_memory (const struct sp_json *v, const char *path, uint64_t *bytes, char **text,
                      sp_error_t *err);

#endif
