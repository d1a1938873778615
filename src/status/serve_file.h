/* What `status` reads of a running serve (docs/operations.md, "status"):
   STATE/serve.json, which serve writes at ready, replaces as its state
   changes and removes at stop (serve.h, SP_SERVE_REPORT_FILE), and the
   staged seeds' clones' HEADs.  Read without a lock and without writing.

   serve.json is trusted only beside the state lock: it is serve's live
   state when the lock's holder is serve with the same pid, and stale (a
   kill -9 left it) otherwise; the caller decides, from sp_state_lock_holder.  */
#ifndef SP_STATUS_SERVE_FILE_H
#define SP_STATUS_SERVE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/bounds.h"
#include "base/error.h"
#include "seed/git_seed.h"
#include "serve/audit.h"
#include "stage/seed_store.h"

/* serve.json is small: a few names per repository.  */
#define SP_SERVE_FILE_MAX_BYTES (1 << 20)

struct sp_serve_file_repo
{
  char *repo;
  uint64_t waiting;
};

struct sp_serve_file
{
  pid_t pid;
  char run[SP_ID_MAX_CHARS + 1];
  char started[SP_AUDIT_TIME_BYTES];
  char backend[16], release[16], snapshot[16];
  char *socket;
  uint64_t pool;
  uint64_t bit_budget;     /* bits; 0: none */
  uint64_t run_bit_budget; /* bits; 0: none */
  uint64_t answered, refused, failed;
  struct sp_serve_file_repo *repos;
  size_t n_repos;
};

/* Reads STATE/serve.json: 0 with *present false when there is none, 0
   with *out filled, or -1 naming the file and what is wrong with it (a
   file that is not root's and 0600, or malformed).  */
int sp_serve_file_read (int state_dirfd, struct sp_serve_file *out, bool *present, sp_error_t *err);

/* The waiting sandboxes serve said for repo; false when it named none.  */
bool sp_serve_file_waiting (const struct sp_serve_file *f, const char *repo, uint64_t *waiting);

void sp_serve_file_release (struct sp_serve_file *f);
#define cleanup_serve_file __attribute__ ((cleanup (sp_serve_file_release)))

/* Reads the HEAD commit of the clone a local seed was staged from, as
   stage does (git_seed.h: no git run, no symlink followed, every read
   capped, nothing written, no network).  -1 with the reason when it
   cannot (the clone is gone, or its HEAD names no commit).  */
int sp_clone_head (const char *clone, char commit[SP_COMMIT_HEX_MAX + 1], sp_error_t *err);

#endif
