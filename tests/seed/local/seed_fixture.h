/* Fixtures the local-clone tests share: a scratch directory from mkdtemp,
   files written relative to directory fds, a search of every file of a tree
   for a string, and the git CLI for fixture repositories (the tests may run
   git; the product never does).  */
#ifndef SP_SEED_FIXTURE_H
#define SP_SEED_FIXTURE_H

#include <stdbool.h>
#include <sys/types.h>

/* The scratch directory of the running test, and an O_PATH-free fd on it.  */
extern char fx_dir[64];
extern int fx_fd;

void fx_setup (void);
void fx_teardown (void);

/* Creates dirfd/path and its missing parents (0755); returns an fd on it.  */
int fx_mkdirs (int dirfd, const char *path);
/* Writes dirfd/path (parents created) with content and then mode.  */
void fx_put (int dirfd, const char *path, const char *content, mode_t mode);
/* Appends content to dirfd/path.  */
void fx_append (int dirfd, const char *path, const char *content);
/* The content of dirfd/path, NUL-terminated (free it), or NULL.  */
char *fx_read (int dirfd, const char *path);
/* Whether any regular file below root (an absolute path) holds needle,
   ignoring ASCII case when nocase.  Symlinks are not followed.  On a hit,
   the file's path goes to where (when not NULL, PATH_MAX bytes).  */
bool fx_tree_holds (const char *root, const char *needle, bool nocase, char *where);
/* How many entries are below root.  */
int fx_count_entries (const char *root);

/* Runs a shell command built from fmt; returns its exit status.  */
int fx_sh (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
bool fx_have_git (void);
/* A real repository at fx_dir/name with one commit on main; object_format is
   "sha1" or "sha256".  Returns an fd on its top directory.  */
int fx_git_repo (const char *name, const char *object_format);
/* `git rev-parse HEAD` of fx_dir/name into out (65 bytes).  */
void fx_git_head (const char *name, char *out);

#endif
