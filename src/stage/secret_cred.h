/* A credential from systemd's credential directory, for staging only: the
   file LoadCredential= or LoadCredentialEncrypted= puts in
   $CREDENTIALS_DIRECTORY.  The directory and the file are checked as a
   secret's should be, the value is read into one buffer that is wiped on
   every path, and no message ever holds a byte of it.  */
#ifndef SP_STAGE_SECRET_CRED_H
#define SP_STAGE_SECRET_CRED_H

#include <stddef.h>

#include "base/error.h"

#define SP_CREDENTIALS_DIRECTORY_ENV "CREDENTIALS_DIRECTORY"

/* Reads the credential name from the directory open at dirfd.  The file must
   be a regular file (a symlink is refused, never followed), owned by the
   caller's euid, with no group or other permission bit, at most max bytes
   once one trailing newline is stripped, not empty, and free of NUL and
   control bytes.  On success *secret is the value, NUL-terminated, to be
   wiped and freed with sp_secret_free.  A missing file is not an error:
   *secret stays NULL.  */
int sp_secret_cred_read_at (int dirfd, const char *name, size_t max, char **secret, sp_error_t *err);

/* The same from $CREDENTIALS_DIRECTORY.  Unset or empty: no credential,
   *secret stays NULL.  Set: it must be an absolute path naming a directory
   (not a symlink) owned by the caller's euid and writable by nobody else, as
   systemd makes it; anything else is an error.  */
int sp_secret_cred_take (const char *name, size_t max, char **secret, sp_error_t *err);

#endif
