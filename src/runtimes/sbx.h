/* The sbx backend's parts (docs/runtimes.md, "sbx"): the command lines it
   execs, built from the bundle's config.json (sbx_plan.c), and what it
   reads back from the CLI, parsed strictly (sbx_cli.c).  Private to
   runtimes/.  */
#ifndef SP_RUNTIMES_SBX_H
#define SP_RUNTIMES_SBX_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

/* A sandbox name as sbx allows it: letters, digits, '.', '+' and '-', not
   starting with '-' (it would be read as a flag) or '.'.  */
#define SBX_NAME_MAX 128
/* Words of the longest command line (exec: its flags, one --env per
   variable, the probe's argv).  */
#define SBX_ARGV_MAX 48
/* What one call may print: help texts and listings.  */
#define SBX_OUTPUT_MAX (64 * 1024)

/* One command line: owned, NULL-terminated words.  */
struct sbx_argv
{
  char *words[SBX_ARGV_MAX + 1];
  size_t n;
};

void sbx_argv_release (struct sbx_argv *a);

/* Every command line of one invocation, in the order run execs them.  */
struct sbx_plan
{
  struct sbx_argv create; /* the VM, from the template, with every limit and the three mounts */
  struct sbx_argv exec;   /* the probe, as the bundle's user, cwd, env and args */
  struct sbx_argv stop;
  struct sbx_argv rm;
  struct sbx_argv ls; /* confirms the VM is gone */
};

/* Builds the plan for VM vm_name from bundle_dir/config.json: the bundle
   stays the one source of truth, and nothing else (no request field)
   reaches a command line.  A bundle this backend cannot express exactly is
   an error, never a looser VM.  */
int sbx_plan_build (const char *binary, const char *template_ref, const char *vm_name, const char *bundle_dir,
                    struct sbx_plan *plan, sp_error_t *err);
void sbx_plan_release (struct sbx_plan *plan);

/* `ls -q`'s argv, alone (verify and the orphan sweep).  */
#define SBX_LS_WORDS(binary)                                                                                 \
  {                                                                                                          \
    (char *)(binary), (char *)"ls", (char *)"-q", NULL                                                       \
  }

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
