/* The staged seeds in the state directory (docs/staging.md):
     STATE/seeds/RUN/K/   one immutable seed per configured repository
     STATE/staged.json    which run is current, and each seed's repository,
                          source, commit, content digest and omitted
                          submodules (mode 0600)
   STATE is the protected state directory, root's and mode 0700.  */
#ifndef SP_STAGE_SEED_STORE_H
#define SP_STAGE_SEED_STORE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/bounds.h"
#include "base/error.h"
#include "base/sha256.h"
#include "seed/git_seed.h"
#include "tree/walk.h"

#define SP_STAGED_FILE "staged.json"
#define SP_SEEDS_DIR   "seeds"

enum sp_seed_source
{
  SP_SEED_LOCAL,
  SP_SEED_GITHUB,
};

struct sp_seed
{
  char *repo;
  unsigned index; /* the seed is seeds/RUN/INDEX */
  enum sp_seed_source source;
  char commit[SP_COMMIT_HEX_MAX + 1];
  char digest[SP_DIGEST_TEXT_SIZE];
  /* The paths of the submodules (HEAD's gitlinks) the seed holds as empty
     directories, each as sp_quote_name shows it, at most
     SP_SEED_SUBMODULES_MAX.  omitted_known is false when the record cannot
     say: a GitHub seed (its tarball does not mark them), or a seed recorded
     by a version 1 staged.json, from before the submodule policy.  */
  bool omitted_known;
  char **omitted;
  size_t n_omitted;
  /* The local clone it was staged from, as stage was given it (an absolute
     path), so that status can set the clone's HEAD beside it; NULL for a
     GitHub seed, and for one recorded before version 3.  */
  char *clone;
};

/* Frees seed->omitted (the rest of a seed is its owner's).  */
void sp_seed_omitted_release (struct sp_seed *seed);

struct sp_staged
{
  char run[SP_ID_MAX_CHARS + 1];
  struct sp_seed *seeds;
  size_t n;
};

/* Opens (creating it, 0700, when absent) the state directory.  Refuses one
   that is not root's, or that group or others may write or enter.  */
int sp_state_open (const char *path, int create, int *dirfd, sp_error_t *err);

/* The error for a state directory that could not be opened (status: the
   open's errno), saying what to do where the operator can act: none there
   yet (run stage first), or not the caller's (run as root).  The status is
   kept in the error.  Returns -1.  */
int sp_state_open_error (sp_error_t *err, const char *path, int status);

/* "local" or "github".  */
const char *sp_seed_source_name (enum sp_seed_source source);

/* The bytes of staged.json (version 3) for staged, in *out (malloc'd,
   *len bytes, not NUL-terminated).  Fails when they would be more than
   SP_STAGED_MAX_BYTES, which no reader would take.  */
int sp_staged_render (const struct sp_staged *staged, char **out, size_t *len, sp_error_t *err);

/* Writes STATE/staged.json atomically (0600).  */
int sp_staged_write (int state_dirfd, const struct sp_staged *staged, sp_error_t *err);

/* Parses the bytes of a staged.json strictly: anything malformed is an
   error.  Version 3 seeds have exactly seven members: `clone` the seventh,
   an absolute path (a local seed's) or null.  Version 2 seeds have the
   other six, `omitted_submodules` the sixth: an array of quoted paths, or
   null (a GitHub seed's is always null).  Version 1, from before the submodule policy, has exactly the
   other five, and its seeds' omitted_known is false.  On success out holds
   the seeds (sp_staged_release frees them); on failure it is empty.  */
int sp_staged_parse (const char *buf, size_t len, struct sp_staged *out, sp_error_t *err);

/* Reads STATE/staged.json (at most SP_STAGED_MAX_BYTES) and parses it with
   sp_staged_parse.  */
int sp_staged_load (int state_dirfd, struct sp_staged *out, sp_error_t *err);

const struct sp_seed *sp_staged_find (const struct sp_staged *staged, const char *repo);

void sp_staged_release (struct sp_staged *staged);
#define cleanup_staged __attribute__ ((cleanup (sp_staged_release)))

/* Opens the seed's directory without following any symlink.  */
int sp_seed_open (int state_dirfd, const char *run, unsigned index, sp_error_t *err);

/* Records a freshly sealed seed's digest, read through its read-only mount
   (a seed that is not on one is refused); tick (tree/walk.h, NULL: none)
   meters the walk and may stop it.  */
int sp_seed_measure (int state_dirfd, const char *run, struct sp_seed *seed, sp_tree_tick_fn tick,
                     void *tick_ctx, sp_error_t *err);

/* Re-checks a staged seed: its tree still digests to the recorded digest, and
   it is on a read-only mount.  Errors name both digests.  */
int sp_seed_verify (int state_dirfd, const char *run, const struct sp_seed *seed, sp_error_t *err);

/* Seals seeds/RUN: read-only bind-mounts it onto itself (nosuid, nodev,
   noexec), so that not even root on the host can change a seed by accident.  */
int sp_seed_run_seal (int state_dirfd, const char *run, sp_error_t *err);

/* What sp_seed_store_reset could not remove: one error each, in order.  */
struct sp_reset_report
{
  sp_error_t *left;
  size_t n;
};

/* Removes staged.json, then unmounts and removes every run under seeds/,
   then seeds/ itself.  It goes as far as it can: something that stays (a
   busy mount, an immutable file) does not stop the rest, and a second call
   once the obstacle is gone finishes the job.  Returns 0 when nothing is
   left; otherwise -1 with the first failure in *err and, when report is not
   NULL, every failure in it (names quoted, one line each).  Each run's
   removal is shown on progress (progress.h; NULL for none) as
   `seeds/RUN: remove: N files, B`.  */
struct sp_progress;
int sp_seed_store_reset (int state_dirfd, struct sp_progress *progress, struct sp_reset_report *report,
                         sp_error_t *err);

void sp_reset_report_release (struct sp_reset_report *report);
#define cleanup_reset_report __attribute__ ((cleanup (sp_reset_report_release)))

#endif
