/* Inside the seccomp profile module: the parsed form, its bounds, the
   embedded copy of seccomp/probe.json and compiling to a libseccomp context.
   Shared with tests/seccomp only; the rest of the project uses
   seccomp/profile.h.  */
#ifndef SP_SECCOMP_PROFILE_INTERNAL_H
#define SP_SECCOMP_PROFILE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <seccomp.h>

#include "base/bounds.h"
#include "base/error.h"
#include "seccomp/profile.h"

enum sp_seccomp_action
{
  SP_SECCOMP_ACT_ALLOW,
  SP_SECCOMP_ACT_ERRNO,
  SP_SECCOMP_ACT_KILL_PROCESS,
};

enum sp_seccomp_op
{
  SP_SECCOMP_CMP_NE,
  SP_SECCOMP_CMP_LT,
  SP_SECCOMP_CMP_LE,
  SP_SECCOMP_CMP_EQ,
  SP_SECCOMP_CMP_GE,
  SP_SECCOMP_CMP_GT,
  SP_SECCOMP_CMP_MASKED_EQ,
};

struct sp_seccomp_arg
{
  unsigned index;     /* 0 to SP_SECCOMP_MAX_ARG_INDEX, at most once per rule */
  uint64_t value;     /* for SCMP_CMP_MASKED_EQ, the mask */
  uint64_t value_two; /* SCMP_CMP_MASKED_EQ only: the masked value; else 0 */
  enum sp_seccomp_op op;
};

struct sp_seccomp_rule
{
  char **names;
  int *numbers; /* each name resolved for the native architecture */
  size_t n_names;
  enum sp_seccomp_action action;
  uint32_t errno_ret; /* SP_SECCOMP_ACT_ERRNO only: 1 (EPERM) when not written */
  struct sp_seccomp_arg *args;
  size_t n_args; /* 0: unconditional */
};

struct sp_seccomp_profile
{
  enum sp_seccomp_action default_action; /* never ALLOW: an allowlist denies by default */
  uint32_t *arches;                      /* SCMP_ARCH_* tokens; the native one is among them */
  size_t n_arches;
  struct sp_seccomp_rule *rules;
  size_t n_rules;
};

/* seccomp/probe.json, as bytes; written by src/embed.py at build time.  */
extern const unsigned char sp_seccomp_builtin_json[];
extern const size_t sp_seccomp_builtin_json_len;

/* A fresh libseccomp filter for a loaded profile, not installed anywhere.
   The caller owns *out (seccomp_release).  The loader uses it to prove that
   a profile compiles; tests install it in a child process.  */
int sp_seccomp_profile_compile (const struct sp_seccomp_profile *profile, scmp_filter_ctx *out,
                                sp_error_t *err);

static inline void
sp_seccomp_ctx_releasep (scmp_filter_ctx *ctx)
{
  if (*ctx)
    seccomp_release (*ctx);
  *ctx = NULL;
}
#define cleanup_seccomp_ctx __attribute__ ((cleanup (sp_seccomp_ctx_releasep)))

#endif
