/* serve leaves the host's network and mount propagation before it does
   anything on behalf of an agent: see serve.h.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <net/if.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "bundle/bundle.h"

#include "serve/serve.h"

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

/* An unset loginuid (a service started outside any login session) can be set
   once by any process, so a probe could write one into the host's audit
   trail.  Set ours first: every sandbox inherits it, and a set loginuid
   takes CAP_AUDIT_CONTROL in the initial namespace to change.  A kernel
   without audit has no loginuid at all.  */
static int
pin_loginuid (sp_error_t *err)
{
  cleanup_close int fd = open ("/proc/self/loginuid", O_RDWR | O_CLOEXEC);
  char now[16] = { 0 };
  char ours[16];
  int len;

  if (fd < 0)
    return errno == ENOENT ? 0 : sp_make_error (err, errno, "open /proc/self/loginuid");
  if (read (fd, now, sizeof (now) - 1) < 0)
    return sp_make_error (err, errno, "read /proc/self/loginuid");
  if (strcmp (now, "4294967295") != 0)
    return 0;
  len = snprintf (ours, sizeof (ours), "%u", (unsigned)getuid ());
  if (lseek (fd, 0, SEEK_SET) < 0 || write (fd, ours, (size_t)len) != len)
    return sp_make_error (err, errno, "set the proxy's loginuid, which its sandboxes inherit");
  return 0;
}

int
sp_serve_detach (bool private_mounts, sp_error_t *err)
{
  if (pin_loginuid (err) < 0)
    return -1;
  /* A UTS namespace of its own with the sandbox's domain name: each
     sandbox's new one starts as a copy of it (bundle.h).  */
  if (unshare (CLONE_NEWUTS) < 0)
    return sp_make_error (err, errno, "unshare a UTS namespace");
  if (setdomainname (SP_BUNDLE_DOMAINNAME, strlen (SP_BUNDLE_DOMAINNAME)) < 0)
    return sp_make_error (err, errno, "set the sandboxes' domain name");
  if (unshare (CLONE_NEWNET) < 0)
    return sp_make_error (err, errno, "unshare a network namespace");
  if (loopback_up (err) < 0)
    return -1;
  /* Docker's daemon resolves bind sources in the host's mount namespace:
     there the workspaces must be (bundle.h, sp_bundle_rules.workspaces_on_host).  */
  if (!private_mounts)
    return 0;
  /* The per-invocation tmpfs and overlay mounts live in this namespace only:
     the host never sees them, and they go when the proxy's last process
     does.  Slave, so that seeds staged later still show up here.  */
  if (unshare (CLONE_NEWNS) < 0)
    return sp_make_error (err, errno, "unshare a mount namespace");
  if (mount (NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
    return sp_make_error (err, errno, "make the mount namespace a slave of the host's");
  return 0;
}
