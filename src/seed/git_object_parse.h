/* The few fields the walk of a history needs from a commit, a tree or a tag,
   parsed from the object's raw bytes (git's formats), which came from a
   hostile clone: every length is checked.  The caller has checked the bytes
   against their id before.  */
#ifndef SP_SEED_GIT_OBJECT_PARSE_H
#define SP_SEED_GIT_OBJECT_PARSE_H

#include <git2.h>
#include <stddef.h>
#include <stdint.h>

/* One entry of a tree: "MODE NAME\0" and a 20-byte id.  */
struct sp_git_tree_entry
{
  uint32_t mode;
  const char *name;
  size_t name_len;
  git_oid id;
};

/* The entry at *at, which then moves past it.  1 for an entry, 0 at the end,
   -1 when the tree is malformed.  */
int sp_git_tree_next (const unsigned char *data, size_t len, size_t *at, struct sp_git_tree_entry *e);

/* What a tree entry's mode makes it: a tree, a gitlink (another repository's
   commit, never followed) or a blob (a file or a symlink).  */
git_object_t sp_git_tree_entry_type (uint32_t mode);

/* A commit's tree ("tree ID" on its first line).  *at moves past it, to where
   its parents are read.  -1 when malformed.  */
int sp_git_commit_tree (const unsigned char *data, size_t len, size_t *at, git_oid *tree);

/* The commit's next "parent ID" line.  1 for a parent, 0 when there are no
   more, -1 when malformed.  */
int sp_git_commit_next_parent (const unsigned char *data, size_t len, size_t *at, git_oid *parent);

/* What a tag points at ("object ID" on its first line).  -1 when malformed.  */
int sp_git_tag_target (const unsigned char *data, size_t len, git_oid *target);

#endif
