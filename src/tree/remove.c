/* Tree removal: see src/tree/remove.h.  It works by fds and
   holds one directory open at a time: going down it opens a child by the
   name read from its parent, going back up it opens ".." and checks that it
   is the directory it came from.  So neither the length of a path nor the
   depth of the tree limits it; paths are built only for messages.  */
#define _GNU_SOURCE
#include "tree/remove.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/quote.h"
#include "os/dir_names.h"

/* One directory on the way down.  */
struct frame
{
  struct sp_dir_names names;
  size_t next; /* the next name to remove */
  dev_t dev;   /* the directory itself, to recognize it from below */
  ino_t ino;
  size_t path_len; /* its path's length in removal.path */
  bool failed;     /* something in it stays */
};

struct removal
{
  struct frame *frames;
  size_t depth;
  size_t cap;
  char *path; /* for messages only */
  size_t path_cap;
  sp_error_t first; /* the first entry that stays */
  size_t more;      /* and how many more */
  /* Called for each file removed, or NULL.  */
  void (*count) (void *ctx, uint64_t bytes);
  void *count_ctx;
};

static void
removal_release (struct removal *r)
{
  for (size_t i = 0; i < r->depth; i++)
    sp_dir_names_release (&r->frames[i].names);
  free (r->frames);
  free (r->path);
  sp_error_release (&r->first);
}
#define cleanup_removal __attribute__ ((cleanup (removal_release)))

/* Sets r->path to its first len bytes and then name: "name" at the top
   (len 0), "path/name" below it.  */
static int
set_path (struct removal *r, size_t len, const char *name, sp_error_t *err)
{
  size_t need = len + 1 + strlen (name) + 1;

  if (need > r->path_cap)
    {
      size_t cap = r->path_cap ? r->path_cap : 256;
      char *p;

      while (cap < need)
        cap *= 2;
      p = realloc (r->path, cap);
      if (p == NULL)
        return sp_make_error (err, errno, "allocate a path");
      r->path = p;
      r->path_cap = cap;
    }
  if (len > 0)
    r->path[len++] = '/';
  strcpy (r->path + len, name);
  return 0;
}

/* Notes that r->path stays: "WHAT `PATH`[: DETAIL][: strerror (status)]".
   The removal keeps going.  */
static void
note_failure (struct removal *r, int status, const char *what, const char *detail)
{
  char q[SP_QUOTE_BUF_SIZE];

  if (r->depth > 0)
    r->frames[r->depth - 1].failed = true;
  if (r->first != NULL)
    {
      r->more++;
      return;
    }
  sp_make_error (&r->first, status, "%s `%s`%s%s", what, sp_quote_name (r->path, q), detail ? ": " : "",
                 detail ? detail : "");
}

/* Unlinks a non-directory, and counts it: a removal of many files must not
   look stalled (docs/staging.md, "Progress").  */
static void
remove_file (struct removal *r, int dirfd, const char *name, const struct stat *st)
{
  if (unlinkat (dirfd, name, 0) < 0)
    {
      if (errno != ENOENT)
        note_failure (r, errno, "remove", NULL);
      return;
    }
  if (r->count != NULL)
    r->count (r->count_ctx, S_ISREG (st->st_mode) ? (uint64_t)st->st_size : 0);
}

/* Whether dirfd/name (name "": dirfd itself), a directory in a directory on
   parent_dev, has something mounted on it: the removal never enters another
   mount, and a mount point cannot be removed anyway.  */
static bool
is_mount_root (int dirfd, const char *name, dev_t parent_dev)
{
  int flags = AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | (*name == '\0' ? AT_EMPTY_PATH : 0);
  struct statx stx;
  struct stat st;

  if (statx (dirfd, name, flags, STATX_INO, &stx) == 0 && (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
    return (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
  /* Without the attribute, another filesystem still shows as one.  */
  return fstatat (dirfd, name, &st, flags) == 0 && st.st_dev != parent_dev;
}

static int
push_frame (struct removal *r, int fd, const struct stat *st, size_t path_len, sp_error_t *err)
{
  struct frame *f;

  if (r->depth == r->cap)
    {
      size_t cap = r->cap ? r->cap * 2 : 16;

      f = realloc (r->frames, cap * sizeof (*f));
      if (f == NULL)
        return sp_make_error (err, errno, "allocate the removal's stack");
      r->frames = f;
      r->cap = cap;
    }
  f = &r->frames[r->depth];
  *f = (struct frame){ .dev = st->st_dev, .ino = st->st_ino, .path_len = path_len };
  r->depth++;
  if (sp_dir_names_read (fd, &f->names, err) < 0)
    {
      /* Unlistable: what it holds stays, and so does it.  */
      note_failure (r, 0, "list", sp_error_message (*err));
      sp_error_release (err);
    }
  return 0;
}

/* Handles the next name of the top frame: removes a non-directory, or opens
   a directory and pushes it.  *cur is the top frame's fd, and becomes the
   child's.  A negative return is a failure that stops the removal.  */
static int
step_down (struct removal *r, int *cur, sp_error_t *err)
{
  struct frame *f = &r->frames[r->depth - 1];
  const char *name = f->names.v[f->next++];
  cleanup_close int child = -1;
  struct stat st, opened, here;

  if (set_path (r, f->path_len, name, err) < 0)
    return -1;
  if (fstatat (*cur, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    {
      if (errno != ENOENT)
        note_failure (r, errno, "stat", NULL);
      return 0;
    }
  if (!S_ISDIR (st.st_mode))
    {
      remove_file (r, *cur, name, &st);
      return 0;
    }
  if (fstat (*cur, &here) < 0)
    return sp_make_error (err, errno, "stat a directory being removed");
  if (is_mount_root (*cur, name, here.st_dev))
    {
      note_failure (r, 0, "remove", "something is mounted on it");
      return 0;
    }
  /* Listable and writable, so that it can be emptied; where that fails (an
     immutable directory, a read-only mount), the unlinks below say why.  */
  (void)fchmodat (*cur, name, 0700, 0);
  child = openat (*cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (child < 0)
    {
      note_failure (r, errno, "open", NULL);
      return 0;
    }
  if (fstat (child, &opened) < 0 || opened.st_dev != st.st_dev || opened.st_ino != st.st_ino)
    {
      note_failure (r, 0, "remove", "it changed during the removal");
      return 0;
    }
  if (push_frame (r, child, &opened, strlen (r->path), err) < 0)
    return -1;
  sp_closep (cur);
  *cur = get_and_reset_fd (&child);
  return 0;
}

/* The top frame is done: goes back up to its parent and removes it there.  */
static int
step_up (struct removal *r, int *cur, sp_error_t *err)
{
  struct frame *done = &r->frames[r->depth - 1];
  struct frame *parent = &r->frames[r->depth - 2];
  const char *name = parent->names.v[parent->next - 1];
  bool failed = done->failed;
  cleanup_close int up = -1;
  struct stat st;

  up = openat (*cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (up < 0)
    return sp_make_error (err, errno, "open the parent of a directory being removed");
  if (fstat (up, &st) < 0)
    return sp_make_error (err, errno, "stat the parent of a directory being removed");
  if (st.st_dev != parent->dev || st.st_ino != parent->ino)
    return sp_make_error (err, 0, "a directory moved during the removal: stopped");
  sp_closep (cur);
  *cur = get_and_reset_fd (&up);
  sp_dir_names_release (&done->names);
  r->depth--;
  if (set_path (r, parent->path_len, name, err) < 0)
    return -1;
  if (unlinkat (*cur, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    {
      /* Not empty because something in it stays: that was reported.  */
      if (failed)
        parent->failed = true;
      else
        note_failure (r, errno, "remove", NULL);
    }
  return 0;
}

/* Removes what is below fd (the directory st, whose path is r->path), one
   directory open at a time.  Takes fd.  */
static int
empty_tree (struct removal *r, int fd, const struct stat *st, sp_error_t *err)
{
  cleanup_close int cur = fd;

  if (push_frame (r, cur, st, strlen (r->path), err) < 0)
    return -1;
  while (r->depth > 0)
    {
      struct frame *f = &r->frames[r->depth - 1];
      int ret;

      if (f->next < f->names.len)
        ret = step_down (r, &cur, err);
      else if (r->depth > 1)
        ret = step_up (r, &cur, err);
      else
        {
          sp_dir_names_release (&f->names);
          r->depth--;
          ret = 0;
        }
      if (ret < 0)
        return -1;
    }
  return 0;
}

/* The removal's outcome: 0, or its first failure and how many more.  */
static int
report (struct removal *r, sp_error_t *err)
{
  if (r->first == NULL)
    return 0;
  *err = get_and_reset (&r->first);
  if (r->more > 0)
    {
      char *with_count = NULL;

      if (asprintf (&with_count, "%s (and %zu more entries could not be removed)", sp_error_message (*err),
                    r->more)
          >= 0)
        {
          free ((*err)->msg);
          (*err)->msg = with_count;
        }
    }
  return -1;
}

int
sp_tree_remove_at (int parentfd, const char *name, sp_error_t *err)
{
  return sp_tree_remove_counted (parentfd, name, NULL, NULL, err);
}

int
sp_tree_remove_counted (int parentfd, const char *name, void (*count) (void *ctx, uint64_t bytes), void *ctx,
                        sp_error_t *err)
{
  cleanup_removal struct removal r = { .count = count, .count_ctx = ctx };
  cleanup_close int top = -1;
  struct stat st, opened, parent;
  bool failed_inside;
  int fd;

  if (set_path (&r, 0, name, err) < 0)
    return -1;
  if (fstatat (parentfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    {
      if (errno == ENOENT)
        return 0;
      note_failure (&r, errno, "stat", NULL);
      return report (&r, err);
    }
  if (!S_ISDIR (st.st_mode))
    {
      remove_file (&r, parentfd, name, &st);
      return report (&r, err);
    }
  /* parentfd may be AT_FDCWD with name a path: its parent is "..".  */
  top = openat (parentfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (top < 0 || fstatat (top, "..", &parent, 0) < 0)
    {
      note_failure (&r, errno, "open", NULL);
      return report (&r, err);
    }
  if (is_mount_root (top, "", parent.st_dev))
    {
      note_failure (&r, 0, "remove", "something is mounted on it");
      return report (&r, err);
    }
  (void)fchmodat (parentfd, name, 0700, 0);
  fd = openat (parentfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    {
      note_failure (&r, errno, "open", NULL);
      return report (&r, err);
    }
  if (fstat (fd, &opened) < 0 || opened.st_dev != st.st_dev || opened.st_ino != st.st_ino)
    {
      close (fd);
      note_failure (&r, 0, "remove", "it changed during the removal");
      return report (&r, err);
    }
  if (empty_tree (&r, fd, &opened, err) < 0)
    return -1;
  failed_inside = r.first != NULL;
  if (set_path (&r, 0, name, err) < 0)
    return -1;
  if (unlinkat (parentfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && !failed_inside)
    note_failure (&r, errno, "remove", NULL);
  return report (&r, err);
}
