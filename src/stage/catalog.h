/* Where each configured repository's pre-provisioned local clone is: a
   catalog file of `owner/repo=/absolute/path` lines and --clone flags of the
   same form.  A repository without an entry is staged from GitHub.  See
   docs/staging.md.  */
#ifndef SP_STAGE_CATALOG_H
#define SP_STAGE_CATALOG_H

#include <stddef.h>

#include "base/error.h"
#include "text/config.h"

struct sp_catalog_entry
{
  char *repo;
  char *path;
};

struct sp_catalog
{
  struct sp_catalog_entry *entries;
  size_t n;
};

/* Adds one `owner/repo=PATH` mapping.  origin names where it came from in
   messages ("--clone", "catalog.txt:3").  The repository must be a
   normalized name that config allows, not already mapped; the path must be
   absolute.  */
int sp_catalog_add (struct sp_catalog *catalog, const struct sp_config *config, const char *spec,
                    const char *origin, sp_error_t *err);

/* Adds every line of the catalog text buf[0..len) with sp_catalog_add:
   `#` comments and blank lines are skipped, and a NUL byte anywhere is an
   error naming the catalog as name.  Entries added before an error stay in
   catalog.  */
int sp_catalog_parse (struct sp_catalog *catalog, const struct sp_config *config, const char *name,
                      const char *buf, size_t len, sp_error_t *err);

/* Reads a catalog file (at most SP_CATALOG_MAX_BYTES) and adds its lines
   with sp_catalog_parse.  */
int sp_catalog_load (struct sp_catalog *catalog, const struct sp_config *config, const char *path,
                     sp_error_t *err);

/* The clone path for repo, or NULL.  */
const char *sp_catalog_lookup (const struct sp_catalog *catalog, const char *repo);

void sp_catalog_release (struct sp_catalog *catalog);

#endif
