/* A local clone staged as its commit, never as its working tree: the seed is
   exactly the tree of the commit that HEAD names, plus a `.git` that holds
   only what that commit and the clone's refs reach.  Git objects are read
   with libgit2, raw: no filter, attribute, hook, include or helper is ever
   consulted.  See docs/staging.md ("Local clones: the commit, not the working
   tree").  */
#ifndef SP_SEED_GIT_STAGE_H
#define SP_SEED_GIT_STAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "seed/git_seed.h"
#include "text/config.h"
#include "tree/copy.h"

/* A clone's submodules as staging meets them (docs/staging.md,
   "Submodules").  The caller sets policy; sp_git_copy_gitdir and
   sp_git_stage_commit fill in the rest.  Nothing of a submodule's own
   repository is ever read: a gitlink names a commit of another repository,
   which is neither looked up nor packed.  */
struct sp_git_submodules
{
  enum sp_submodule_policy policy;
  /* The clone had `.git/modules`, where git keeps its submodules'
     repositories: left out of the copy unopened.  */
  bool modules_dir;
  /* Under SP_SUBMODULES_OMIT: the paths of HEAD's gitlinks, each written as
     an empty directory, in tree order, each as sp_quote_name shows it; at
     most SP_SEED_SUBMODULES_MAX.  */
  char **omitted;
  size_t n_omitted;
};

void sp_git_submodules_release (struct sp_git_submodules *sub);
#define cleanup_git_submodules __attribute__ ((cleanup (sp_git_submodules_release)))

/* Copies the clone's `.git` directory, and nothing else of the clone, into
   seed_dirfd/.git with the safe tree copy (limits as for any copy), but for
   `.git/modules`, which is left out without being opened (sub->modules_dir
   says whether it was there).  A `.git` that is missing, a file (`gitdir:`),
   a symlink or anything but a directory is refused through sp_git_dir_open,
   as sp_git_sanitize does.  */
int sp_git_copy_gitdir (int clone_dirfd, int seed_dirfd, const struct sp_copy_options *limits,
                        struct sp_git_submodules *sub, sp_error_t *err);

/* Run on a seed holding only a `.git` that sp_git_sanitize has sanitized,
   with commit the id it read from HEAD.  In place:
   - writes the commit's tree into seed_dirfd: directories, regular files
     (0644, or 0755 for git's executable mode), symlinks as links with the
     blob's bytes as target, and a submodule entry (gitlink) as an empty
     directory; blobs are written raw, `.gitmodules` too (it is never read).
     Refused, naming the path quoted: a `.git` entry (any letter case)
     anywhere, a name git itself would never write ("", ".", "..", one with
     '/'), a path over SP_TREE_PATH_MAX - 1 bytes, a symlink target that is
     empty, over SP_COPY_LINK_MAX - 1 bytes or holds a NUL, and any limit
     passed (a blob's size counts before its bytes are written);
   - by sub->policy: under SP_SUBMODULES_OMIT records each gitlink's path in
     sub (more than SP_SEED_SUBMODULES_MAX is refused); under
     SP_SUBMODULES_REJECT refuses the first gitlink, naming its path, then a
     top-level `.gitmodules`, then sub->modules_dir, naming `.git/modules`;
   - replaces `.git/index` (and drops any split index) with one made from
     that tree, so nothing staged but uncommitted survives;
   - drops `refs/stash`, which records uncommitted work;
   - replaces the object store with one pack holding exactly the objects
     that HEAD and the remaining refs reach (history stops at the commits
     `.git/shallow` names), so no unreachable object (an uncommitted `git
     add`, a dropped stash, an amended commit) survives.  The clone's packed
     entries are reused, deltas too, and every object of the new pack is
     hashed before it is kept (src/seed/pack_write.h).  The objects depend
     only on the commit and the refs, the pack's bytes also on how the clone
     packed them: two stagings of one clone digest the same whatever its
     working tree held.
   SHA-256 repositories are refused: libgit2 1.5 reads SHA-1 only.  */
int sp_git_stage_commit (int seed_dirfd, const char *commit, const struct sp_copy_options *limits,
                         struct sp_git_submodules *sub, sp_error_t *err);

/* How many paths of the local clone at clone_dirfd hold work its committed
   HEAD (commit) does not: changed in the index (added, removed, in conflict)
   or, by git's stat data (type, size, modification time: lstat only, no
   file is opened), on disk since they were added.  Untracked files are not
   looked for.  Reads the copy's `.git/index` in seed_dirfd, as
   sp_git_sanitize left it: call it before sp_git_stage_commit replaces it.
   For a warning only: staging stages the commit either way.  */
int sp_git_count_uncommitted (int clone_dirfd, int seed_dirfd, const char *commit, size_t *changed,
                              sp_error_t *err);

#endif
