/* The pure parsers behind git_seed.c: a ref name, a HEAD or loose ref file,
   packed-refs, and the config.  No I/O, so the unit tests and the fuzz
   harnesses (tests/fuzz/fuzz_git_*.c) call them on plain buffers.  Only
   git_seed.c uses them in the product.  */
#ifndef SP_SEED_GIT_PARSE_H
#define SP_SEED_GIT_PARSE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/bounds.h"
#include "base/error.h"
#include "seed/git_seed.h"

/* What the config says about the repository's format.  */
struct sp_git_format
{
  int version;       /* core.repositoryformatversion: 0 or 1 */
  bool sha256;       /* extensions.objectformat = sha256 */
  bool objectformat; /* extensions.objectformat was set at all */
};

/* git's rules for a ref name of len bytes (git-check-ref-format), a little
   stricter: it must start with "refs/", and no component may end in ".lock".
   Reads only name[0..len).  */
bool sp_git_ref_name_ok (const char *name, size_t len);

/* HEAD or a loose ref (what names the file in messages): a commit id and one
   newline, or "ref: NAME\n".  Returns 0 with commit filled, 1 with target
   filled, -1 on error.  */
int sp_git_parse_ref_file (const char *what, const char *buf, size_t len, char commit[SP_COMMIT_HEX_MAX + 1],
                           char target[SP_GIT_REF_NAME_MAX + 1], sp_error_t *err);

/* Looks name (NUL-terminated) up in the packed-refs bytes buf[0..len), every
   line of which must be well formed up to the match.  Returns 1 and fills
   commit, 0 when it is not there, -1 on error.  */
int sp_git_packed_refs_find (const char *buf, size_t len, const char *name,
                             char commit[SP_COMMIT_HEX_MAX + 1], sp_error_t *err);

/* Reads core.repositoryformatversion and extensions.objectformat from the
   config text s[0..len) with a small strict parser; anything it cannot read
   is an error naming the line.  */
int sp_git_parse_config (const char *s, size_t len, struct sp_git_format *f, sp_error_t *err);

/* Writes the fresh minimal config for f into text, NUL-terminated.  Returns
   its length, or -1 on error.  */
int sp_git_config_render (const struct sp_git_format *f, char text[SP_GIT_FRESH_CONFIG_SIZE],
                          sp_error_t *err);

#endif
