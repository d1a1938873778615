/* Shared plumbing of the rootfs tests: a scratch directory per test, .deb
   files crafted in the test with libarchive (an ar archive of debian-binary,
   control.tar.xz and data.tar.xz), a lock pinning them, and builds through
   the library.  */
#ifndef SP_ROOTFS_FIXTURE_H
#define SP_ROOTFS_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

#include "base/sha256.h"

/* One data.tar member.  type: 'f' regular file (data = content), 'd'
   directory, 'l' symlink (data = target), 'h' hardlink (data = target),
   'c' character device, 'b' block device, 'p' FIFO.  mode 0 means 0644 for
   files and 0755 for directories.  */
struct fx_member
{
  char type;
  const char *path;
  const char *data;
  unsigned mode;
};

struct fx_deb_options
{
  const char *debian_binary; /* NULL: "2.0\n" */
  const char *data_name;     /* NULL: "data.tar.xz" */
  bool member_after_data;    /* append an extra ar member */
  bool garbage;              /* write bytes that are no ar archive at all */
  size_t truncate_to;        /* 0: whole; else keep only this many bytes */
  size_t truncate_by;        /* 0: whole; else drop this many bytes from the end */
  bool wrong_sha;            /* pin a sha256 that is not the file's */
};

struct fx_env
{
  char dir[64];    /* the scratch directory */
  char debs[96];   /* dir/debs */
  char lock[96];   /* dir/rootfs.lock */
  char out[96];    /* dir/out, the build output */
  char *lock_text; /* the lock being assembled */
  char *error;     /* the last build's error message, or NULL */
  char digest[SP_DIGEST_TEXT_SIZE];
  unsigned build_flags; /* sp_rootfs_build's; fx_setup sets SP_ROOTFS_BUILD_NO_PYC */
};

extern struct fx_env fx;

/* A checked fixture pair: a fresh scratch directory in fx for every test.  */
void fx_setup (void);
void fx_teardown (void);

/* Writes fx.debs/NAME_1.0_amd64.deb from members and pins it in the lock.  */
void fx_add_package (const char *name, const struct fx_member *members, size_t count,
                     const struct fx_deb_options *options);

/* Writes the lock and builds fx.out (or out, when not NULL).  Returns true on
   success; otherwise fx.error holds the message.  */
bool fx_build_into (const char *out);
#define fx_build() fx_build_into (NULL)

/* True when fx.error contains needle; prints the message otherwise.  */
bool fx_error_has (const char *needle);

/* The names in directory path, sorted and joined with ' ' (malloc'd).  */
char *fx_list_dir (const char *path);

/* Writes text to path (mode 0644), replacing it.  */
void fx_write_file (const char *path, const char *text);

/* Runs argv, capturing stdout and stderr (malloc'd) and the exit status.  */
int fx_run (char *const argv[], char **out, char **err);

/* The real builds' .deb cache: $SP_DEB_CACHE, default FX_DEFAULT_DEB_CACHE.  */
#define FX_DEFAULT_DEB_CACHE "/var/cache/sealed-probe/debs"
const char *fx_deb_cache (void);

/* NULL when every .deb lock_path pins is in the cache; else why not, in
   words that say how to fix it (allocated).  */
char *fx_missing_deb (const char *lock_path);

#endif
