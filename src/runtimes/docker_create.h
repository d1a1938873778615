/* The Docker backend's container-create body (docs/runtimes.md,
   "Docker"), mapped field by field from the generated bundle
   (docker_create.c).  Private to runtimes/.  */
#ifndef SP_RUNTIMES_DOCKER_CREATE_H
#define SP_RUNTIMES_DOCKER_CREATE_H

#include <stdbool.h>

#include "base/error.h"
#include "text/json.h"

#define DOCKER_LABEL_RUN "org.sealed-probe.run"
/* Which state directory's proxy a container belongs to: orphan cleanup
   never touches another proxy's containers on a shared daemon.  */
#define DOCKER_LABEL_STATE   "org.sealed-probe.state"
#define DOCKER_CGROUP_PARENT "/sealed-probe"

/* What the container has at /sys/fs/cgroup instead of Docker's cgroup
   hierarchies: an empty, read-only tmpfs (docker_create.c).  */
#define DOCKER_CGROUP_MOUNT         "/sys/fs/cgroup"
#define DOCKER_CGROUP_MOUNT_OPTIONS "ro,nosuid,nodev,noexec,mode=555,size=4k,nr_inodes=16"

/* The wrapper the container runs (docker_wrapper_args): fds 1 and 2 to
   /dev/null, then execve of the bundle's argv with exactly its env.
   argv[1] is the count of variables, then the variables, then the argv.  */
#define DOCKER_WRAPPER_CODE                                                                                  \
  "import os,sys\n"                                                                                          \
  "a=sys.argv[1:];n=int(a[0]);env=a[1:1+n];argv=a[1+n:]\n"                                                   \
  "fd=os.open('/dev/null',os.O_RDWR)\n"                                                                      \
  "for i in (1,2):os.dup2(fd,i)\n"                                                                           \
  "os.execve(argv[0],argv,dict(v.split('=',1) for v in env))\n"
extern const char *const docker_wrapper_args[];

/* Where the daemon finds the proxy's files: paths under state_dir are
   shown to the daemon under daemon_state_dir.  */
struct docker_paths
{
  const char *state_dir;
  const char *daemon_state_dir;
};

/* The container-create body for the bundle config (parsed config.json of
   bundle_dir), as JSON text.  Every field of the bundle is mapped or
   refused, naming it: nothing runs weaker than the bundle says.  */
int docker_create_body (const struct sp_json *config, const char *bundle_dir, const char *image,
                        const char *state_key, const struct docker_paths *paths, char **body,
                        sp_error_t *err);

/* The fields of a create body that an inspect of the created container
   must show unchanged, as "HostConfig.Memory" paths: a daemon that
   dropped one is refused.  NULL-terminated.  */
extern const char *const docker_checked_fields[];

/* Strict equality of two JSON values (numbers by their text).  */
bool docker_json_equal (const struct sp_json *a, const struct sp_json *b);

#endif
