/* The probe's seccomp profile: seccomp/probe.json, an OCI linux.seccomp
   allowlist, embedded in the binary at build time.  Loading it parses it
   strictly, resolves every syscall name for the host architecture with
   libseccomp (an unknown name is an error, never a silent hole) and compiles
   it once to BPF, so that a profile the kernel would refuse never reaches a
   bundle.  See docs/seccomp.md.  */
#ifndef SP_SECCOMP_PROFILE_H
#define SP_SECCOMP_PROFILE_H

#include <stddef.h>

#include <yajl/yajl_gen.h>

#include "base/error.h"

struct sp_seccomp_profile;

/* Loads a profile from json[0..len).  */
int sp_seccomp_profile_load (const char *json, size_t len, struct sp_seccomp_profile **out, sp_error_t *err);

/* Loads the profile embedded from seccomp/probe.json.  */
int sp_seccomp_profile_load_builtin (struct sp_seccomp_profile **out, sp_error_t *err);

/* Emits the profile as the value of an OCI `linux.seccomp` member: g must be
   positioned where a value is expected.  Returns 0, or -1 on a yajl error.  */
int sp_seccomp_profile_gen (const struct sp_seccomp_profile *profile, yajl_gen g);

/* As sp_seccomp_profile_gen, for a runtime that ignores `errnoRet` and
   whose kernel does not implement the calls the profile answers ENOSYS
   (runsc 2022: the sentry has no clone3).  Such a rule is written as
   SCMP_ACT_ALLOW, so that the kernel's own ENOSYS reaches the probe and
   glibc falls back to clone, which the profile filters; written as
   SCMP_ACT_ERRNO it would become EPERM, and no thread could start.  The
   canary proves the ENOSYS at every start (docs/runtimes.md).  */
int sp_seccomp_profile_gen_enosys_by_kernel (const struct sp_seccomp_profile *profile, yajl_gen g);

void sp_seccomp_profile_free (struct sp_seccomp_profile *profile);

static inline void
sp_seccomp_profile_freep (struct sp_seccomp_profile **profile)
{
  sp_seccomp_profile_free (*profile);
  *profile = NULL;
}
#define cleanup_seccomp_profile __attribute__ ((cleanup (sp_seccomp_profile_freep)))

#endif
