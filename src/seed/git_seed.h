/* The git metadata of a seed, handled without ever running git: reading the
   commit from HEAD, loose refs and packed-refs, and sanitizing a copy of a
   clone.  See docs/staging.md.  */
#ifndef SP_SEED_GIT_SEED_H
#define SP_SEED_GIT_SEED_H

#include "base/error.h"

/* A commit id: 40 (SHA-1) or 64 (SHA-256) lowercase hex digits, plus NUL.  */
#define SP_COMMIT_HEX_MAX 64

/* Resolves HEAD in the git directory gitdirfd to a commit: HEAD is a commit
   id or "ref: refs/...", followed through loose refs and packed-refs, at most
   SP_GIT_SYMREF_MAX_DEPTH levels deep.  Ref names are checked before any
   open, nothing is opened through a symlink, and every file read is capped.
   An unborn branch fails with "HEAD points at refs/heads/NAME, which has no
   commit".  */
int sp_git_read_commit (int gitdirfd, char commit[SP_COMMIT_HEX_MAX + 1], sp_error_t *err);

/* Opens dirfd/.git, which must be a directory (not a symlink, and not a
   `gitdir:` file, which a worktree uses), and returns its fd.  Each refusal
   says what `.git` is instead.  */
int sp_git_dir_open (int dirfd, sp_error_t *err);

/* Sanitizes, in place, the seed tree under dirfd (a copy, never the
   operator's clone) and reads its commit:
   - refuses what v1 does not support, with a precise error: a `.git` that is
     a file (`gitdir:`), alternates, linked worktrees (`worktrees/`,
     `commondir`), a `.git/modules/` (sp_git_copy_gitdir never copies the
     submodules' repositories, so one here was put by something else), a
     nested `.git` below the top, a symlink or special file inside `.git`,
     repository extensions other than objectformat (named in the error), and
     a config its strict parser cannot read (with the line number).  What
     the commit's submodules become is the tree writer's (git_stage.h);
   - keeps only HEAD, objects, refs, packed-refs, index, sharedindex.<id>,
     shallow, info and description in `.git`, with an empty `hooks/`, and
     writes a fresh minimal `config` (core.repositoryformatversion, filemode,
     bare, and extensions.objectformat for sha256): no remote, credential,
     credential helper, url.*.insteadOf, core.fsmonitor, core.hooksPath or
     include survives.  The new entries get the owner of `.git`.  */
int sp_git_sanitize (int dirfd, char commit[SP_COMMIT_HEX_MAX + 1], sp_error_t *err);

/* The reject policy for a seed without git objects (a GitHub tarball's,
   where a submodule is an empty directory nothing marks): refuses a
   top-level `.gitmodules` in seed_dirfd, never opening it.  */
int sp_git_refuse_gitmodules (int seed_dirfd, sp_error_t *err);

#endif
