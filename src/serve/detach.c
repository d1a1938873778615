/* serve leaves the host's network and mount propagation before it does
   anything on behalf of an agent: see serve.h.  */
#define _GNU_SOURCE
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sealed-probe/cleanup.h>

#include "serve.h"

/* A new network namespace has `lo` down; bring it up so that the proxy's own
   loopback works, and nothing else exists to reach.  */
static int
loopback_up (sp_error_t *err)
{
  cleanup_close int fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq ifr;

  if (fd < 0)
    return sp_make_error (err, errno, "loopback: socket");
  memset (&ifr, 0, sizeof (ifr));
  strcpy (ifr.ifr_name, "lo");
  if (ioctl (fd, SIOCGIFFLAGS, &ifr) < 0)
    return sp_make_error (err, errno, "loopback: read its flags");
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (ioctl (fd, SIOCSIFFLAGS, &ifr) < 0)
    return sp_make_error (err, errno, "loopback: bring it up");
  return 0;
}

int
sp_serve_detach (sp_error_t *err)
{
  if (unshare (CLONE_NEWNET) < 0)
    return sp_make_error (err, errno, "unshare a network namespace");
  if (loopback_up (err) < 0)
    return -1;
  /* The per-invocation tmpfs and overlay mounts live in this namespace only:
     the host never sees them, and they go when the proxy's last process
     does.  Slave, so that seeds staged later still show up here.  */
  if (unshare (CLONE_NEWNS) < 0)
    return sp_make_error (err, errno, "unshare a mount namespace");
  if (mount (NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
    return sp_make_error (err, errno, "make the mount namespace a slave of the host's");
  return 0;
}
