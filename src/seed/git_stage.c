/* Staging a local clone's commit: see src/seed/git_stage.h and
   docs/staging.md.  libgit2 opens only the sanitized copy's `.git`, whose
   config staging wrote itself, with every config search path outside the
   repository emptied.  Nothing here asks libgit2 for a checkout, a filter, an
   attribute or a hook: blobs are read raw and written by us, relative to
   directory fds.  */
#define _GNU_SOURCE
#include "seed/git_stage.h"

#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/quote.h"
#include "os/dir_names.h"
#include "os/fileio.h"
#include "os/open_beneath.h"
#include "os/progress.h"
#include "tree/remove.h"

#include "seed/git_object_parse.h"
#include "seed/pack_index.h"
#include "seed/pack_item.h"
#include "seed/pack_write.h"

/* The new object store is built beside the old one, then swapped in.  */
#define NEW_OBJECTS "sp-objects.new"
#define OLD_OBJECTS "sp-objects.old"

static inline void
free_object (git_object **p)
{
  git_object_free (*p);
}
static inline void
free_tree (git_tree **p)
{
  git_tree_free (*p);
}
static inline void
free_commit (git_commit **p)
{
  git_commit_free (*p);
}
static inline void
free_blob (git_blob **p)
{
  git_blob_free (*p);
}
static inline void
free_index (git_index **p)
{
  git_index_free (*p);
}
static inline void
free_reference (git_reference **p)
{
  git_reference_free (*p);
}
static inline void
free_refdb (git_refdb **p)
{
  git_refdb_free (*p);
}
static inline void
free_reference_iterator (git_reference_iterator **p)
{
  git_reference_iterator_free (*p);
}
static inline void
free_repository (git_repository **p)
{
  git_repository_free (*p);
}
static inline void
free_tree_entry (git_tree_entry **p)
{
  git_tree_entry_free (*p);
}
#define cleanup_git_object             __attribute__ ((cleanup (free_object)))
#define cleanup_git_repository         __attribute__ ((cleanup (free_repository)))
#define cleanup_git_tree_entry         __attribute__ ((cleanup (free_tree_entry)))
#define cleanup_git_tree               __attribute__ ((cleanup (free_tree)))
#define cleanup_git_commit             __attribute__ ((cleanup (free_commit)))
#define cleanup_git_blob               __attribute__ ((cleanup (free_blob)))
#define cleanup_git_index              __attribute__ ((cleanup (free_index)))
#define cleanup_git_reference          __attribute__ ((cleanup (free_reference)))
#define cleanup_git_refdb              __attribute__ ((cleanup (free_refdb)))
#define cleanup_git_reference_iterator __attribute__ ((cleanup (free_reference_iterator)))

/* libgit2's own message for the last failure, quoted: it may name paths or
   refs from the clone.  */
static const char *
git_message (char q[SP_QUOTE_BUF_SIZE])
{
  const git_error *e = git_error_last ();

  return sp_quote_name (e && e->message ? e->message : "unknown libgit2 error", q);
}

static int
git_fail (sp_error_t *err, const char *what)
{
  char q[SP_QUOTE_BUF_SIZE];

  return sp_make_error (err, 0, "%s: %s", what, git_message (q));
}

/* A set of object ids, open addressing on the id's first bytes (ids are
   hashes already).  */
struct oid_set
{
  git_oid *v;
  size_t cap; /* a power of two, or 0 */
  size_t len;
};

static void
oid_set_release (struct oid_set *s)
{
  free (s->v);
  s->v = NULL;
  s->cap = s->len = 0;
}

static size_t
oid_slot (const struct oid_set *s, const git_oid *id)
{
  uint64_t h;

  memcpy (&h, id->id, sizeof (h));
  for (size_t i = (size_t)h & (s->cap - 1);; i = (i + 1) & (s->cap - 1))
    if (git_oid_is_zero (&s->v[i]) || git_oid_equal (&s->v[i], id))
      return i;
}

static bool
oid_set_has (const struct oid_set *s, const git_oid *id)
{
  return s->cap > 0 && !git_oid_is_zero (&s->v[oid_slot (s, id)]);
}

/* 1 when id was added, 0 when it was there already, -1 when out of memory.  */
static int
oid_set_add (struct oid_set *s, const git_oid *id)
{
  size_t slot;

  if ((s->len + 1) * 2 > s->cap)
    {
      struct oid_set grown = { .cap = s->cap ? s->cap * 2 : 1024 };

      grown.v = calloc (grown.cap, sizeof (*grown.v));
      if (grown.v == NULL)
        return -1;
      for (size_t i = 0; i < s->cap; i++)
        if (!git_oid_is_zero (&s->v[i]))
          grown.v[oid_slot (&grown, &s->v[i])] = s->v[i];
      grown.len = s->len;
      free (s->v);
      *s = grown;
    }
  slot = oid_slot (s, id);
  if (!git_oid_is_zero (&s->v[slot]))
    return 0;
  s->v[slot] = *id;
  s->len++;
  return 1;
}

struct stage_ctx
{
  git_repository *repo;
  git_odb *odb;
  const struct sp_copy_options *limits;
  struct sp_git_submodules *sub;
  bool gitmodules; /* the commit has a top-level `.gitmodules` */
  uint64_t bytes;
  uint64_t entries;
  struct oid_set packed;  /* objects already in the new pack */
  struct oid_set shallow; /* commits whose parents the clone does not have */
  char path[SP_TREE_PATH_MAX];
};

static int
lookup_error (sp_error_t *err, const git_oid *id, const char *what)
{
  char hex[GIT_OID_HEXSZ + 1];
  char q[SP_QUOTE_BUF_SIZE];

  git_oid_tostr (hex, sizeof (hex), id);
  return sp_make_error (err, 0, "%s %s: %s", what, hex, git_message (q));
}

/* ---- the commit's tree, written into the seed ---- */

static int write_tree (struct stage_ctx *ctx, const git_tree *tree, int dirfd, size_t path_len,
                       unsigned depth, sp_error_t *err);

/* A name git itself would never write, or one the seed policy refuses.  */
static const char *
refused_name (const char *name)
{
  if (name[0] == '\0' || strcmp (name, ".") == 0 || strcmp (name, "..") == 0 || strchr (name, '/') != NULL)
    return "is not a name git writes: refused";
  if (strcasecmp (name, ".git") == 0)
    return "is a `.git` entry in the commit (a nested repository, or a forged tree): refused";
  return NULL;
}

/* What every refusal under the reject policy ends with.  */
#define REJECTED "refused, as sealedProbes.submodules.reject lists this repository"

void
sp_git_submodules_release (struct sp_git_submodules *sub)
{
  for (size_t i = 0; i < sub->n_omitted; i++)
    free (sub->omitted[i]);
  free (sub->omitted);
  sub->omitted = NULL;
  sub->n_omitted = 0;
}

/* A gitlink at ctx->path: refused, or recorded before write_dir makes its
   empty directory.  Its commit is another repository's: never looked up.  */
static int
note_gitlink (struct stage_ctx *ctx, sp_error_t *err)
{
  char q[SP_QUOTE_BUF_SIZE];
  char **grown;

  if (ctx->sub->policy == SP_SUBMODULES_REJECT)
    return sp_make_error (err, 0, "`%s` is a submodule (a gitlink): " REJECTED, sp_quote_name (ctx->path, q));
  if (ctx->sub->n_omitted >= SP_SEED_SUBMODULES_MAX)
    return sp_make_error (err, 0, "`%s`: the commit has more than %d submodules, the most a seed records",
                          sp_quote_name (ctx->path, q), SP_SEED_SUBMODULES_MAX);
  grown = realloc (ctx->sub->omitted, (ctx->sub->n_omitted + 1) * sizeof (*grown));
  if (grown == NULL)
    return sp_make_error (err, ENOMEM, "record the submodule `%s`", sp_quote_name (ctx->path, q));
  ctx->sub->omitted = grown;
  /* Recorded as operators are shown it: the path is the repository's.  */
  grown[ctx->sub->n_omitted] = strdup (sp_quote_name (ctx->path, q));
  if (grown[ctx->sub->n_omitted] == NULL)
    return sp_make_error (err, ENOMEM, "record the submodule `%s`", q);
  ctx->sub->n_omitted++;
  return 0;
}

/* After the tree, under reject: what declares or holds a submodule though
   HEAD's tree has no gitlink.  */
static int
reject_declared_submodules (const struct stage_ctx *ctx, sp_error_t *err)
{
  if (ctx->sub->policy != SP_SUBMODULES_REJECT)
    return 0;
  if (ctx->gitmodules)
    return sp_make_error (err, 0, "`.gitmodules` is present: the commit declares submodules, " REJECTED);
  if (ctx->sub->modules_dir)
    return sp_make_error (
        err, 0,
        "`.git/modules` is present: the clone holds a submodule's repository (never read), " REJECTED);
  return 0;
}

static int
write_blob (struct stage_ctx *ctx, int dirfd, const git_tree_entry *e, mode_t mode, sp_error_t *err)
{
  const git_oid *id = git_tree_entry_id (e);
  cleanup_git_blob git_blob *blob = NULL;
  cleanup_close int fd = -1;
  char q[SP_QUOTE_BUF_SIZE];
  git_object_t type;
  size_t size;

  /* The size counts before any byte is written.  */
  if (git_odb_read_header (&size, &type, ctx->odb, id) < 0)
    return lookup_error (err, id, "read the blob");
  if (type != GIT_OBJECT_BLOB)
    return sp_make_error (err, 0, "`%s`: the tree names a %s as a file", sp_quote_name (ctx->path, q),
                          git_object_type2string (type));
  if ((uint64_t)size > ctx->limits->max_bytes - ctx->bytes)
    return sp_make_error (err, 0, "`%s` is %zu bytes: the seed would pass its limit of %llu bytes",
                          sp_quote_name (ctx->path, q), size, (unsigned long long)ctx->limits->max_bytes);
  ctx->bytes += size;
  if (git_blob_lookup (&blob, ctx->repo, id) < 0)
    return lookup_error (err, id, "read the blob");
  fd = openat (dirfd, git_tree_entry_name (e), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0)
    return sp_make_error (err, errno, "create `%s`", sp_quote_name (ctx->path, q));
  if (sp_write_all (fd, git_blob_rawcontent (blob), (size_t)git_blob_rawsize (blob), err) < 0)
    return sp_error_wrap (err, "write `%s`", sp_quote_name (ctx->path, q));
  sp_progress_add (ctx->limits->progress, 1, (uint64_t)git_blob_rawsize (blob));
  return 0;
}

static int
write_symlink (struct stage_ctx *ctx, int dirfd, const git_tree_entry *e, sp_error_t *err)
{
  cleanup_git_blob git_blob *blob = NULL;
  cleanup_free char *target = NULL;
  char q[SP_QUOTE_BUF_SIZE];
  size_t len;

  if (git_blob_lookup (&blob, ctx->repo, git_tree_entry_id (e)) < 0)
    return lookup_error (err, git_tree_entry_id (e), "read the symlink");
  len = (size_t)git_blob_rawsize (blob);
  if (len == 0 || len >= SP_COPY_LINK_MAX || memchr (git_blob_rawcontent (blob), '\0', len) != NULL)
    return sp_make_error (err, 0,
                          "`%s` is a symlink whose target is empty, over %d bytes or holds a NUL: refused",
                          sp_quote_name (ctx->path, q), SP_COPY_LINK_MAX - 1);
  target = strndup (git_blob_rawcontent (blob), len);
  if (target == NULL)
    return sp_make_error (err, ENOMEM, "`%s`", sp_quote_name (ctx->path, q));
  /* Kept as a link, whatever it points at: nothing is written through it.  */
  if (symlinkat (target, dirfd, git_tree_entry_name (e)) < 0)
    return sp_make_error (err, errno, "create `%s`", sp_quote_name (ctx->path, q));
  sp_progress_add (ctx->limits->progress, 1, 0);
  return 0;
}

/* A subtree, or a gitlink's empty directory (no submodule content).  */
static int
write_dir (struct stage_ctx *ctx, int dirfd, const git_tree_entry *e, size_t path_len, unsigned depth,
           sp_error_t *err)
{
  cleanup_git_tree git_tree *tree = NULL;
  cleanup_close int child = -1;
  char q[SP_QUOTE_BUF_SIZE];
  const char *name = git_tree_entry_name (e);

  if (depth + 1 > ctx->limits->max_depth)
    return sp_make_error (err, 0, "`%s` is more than %u directories deep", sp_quote_name (ctx->path, q),
                          ctx->limits->max_depth);
  if (mkdirat (dirfd, name, 0700) < 0)
    return sp_make_error (err, errno, "create `%s`", sp_quote_name (ctx->path, q));
  if (git_tree_entry_filemode (e) == GIT_FILEMODE_COMMIT)
    return 0;
  child = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (child < 0)
    return sp_make_error (err, errno, "open `%s`", sp_quote_name (ctx->path, q));
  if (git_tree_lookup (&tree, ctx->repo, git_tree_entry_id (e)) < 0)
    return lookup_error (err, git_tree_entry_id (e), "read the tree");
  return write_tree (ctx, tree, child, path_len, depth + 1, err);
}

static int
write_tree (struct stage_ctx *ctx, const git_tree *tree, int dirfd, size_t path_len, unsigned depth,
            sp_error_t *err)
{
  size_t n = git_tree_entrycount (tree);
  char q[SP_QUOTE_BUF_SIZE];

  for (size_t i = 0; i < n; i++)
    {
      const git_tree_entry *e = git_tree_entry_byindex (tree, i);
      const char *name = git_tree_entry_name (e);
      const char *why = refused_name (name);
      ssize_t child_len = sp_dir_child_path (ctx->path, sizeof (ctx->path), path_len, name);
      int ret;

      if (child_len < 0)
        {
          char qn[SP_QUOTE_BUF_SIZE];

          return sp_make_error (err, 0, "a path below `%s` is longer than %d bytes: `%s`...",
                                sp_quote_name (*ctx->path ? ctx->path : ".", q), SP_TREE_PATH_MAX - 1,
                                sp_quote_name (name, qn));
        }
      if (why != NULL)
        return sp_make_error (err, 0, "`%s` %s", sp_quote_name (ctx->path, q), why);
      if (sp_progress_check (ctx->limits->progress, err) < 0)
        return -1;
      if (++ctx->entries > ctx->limits->max_entries)
        return sp_make_error (err, 0, "`%s`: the commit has more than %llu entries",
                              sp_quote_name (ctx->path, q), (unsigned long long)ctx->limits->max_entries);
      if (depth == 0 && strcmp (name, ".gitmodules") == 0)
        ctx->gitmodules = true; /* written as the commit holds it, never read */
      switch (git_tree_entry_filemode (e))
        {
        case GIT_FILEMODE_COMMIT:
          ret = note_gitlink (ctx, err) < 0 ? -1 : write_dir (ctx, dirfd, e, (size_t)child_len, depth, err);
          break;
        case GIT_FILEMODE_TREE:
          ret = write_dir (ctx, dirfd, e, (size_t)child_len, depth, err);
          break;
        case GIT_FILEMODE_BLOB:
          ret = write_blob (ctx, dirfd, e, 0644, err);
          break;
        case GIT_FILEMODE_BLOB_EXECUTABLE:
          ret = write_blob (ctx, dirfd, e, 0755, err);
          break;
        case GIT_FILEMODE_LINK:
          ret = write_symlink (ctx, dirfd, e, err);
          break;
        case GIT_FILEMODE_UNREADABLE:
        default:
          ret = sp_make_error (err, 0, "`%s` has the unknown git mode %o", sp_quote_name (ctx->path, q),
                               (unsigned)git_tree_entry_filemode_raw (e));
          break;
        }
      if (ret < 0)
        return -1;
      ctx->path[path_len] = '\0';
    }
  return 0;
}

/* ---- the index, made from the tree ---- */

static int
replace_index (int gitfd, const git_tree *tree, sp_error_t *err)
{
  cleanup_dir_names struct sp_dir_names names = { 0 };
  cleanup_git_index git_index *index = NULL;
  char path[64];

  /* The old index, and any split index it named, may record uncommitted
     work (a `git add` never committed).  */
  if (sp_dir_names_read (gitfd, &names, err) < 0)
    return sp_error_wrap (err, "list `.git`");
  for (size_t i = 0; i < names.len; i++)
    if (strcmp (names.v[i], "index") == 0 || strncmp (names.v[i], "sharedindex.", 12) == 0)
      if (unlinkat (gitfd, names.v[i], 0) < 0)
        return sp_make_error (err, errno, "remove `.git/%s`", names.v[i]);
  snprintf (path, sizeof (path), "/proc/self/fd/%d/index", gitfd);
  if (git_index_open (&index, path) < 0 || git_index_read_tree (index, tree) < 0
      || git_index_write (index) < 0)
    return git_fail (err, "write a fresh `.git/index`");
  return 0;
}

/* ---- the object store: exactly what HEAD and the refs reach ---- */

/* Counts one object to keep (already in ctx->packed).  */
static int
pack_insert (struct stage_ctx *ctx, sp_error_t *err)
{
  if (sp_progress_check (ctx->limits->progress, err) < 0)
    return -1;
  sp_progress_add (ctx->limits->progress, 1, 0);
  return 0;
}

static inline void
free_odb_object (git_odb_object **p)
{
  git_odb_object_free (*p);
}
#define cleanup_git_odb_object __attribute__ ((cleanup (free_odb_object)))

/* Reads an object for the walk, and checks it is the object its id names:
   what the walk reads decides what is kept, so a forged tree must not lead
   it anywhere.  Hashed here with nettle rather than by libgit2's strict
   mode, whose collision-detecting SHA-1 was 7 s of git.git's 18 s walk (the
   pack check hashes every kept object again).  want may be GIT_OBJECT_ANY.  */
static int
read_checked (struct stage_ctx *ctx, const git_oid *id, git_object_t want, git_odb_object **out,
              const char *what, sp_error_t *err)
{
  unsigned char hash[GIT_OID_RAWSZ];
  git_object_t type;

  if (git_odb_read (out, ctx->odb, id) < 0)
    return lookup_error (err, id, what);
  type = git_odb_object_type (*out);
  if ((want != GIT_OBJECT_ANY && type != want) || sp_pack_type_name ((unsigned)type) == NULL)
    return lookup_error (err, id, what);
  sp_pack_object_id ((unsigned)type, git_odb_object_data (*out), git_odb_object_size (*out), hash);
  if (memcmp (hash, id->id, sizeof (hash)) != 0)
    {
      char hex[GIT_OID_HEXSZ + 1];

      return sp_make_error (err, 0, "%s %s: the clone's bytes are not the object the id names", what,
                            git_oid_tostr (hex, sizeof (hex), id));
    }
  return 0;
}

static int
malformed (sp_error_t *err, const git_oid *id, const char *what)
{
  char hex[GIT_OID_HEXSZ + 1];

  return sp_make_error (err, 0, "%s %s: malformed", what, git_oid_tostr (hex, sizeof (hex), id));
}

static int
pack_tree (struct stage_ctx *ctx, const git_oid *id, unsigned depth, sp_error_t *err)
{
  cleanup_git_odb_object git_odb_object *tree = NULL;
  struct sp_git_tree_entry e;
  const unsigned char *data;
  size_t len, at = 0;
  int added = oid_set_add (&ctx->packed, id);
  int more;

  if (added <= 0)
    return added < 0 ? sp_make_error (err, ENOMEM, "list the objects") : 0;
  if (depth > SP_COPY_DEPTH_CEILING)
    return sp_make_error (err, 0, "a tree in the history is more than %d levels deep", SP_COPY_DEPTH_CEILING);
  if (read_checked (ctx, id, GIT_OBJECT_TREE, &tree, "read the tree", err) < 0 || pack_insert (ctx, err) < 0)
    return -1;
  data = git_odb_object_data (tree);
  len = git_odb_object_size (tree);
  while ((more = sp_git_tree_next (data, len, &at, &e)) > 0)
    switch (sp_git_tree_entry_type (e.mode))
      {
      case GIT_OBJECT_TREE:
        if (pack_tree (ctx, &e.id, depth + 1, err) < 0)
          return -1;
        break;
      case GIT_OBJECT_BLOB:
        added = oid_set_add (&ctx->packed, &e.id);
        if (added < 0)
          return sp_make_error (err, ENOMEM, "list the objects");
        if (added > 0 && pack_insert (ctx, err) < 0)
          return -1;
        break;
      case GIT_OBJECT_COMMIT: /* a gitlink: another repository's commit */
      default:
        break;
      }
  return more < 0 ? malformed (err, id, "the tree") : 0;
}

/* Every commit reachable from start, with its tree, stopping at the shallow
   boundary.  Iterative: a history is as long as it likes.  */
static int
pack_history (struct stage_ctx *ctx, const git_oid *start, const char *from, sp_error_t *err)
{
  cleanup_free git_oid *stack = NULL;
  size_t len = 0, cap = 0;

  for (const git_oid *next = start; next != NULL; next = len > 0 ? &stack[--len] : NULL)
    {
      cleanup_git_odb_object git_odb_object *commit = NULL;
      git_oid id = *next, tree, parent;
      int added = oid_set_add (&ctx->packed, &id);
      size_t at = 0, first_parent;
      int more;

      if (added < 0)
        return sp_make_error (err, ENOMEM, "list the objects");
      if (added == 0)
        continue;
      if (read_checked (ctx, &id, GIT_OBJECT_COMMIT, &commit, from, err) < 0 || pack_insert (ctx, err) < 0)
        return -1;
      if (sp_git_commit_tree (git_odb_object_data (commit), git_odb_object_size (commit), &at, &tree) < 0)
        return malformed (err, &id, "the commit");
      if (pack_tree (ctx, &tree, 0, err) < 0)
        return -1;
      if (oid_set_has (&ctx->shallow, &id))
        continue;
      /* Parents go on the stack in reverse, so the first is walked first.  */
      first_parent = len;
      while ((more = sp_git_commit_next_parent (git_odb_object_data (commit), git_odb_object_size (commit),
                                                &at, &parent))
             > 0)
        {
          if (len == cap)
            {
              size_t new_cap = cap * 2 + 64;
              git_oid *grown = reallocarray (stack, new_cap, sizeof (*stack));

              if (grown == NULL)
                return sp_make_error (err, ENOMEM, "walk the history");
              stack = grown;
              cap = new_cap;
            }
          stack[len++] = parent;
        }
      if (more < 0)
        return malformed (err, &id, "the commit");
      for (size_t i = first_parent, j = len; i + 1 < j; i++, j--)
        {
          git_oid t = stack[i];

          stack[i] = stack[j - 1];
          stack[j - 1] = t;
        }
    }
  return 0;
}

/* What a ref names: annotated tags are followed to what they tag.  */
static int
pack_object (struct stage_ctx *ctx, const git_oid *id, const char *from, sp_error_t *err)
{
  git_oid current = *id;

  for (unsigned hops = 0; hops < SP_GIT_SYMREF_MAX_DEPTH * 2; hops++)
    {
      cleanup_git_odb_object git_odb_object *obj = NULL;
      int added;

      if (read_checked (ctx, &current, GIT_OBJECT_ANY, &obj, from, err) < 0)
        return -1;
      switch (git_odb_object_type (obj))
        {
        case GIT_OBJECT_COMMIT:
          return pack_history (ctx, &current, from, err);
        case GIT_OBJECT_TREE:
          return pack_tree (ctx, &current, 0, err);
        case GIT_OBJECT_BLOB:
          added = oid_set_add (&ctx->packed, &current);
          if (added < 0)
            return sp_make_error (err, ENOMEM, "list the objects");
          if (added > 0 && pack_insert (ctx, err) < 0)
            return -1;
          return 0;
        case GIT_OBJECT_TAG:
          added = oid_set_add (&ctx->packed, &current);
          if (added < 0)
            return sp_make_error (err, ENOMEM, "list the objects");
          if (added > 0 && pack_insert (ctx, err) < 0)
            return -1;
          if (sp_git_tag_target (git_odb_object_data (obj), git_odb_object_size (obj), &current) < 0)
            return malformed (err, &current, "the tag");
          break;
        default:
          return lookup_error (err, &current, from);
        }
    }
  return sp_make_error (err, 0, "%s: tags nest more than %d deep", from, SP_GIT_SYMREF_MAX_DEPTH * 2);
}

/* `.git/shallow`: one commit id a line, each a commit whose parents the clone
   lacks on purpose.  */
static int
read_shallow (struct stage_ctx *ctx, int gitfd, sp_error_t *err)
{
  cleanup_free char *text = NULL;
  cleanup_close int fd = openat (gitfd, "shallow", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  size_t len = 0;

  if (fd < 0)
    return errno == ENOENT ? 0 : sp_make_error (err, errno, "open `.git/shallow`");
  if (sp_read_fd_capped (fd, SP_GIT_PACKED_REFS_MAX_BYTES, &text, &len, err) < 0)
    return sp_error_wrap (err, "read `.git/shallow`");
  for (size_t at = 0; at < len;)
    {
      const char *nl = memchr (text + at, '\n', len - at);
      size_t line = (nl ? (size_t)(nl - text) : len) - at;
      git_oid id;

      if (line != GIT_OID_HEXSZ || git_oid_fromstrn (&id, text + at, line) < 0)
        return sp_make_error (err, 0, "`.git/shallow` holds a line that is not a commit id");
      if (oid_set_add (&ctx->shallow, &id) < 0)
        return sp_make_error (err, ENOMEM, "`.git/shallow`");
      at += line + 1;
    }
  return 0;
}

static int
pack_refs (struct stage_ctx *ctx, sp_error_t *err)
{
  cleanup_git_reference_iterator git_reference_iterator *it = NULL;
  git_reference *ref;
  int ret;

  if (git_reference_iterator_new (&it, ctx->repo) < 0)
    return git_fail (err, "list the refs");
  while ((ret = git_reference_next (&ref, it)) == 0)
    {
      cleanup_git_reference git_reference *owned = ref;
      cleanup_git_reference git_reference *resolved = NULL;
      char q[SP_QUOTE_BUF_SIZE];
      char from[SP_QUOTE_BUF_SIZE + 32];

      snprintf (from, sizeof (from), "ref `%s`", sp_quote_name (git_reference_name (owned), q));
      if (git_reference_resolve (&resolved, owned) < 0)
        {
          /* A symbolic ref to nothing (an `origin/HEAD` whose branch is
             gone) reaches nothing.  */
          if (git_reference_type (owned) == GIT_REFERENCE_SYMBOLIC)
            continue;
          return git_fail (err, from);
        }
      if (pack_object (ctx, git_reference_target (resolved), from, err) < 0)
        return -1;
    }
  if (ret != GIT_ITEROVER)
    return git_fail (err, "list the refs");
  return 0;
}

/* The objects to keep, out of the set, which goes before the pack is
   written: the peak memory is the pack's plan, not both.  */
static int
take_items (struct oid_set *set, struct sp_pack_item **items, size_t *n, sp_error_t *err)
{
  size_t len = 0;

  *items = calloc (set->len ? set->len : 1, sizeof (**items));
  if (*items == NULL)
    return sp_make_error (err, ENOMEM, "list the objects");
  for (size_t i = 0; i < set->cap; i++)
    if (!git_oid_is_zero (&set->v[i]))
      (*items)[len++].id = set->v[i];
  *n = len;
  oid_set_release (set);
  return 0;
}

static int
write_pack (struct stage_ctx *ctx, int gitfd, sp_error_t *err)
{
  cleanup_close int packfd = -1;
  cleanup_free struct sp_pack_item *items = NULL;
  size_t n = 0;

  if (mkdirat (gitfd, NEW_OBJECTS, 0755) < 0)
    return sp_make_error (err, errno, "create `.git/%s`", NEW_OBJECTS);
  if (mkdirat (gitfd, NEW_OBJECTS "/pack", 0755) < 0 || mkdirat (gitfd, NEW_OBJECTS "/info", 0755) < 0)
    return sp_make_error (err, errno, "create `.git/%s`", NEW_OBJECTS);
  packfd = openat (gitfd, NEW_OBJECTS "/pack", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (packfd < 0)
    return sp_make_error (err, errno, "open `.git/%s/pack`", NEW_OBJECTS);
  oid_set_release (&ctx->shallow);
  if (take_items (&ctx->packed, &items, &n, err) < 0)
    return -1;
  return sp_pack_write (gitfd, packfd, ctx->odb, items, n, ctx->limits->progress, err);
}

/* The new store replaces the old one; the old one goes whole, loose objects,
   packs, commit-graph and all.  A clone of loose objects holds one file per
   object, so the removal is counted: it can take longer than the pack.  */
static int
swap_objects (int gitfd, struct sp_progress *progress, sp_error_t *err)
{
  if (renameat (gitfd, "objects", gitfd, OLD_OBJECTS) < 0)
    return sp_make_error (err, errno, "move `.git/objects` aside");
  if (renameat (gitfd, NEW_OBJECTS, gitfd, "objects") < 0)
    return sp_make_error (err, errno, "move the new object store into place");
  sp_progress_phase (progress, "remove the old objects", SP_PROGRESS_FILES, 0);
  if (sp_tree_remove_counted (gitfd, OLD_OBJECTS, sp_progress_count_file, progress, err) < 0)
    return sp_error_wrap (err, "remove the old object store");
  return 0;
}

static int
libgit2_open (int gitfd, git_repository **repo, sp_error_t *err)
{
  static const git_config_level_t outside[] = {
    GIT_CONFIG_LEVEL_PROGRAMDATA,
    GIT_CONFIG_LEVEL_SYSTEM,
    GIT_CONFIG_LEVEL_XDG,
    GIT_CONFIG_LEVEL_GLOBAL,
  };
  char path[64];

  /* No config but the seed's own, which staging wrote: no include, filter,
     helper or hook path can come from the host or the clone.  */
  for (size_t i = 0; i < sizeof (outside) / sizeof (outside[0]); i++)
    if (git_libgit2_opts (GIT_OPT_SET_SEARCH_PATH, outside[i], "") < 0)
      return git_fail (err, "libgit2: clear the config search path");
  if (git_libgit2_opts (GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION, 1) < 0)
    return git_fail (err, "libgit2: verify object hashes");
  /* Bounded memory whatever the history's size: libgit2 maps up to 8 GiB of
     packs and caches 256 MiB of objects by default.  Each object is read
     once here, so its object cache buys nothing (its packs keep their own
     small cache of delta bases).  */
  if (git_libgit2_opts (GIT_OPT_SET_MWINDOW_SIZE, (size_t)SP_GIT_MWINDOW_BYTES) < 0
      || git_libgit2_opts (GIT_OPT_SET_MWINDOW_MAPPED_LIMIT, (size_t)SP_GIT_MWINDOW_MAPPED_BYTES) < 0
      || git_libgit2_opts (GIT_OPT_ENABLE_CACHING, 0) < 0)
    return git_fail (err, "libgit2: bound its memory");
  snprintf (path, sizeof (path), "/proc/self/fd/%d", gitfd);
  if (git_repository_open_ext (
          repo, path,
          GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_BARE | GIT_REPOSITORY_OPEN_NO_DOTGIT, NULL)
      < 0)
    return git_fail (err, "open `.git` with libgit2");
  return 0;
}

static int
stage_in_repo (struct stage_ctx *ctx, int seed_dirfd, int gitfd, const git_oid *head, sp_error_t *err)
{
  cleanup_git_commit git_commit *commit = NULL;
  cleanup_git_tree git_tree *tree = NULL;
  cleanup_git_refdb git_refdb *refdb = NULL;
  int ret;

  if (git_repository_odb (&ctx->odb, ctx->repo) < 0)
    return git_fail (err, "libgit2: the object database");
  if (git_commit_lookup (&commit, ctx->repo, head) < 0)
    return lookup_error (err, head, "HEAD names the commit");
  if (git_commit_tree (&tree, commit) < 0)
    return lookup_error (err, git_commit_tree_id (commit), "read HEAD's tree");

  ctx->path[0] = '\0';
  sp_progress_phase (ctx->limits->progress, "write the tree", SP_PROGRESS_TREE, 0);
  if (write_tree (ctx, tree, seed_dirfd, 0, 0, err) < 0 || reject_declared_submodules (ctx, err) < 0)
    return sp_error_wrap (err, "write the commit's tree");
  sp_progress_phase (ctx->limits->progress, "write the index", SP_PROGRESS_STEP, 0);
  if (replace_index (gitfd, tree, err) < 0 || sp_progress_check (ctx->limits->progress, err) < 0)
    return -1;

  /* The stash records uncommitted work; no stash is fine.  */
  ret = git_reference_remove (ctx->repo, "refs/stash");
  if (ret < 0 && ret != GIT_ENOTFOUND)
    return git_fail (err, "drop `refs/stash`");
  if (read_shallow (ctx, gitfd, err) < 0)
    return -1;
  /* From here every object read is hashed by our own code (read_checked,
     the pack writer and its check): libgit2 need not hash it again.  */
  if (git_libgit2_opts (GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION, 0) < 0)
    return git_fail (err, "libgit2: hash objects as the walk reads them");
  sp_progress_phase (ctx->limits->progress, "list the objects", SP_PROGRESS_OBJECTS, 0);
  if (pack_object (ctx, head, "HEAD", err) < 0 || pack_refs (ctx, err) < 0)
    return sp_error_wrap (err, "collect the objects to keep");
  /* One form for every ref (packed), and no stale list of them: a clone
     that `git gc` packed and one it did not give the same seed.  */
  if (git_repository_refdb (&refdb, ctx->repo) < 0 || git_refdb_compress (refdb) < 0)
    return git_fail (err, "pack the refs");
  if (unlinkat (gitfd, "info/refs", 0) < 0 && errno != ENOENT)
    return sp_make_error (err, errno, "remove `.git/info/refs`");
  return write_pack (ctx, gitfd, err);
}

static void
stage_ctx_release (struct stage_ctx *ctx)
{
  git_odb_free (ctx->odb);
  git_repository_free (ctx->repo);
  oid_set_release (&ctx->packed);
  oid_set_release (&ctx->shallow);
}
#define cleanup_stage_ctx __attribute__ ((cleanup (stage_ctx_release)))

/* Everything libgit2 does, between its init and its shutdown.  */
static int
stage_with_libgit2 (int seed_dirfd, int gitfd, const git_oid *head, const struct sp_copy_options *limits,
                    struct sp_git_submodules *sub, sp_error_t *err)
{
  cleanup_stage_ctx struct stage_ctx ctx = { .limits = limits, .sub = sub };

  if (libgit2_open (gitfd, &ctx.repo, err) < 0)
    return -1;
  return stage_in_repo (&ctx, seed_dirfd, gitfd, head, err);
}

/* ---- uncommitted changes in the clone, counted, never staged ---- */

static int
count_blob (const char *root, const git_tree_entry *e, void *payload)
{
  size_t *n = payload;

  (void)root;
  if (git_tree_entry_type (e) != GIT_OBJECT_TREE)
    (*n)++;
  return 0;
}

/* Above this, a file whose stat data differs from the index is counted as
   changed without reading it: a warning may err on the side of saying.  */
#define CONTENT_CHECK_MAX_BYTES (64u << 20)

/* Whether the content at fd (the O_PATH fd of the entry, whose lstat is st)
   hashes to the blob the index recorded: the link's target for a symlink,
   the bytes for a file, read through a fresh descriptor of the same inode.
   Filters (CRLF, LFS) are not applied, so a filtered file can seem changed.  */
static bool
content_matches (int fd, const struct stat *st, const git_index_entry *e)
{
  cleanup_free char *data = NULL;
  cleanup_close int rfd = -1;
  struct stat again;
  char proc[64];
  size_t len = 0;
  git_oid oid;

  if (st->st_size < 0 || (uint64_t)st->st_size > CONTENT_CHECK_MAX_BYTES
      || (data = malloc ((size_t)st->st_size + 1)) == NULL)
    return false;
  if (S_ISLNK (st->st_mode))
    {
      ssize_t n = readlinkat (fd, "", data, (size_t)st->st_size + 1);

      if (n < 0 || (size_t)n > (size_t)st->st_size)
        return false;
      len = (size_t)n;
    }
  else
    {
      /* Reopened by the O_PATH fd, so never another path's file; checked to
         be the same inode; O_NONBLOCK, so that nothing can hold it.  */
      snprintf (proc, sizeof (proc), "/proc/self/fd/%d", fd);
      rfd = open (proc, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
      if (rfd < 0 || fstat (rfd, &again) < 0 || again.st_dev != st->st_dev || again.st_ino != st->st_ino)
        return false;
      while (len <= (size_t)st->st_size)
        {
          ssize_t n = read (rfd, data + len, (size_t)st->st_size + 1 - len);

          if (n < 0 && errno == EINTR)
            continue;
          if (n < 0)
            return false;
          if (n == 0)
            break;
          len += (size_t)n;
        }
      if (len != (size_t)st->st_size)
        return false;
    }
  return git_odb_hash (&oid, data, len, GIT_OBJECT_BLOB) == 0 && git_oid_equal (&oid, &e->id);
}

/* Whether the working tree's entry at path differs from what the index
   recorded of it.  As git does: first the stat data (type, size, whole-
   second modification time); where that differs, the content decides,
   since a file written in the same second as the index is "racily clean"
   (git zeroes its size in the index) and only its content tells.  */
static bool
worktree_differs (int clone_dirfd, const git_index_entry *e)
{
  cleanup_close int fd = -1;
  struct stat st;
  bool is_link = (e->mode & 0170000) == 0120000;

  /* Never a path that leaves the clone, by its name or through a symlinked
     directory: the clone's tree is the repository's, not ours.  */
  fd = sp_open_beneath (clone_dirfd, e->path, O_PATH | O_NOFOLLOW);
  if (fd < 0)
    return errno != EXDEV; /* deleted, or no longer reachable by its name */
  if (fstat (fd, &st) < 0)
    return true;
  if (is_link ? !S_ISLNK (st.st_mode) : !S_ISREG (st.st_mode))
    return true;
  /* Whole seconds, as git compares them (it is built without USE_NSEC).  */
  if (e->file_size == (uint32_t)st.st_size && e->mtime.seconds == (int32_t)st.st_mtim.tv_sec)
    return false;
  return !content_matches (fd, &st, e);
}

static int
count_uncommitted (int clone_dirfd, int gitfd, const git_oid *head, size_t *changed, sp_error_t *err)
{
  cleanup_git_repository git_repository *repo = NULL;
  cleanup_git_commit git_commit *commit = NULL;
  cleanup_git_tree git_tree *tree = NULL;
  cleanup_git_index git_index *index = NULL;
  size_t in_tree = 0, found = 0, n;
  const char *last_conflict = NULL;
  char path[64];

  if (faccessat (gitfd, "index", F_OK, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : sp_make_error (err, errno, "look for `.git/index`");
  if (libgit2_open (gitfd, &repo, err) < 0)
    return -1;
  if (git_commit_lookup (&commit, repo, head) < 0)
    return lookup_error (err, head, "HEAD names the commit");
  if (git_commit_tree (&tree, commit) < 0)
    return lookup_error (err, git_commit_tree_id (commit), "read HEAD's tree");
  if (git_tree_walk (tree, GIT_TREEWALK_PRE, count_blob, &in_tree) < 0)
    return git_fail (err, "walk HEAD's tree");
  snprintf (path, sizeof (path), "/proc/self/fd/%d/index", gitfd);
  if (git_index_open (&index, path) < 0)
    return git_fail (err, "read `.git/index`");
  n = git_index_entrycount (index);
  for (size_t i = 0; i < n; i++)
    {
      const git_index_entry *e = git_index_get_byindex (index, i);
      cleanup_git_tree_entry git_tree_entry *te = NULL;

      if (e == NULL)
        continue;
      if (GIT_INDEX_ENTRY_STAGE (e) != 0)
        {
          /* A conflict: one change, however many stages it has.  */
          if (last_conflict == NULL || strcmp (last_conflict, e->path) != 0)
            (*changed)++;
          last_conflict = e->path;
          continue;
        }
      if (git_tree_entry_bypath (&te, tree, e->path) < 0)
        {
          (*changed)++; /* added, never committed */
          continue;
        }
      found++;
      if (!git_oid_equal (git_tree_entry_id (te), &e->id)
          || (uint32_t)git_tree_entry_filemode (te) != e->mode)
        (*changed)++; /* added, never committed */
      else if ((e->mode & 0170000) != 0160000 && !(e->flags_extended & GIT_INDEX_ENTRY_SKIP_WORKTREE)
               && worktree_differs (clone_dirfd, e))
        (*changed)++; /* changed on disk, never added */
    }
  /* Removed from the index, never committed.  */
  if (in_tree > found)
    *changed += in_tree - found;
  return 0;
}

int
sp_git_count_uncommitted (int clone_dirfd, int seed_dirfd, const char *commit, size_t *changed,
                          sp_error_t *err)
{
  cleanup_close int gitfd = -1;
  git_oid head;
  int ret;

  *changed = 0;
  if (strlen (commit) != GIT_OID_HEXSZ || git_oid_fromstr (&head, commit) < 0)
    return 0; /* sp_git_stage_commit refuses it, saying why */
  gitfd = openat (seed_dirfd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (gitfd < 0)
    return sp_make_error (err, errno, "open `.git`");
  if (git_libgit2_init () < 0)
    return git_fail (err, "libgit2: init");
  ret = count_uncommitted (clone_dirfd, gitfd, &head, changed, err);
  git_libgit2_shutdown ();
  return ret;
}

int
sp_git_stage_commit (int seed_dirfd, const char *commit, const struct sp_copy_options *limits,
                     struct sp_git_submodules *sub, sp_error_t *err)
{
  cleanup_close int gitfd = -1;
  git_oid head;
  int ret;

  if (strlen (commit) != GIT_OID_HEXSZ)
    return sp_make_error (err, 0,
                          "the clone uses SHA-256 object ids, which staging cannot read yet (libgit2 %d.%d "
                          "reads SHA-1 only): refused",
                          LIBGIT2_VER_MAJOR, LIBGIT2_VER_MINOR);
  if (git_oid_fromstr (&head, commit) < 0)
    return git_fail (err, "HEAD's commit id");
  gitfd = openat (seed_dirfd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (gitfd < 0)
    return sp_make_error (err, errno, "open `.git`");
  if (git_libgit2_init () < 0)
    return git_fail (err, "libgit2: init");
  ret = stage_with_libgit2 (seed_dirfd, gitfd, &head, limits, sub, err);
  git_libgit2_shutdown ();
  if (ret < 0)
    return -1;
  /* libgit2 is done with the old store: swap the new one in.  */
  return swap_objects (gitfd, limits->progress, err);
}

int
sp_git_copy_gitdir (int clone_dirfd, int seed_dirfd, const struct sp_copy_options *limits,
                    struct sp_git_submodules *sub, sp_error_t *err)
{
  cleanup_close int src = sp_git_dir_open (clone_dirfd, err);
  cleanup_close int dst = -1;
  struct sp_copy_options without_modules = *limits;
  struct stat st;

  if (src < 0)
    return -1;
  /* The submodules' repositories: skipped by the copy, not copied then
     removed, so nothing of them is ever read or lands in the seed.  Only
     their presence is noted, for the reject policy.  */
  without_modules.skip_top = "modules";
  if (fstatat (src, "modules", &st, AT_SYMLINK_NOFOLLOW) == 0)
    sub->modules_dir = true;
  else if (errno != ENOENT)
    return sp_make_error (err, errno, "look for `.git/modules`");
  if (mkdirat (seed_dirfd, ".git", 0700) < 0)
    return sp_make_error (err, errno, "create the seed's `.git`");
  dst = openat (seed_dirfd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dst < 0)
    return sp_make_error (err, errno, "open the seed's `.git`");
  sp_progress_phase (limits->progress, "copy the git directory", SP_PROGRESS_FILES, 0);
  if (sp_tree_copy (src, dst, &without_modules, 0, 0, err) < 0)
    {
      /* `git clone` of a local path hardlinks the objects by default.  */
      if ((*err)->status == EMLINK)
        sp_error_hint (err, "clone it again with `git clone --no-hardlinks`");
      return sp_error_wrap (err, "copy `.git`");
    }
  return 0;
}
