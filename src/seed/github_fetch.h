/* Fetching a repository snapshot from the GitHub REST API (github.com or a
   GitHub Enterprise Server) with libcurl, for staging only.  See
   docs/staging.md.  */
#ifndef SP_SEED_GITHUB_FETCH_H
#define SP_SEED_GITHUB_FETCH_H

#include <stdint.h>

#include "base/error.h"
#include "seed/git_seed.h"

struct sp_progress;

struct sp_github_source
{
  const char *api_base;       /* https://api.github.com, or https://HOST/api/v3 for GHES */
  const char *codeload_host;  /* the one host a tarball redirect may lead to (host or host:port) */
  const char *ref;            /* the branch, tag or commit to stage; "HEAD" is the default branch */
  const char *ca_file;        /* a CA bundle to trust instead of the system's, or NULL */
  const char *token;          /* sent only as "Authorization: Bearer" to api_base; NULL for none */
  uint64_t max_tarball_bytes; /* the compressed download */
  uint64_t max_entries;       /* archive members, directories and links included */
  uint64_t max_tree_bytes;    /* regular-file bytes extracted, all members together */
  /* Staging's progress line (progress.h), or NULL: the download's bytes,
     then the tarball's (tarball.h).  */
  struct sp_progress *progress;
};

/* Resolves ref to a commit through the API, downloads that commit's tarball,
   and extracts it, minus its single top-level directory, into the empty
   directory dst_dirfd with libarchive's secure flags and the limits above.
   TLS is always verified; https only.  Errors name the repository, the step
   and the HTTP status where there is one, and never the token.
   - repo is a normalized name (sp_repo_name_check); ref is limited to
     letters, digits and `._-/+`; api_base must be https with no credentials,
     query or fragment; every limit must be positive (bounds.h has defaults).
   - The token is sent only to api_base, in a header built in memory and
     wiped after use; a redirect goes only to codeload_host, without it.
   - commit is written only on success (it is "" on failure).
   - Extraction fchdir()s into dst_dirfd and back: call it from a
     single-threaded process (staging is).  On failure dst_dirfd may hold a
     partial tree, which the caller must discard.  */
int sp_github_fetch (const struct sp_github_source *source, const char *repo, int dst_dirfd,
                     char commit[SP_COMMIT_HEX_MAX + 1], sp_error_t *err);

#endif
