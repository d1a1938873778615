/* What the sbx backend reads back from the CLI, parsed strictly
   (docs/runtimes.md, "sbx"): names, listings, versions and the controls its
   help texts show (sbx_cli.c).  Private to runtimes/.  */
#ifndef SP_RUNTIMES_SBX_CLI_H
#define SP_RUNTIMES_SBX_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

/* A sandbox name as sbx allows it: letters, digits, '.', '+' and '-', not
   starting with '-' (it would be read as a flag) or '.'.  */
#define SBX_NAME_MAX 128
/* What one call may print: help texts and listings.  */
#define SBX_OUTPUT_MAX (64 * 1024)

bool sbx_name_valid (const char *s, size_t len);

/* NAME@sha256:<64 lowercase hex>: a template pinned by digest.  */
bool sbx_template_pinned (const char *ref);

/* `sbx ls -q`: one valid name per line, and nothing else.  Any other line
   (a name starting with '-', a blank, a control character) is an error
   naming its line number, never an argument to a later command.  *names is
   an allocated, NULL-terminated array of allocated strings.  */
int sbx_list_parse (const char *out, size_t len, char ***names, sp_error_t *err);
void sbx_list_free (char **names);

/* `sbx version`: exactly one line `Version: X` (leading blanks allowed, a
   leading `v` dropped).  */
int sbx_version_parse (const char *out, char *version, size_t size, sp_error_t *err);

/* The audit entry of an sbx release, or NULL for a version nobody audited.  */
struct sbx_audit
{
  const char *version;
  const char *date;    /* when it was audited */
  const char *checked; /* what was checked, and the verdict */
};
const struct sbx_audit *sbx_audited (const char *version);
/* The audited versions, comma-separated, for an error.  */
void sbx_audited_list (char *out, size_t size);

/* Appends to missing ("create --network (no network), ...") every control
   the adapter needs that the help texts do not show; returns how many.  */
unsigned sbx_controls_missing (const char *create_help, const char *exec_help, char *missing, size_t size);

#endif
