/* The command lines the sbx backend execs (docs/runtimes.md, "sbx"), built
   from the bundle's config.json by sbx_plan.c.  Private to runtimes/.  */
#ifndef SP_RUNTIMES_SBX_PLAN_H
#define SP_RUNTIMES_SBX_PLAN_H

#include <stddef.h>

#include "base/error.h"

/* Words of the longest command line (exec: its flags, one --env per
   variable, the probe's argv).  */
#define SBX_ARGV_MAX 48
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

#endif
