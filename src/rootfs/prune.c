/* The prune table and the forbidden names: see prune.h.  Extraction skips a
   pruned entry (nothing is extracted and then deleted).  */
#define _GNU_SOURCE
#include "rootfs/prune.h"

#include <fnmatch.h>
#include <stddef.h>
#include <string.h>

#include "base/bounds.h"

enum prune_scope
{
  SCOPE_PATH,  /* the pattern matches the path itself */
  SCOPE_TREE,  /* the pattern matches the path or one of its ancestors */
  SCOPE_UNDER, /* the pattern matches a proper ancestor: the contents, not the directory */
};

enum prune_action
{
  KEEP,
  SKIP,
};

struct prune_rule
{
  enum prune_action action;
  enum prune_scope scope;
  const char *pattern; /* fnmatch(3) without FNM_PATHNAME: `*` also matches '/' */
};

/* First match wins, so the KEEP exceptions come before the SKIP they punch a
   hole in.  One comment per rule says why.  */
static const struct prune_rule rules[] = {
  /* Programs: the bundle runs /usr/bin/python3 and nothing else runs inside.  */
  { KEEP, SCOPE_PATH, "usr/bin/python3.11" }, /* the interpreter */
  { KEEP, SCOPE_PATH, "usr/bin/python3" },    /* the symlink the bundle's process.args names */
  { SKIP, SCOPE_UNDER, "usr/bin" },           /* py3compile, py3clean, py3versions, ... */
  { SKIP, SCOPE_TREE, "bin" },                /* no other program of any package */
  { SKIP, SCOPE_TREE, "sbin" },
  { SKIP, SCOPE_TREE, "usr/sbin" },
  { SKIP, SCOPE_TREE, "usr/games" },
  { SKIP, SCOPE_TREE, "usr/libexec" },
  { SKIP, SCOPE_TREE, "usr/local" },

  /* Configuration: only what the stdlib reads.  */
  { KEEP, SCOPE_PATH, "etc/mime.types" }, /* the mimetypes module reads it (media-types) */
  { SKIP, SCOPE_UNDER, "etc" },           /* ld.so.conf.d (no ldconfig here), python3.11/sitecustomize.py
                                             (python3 -I -S never imports it), ... */

  /* Architecture-independent data: docs, man, info, lintian overrides,
     locale, bug-report scripts, binfmts, Debian's py3compile helpers.  Python
     needs none of it.  */
  { SKIP, SCOPE_TREE, "usr/share" },

  /* Host integration that means nothing inside a container.  */
  { SKIP, SCOPE_TREE, "usr/lib/binfmt.d" }, /* binfmt_misc registration for .pyc files */
  /* glibc's iconv modules: Python's codecs never call iconv, and glibc's
     built-in converters cover the C and C.UTF-8 locales the probe runs in.  */
  { SKIP, SCOPE_TREE, "usr/lib/*-linux-gnu*/gconv" },

  /* Python: no pip, no package installation, no GUI, no test suites.  */
  { SKIP, SCOPE_TREE, "usr/lib/python3.11/ensurepip" },  /* pip's bootstrap */
  { SKIP, SCOPE_TREE, "usr/lib/python3.11/venv" },       /* exists to bootstrap pip; shell activate scripts */
  { SKIP, SCOPE_TREE, "usr/lib/python3.11/idlelib" },    /* the IDLE GUI */
  { SKIP, SCOPE_TREE, "usr/lib/python3.11/tkinter" },    /* Tk GUI; no libtk here */
  { SKIP, SCOPE_TREE, "usr/lib/python3.11/turtledemo" }, /* Tk demos */
  { SKIP, SCOPE_PATH, "usr/lib/python3.11/turtle.py" },  /* needs tkinter */
  { SKIP, SCOPE_TREE, "usr/lib/python3.11/test" },       /* regrtest and test.support */
  { SKIP, SCOPE_TREE, "usr/lib/python3.11/*/test" },     /* unittest/test, sqlite3/test, ctypes/test, ... */
  { SKIP, SCOPE_TREE, "usr/lib/python3.11/*/tests" },    /* distutils/tests, lib2to3/tests, ... */
  { SKIP, SCOPE_TREE, "usr/lib/python3.11/*/idle_test" },        /* idlelib's tests */
  { SKIP, SCOPE_TREE, "usr/lib/python3.11/__phello__" },         /* a fixture of the frozen-module tests */
  { SKIP, SCOPE_PATH, "usr/lib/python3.11/lib-dynload/_test*" }, /* C-API test modules */
  { SKIP, SCOPE_PATH, "usr/lib/python3.11/lib-dynload/_ctypes_test.*" },
  { SKIP, SCOPE_PATH, "usr/lib/python3.11/lib-dynload/_xxtestfuzz.*" },
  { SKIP, SCOPE_PATH, "usr/lib/python3.11/lib-dynload/xxlimited*" }, /* limited-API examples */
  { SKIP, SCOPE_PATH, "usr/lib/python3.11/lib-dynload/nis.*" }, /* needs libnsl2, left out of the manifest */
  /* A symlink to /etc/python3.11/sitecustomize.py, which is pruned: it would dangle.  */
  { SKIP, SCOPE_PATH, "usr/lib/python3.11/sitecustomize.py" },
};

static bool
pattern_matches (const char *pattern, const char *path, size_t len)
{
  char buf[SP_TREE_PATH_MAX];

  if (len >= sizeof (buf))
    return false;
  memcpy (buf, path, len);
  buf[len] = '\0';
  return fnmatch (pattern, buf, 0) == 0;
}

static bool
rule_matches (const struct prune_rule *rule, const char *path)
{
  size_t len = strlen (path);

  if (rule->scope != SCOPE_UNDER && pattern_matches (rule->pattern, path, len))
    return true;
  if (rule->scope == SCOPE_PATH)
    return false;
  /* Every proper ancestor: the prefixes that end before a '/'.  */
  for (size_t i = len; i-- > 0;)
    if (path[i] == '/' && pattern_matches (rule->pattern, path, i))
      return true;
  return false;
}

bool
sp_prune_skip (const char *path)
{
  for (size_t i = 0; i < sizeof (rules) / sizeof (rules[0]); i++)
    if (rule_matches (&rules[i], path))
      return rules[i].action == SKIP;
  return false;
}

struct forbidden_name
{
  const char *pattern; /* fnmatch(3) on the last path component */
  const char *why;
};

/* A kept entry with one of these names fails the build: the prune rules
   should have removed it, so its presence means a package or a rule changed.  */
static const struct forbidden_name forbidden[] = {
  { "sh", "a shell" },
  { "bash", "a shell" },
  { "rbash", "a shell" },
  { "dash", "a shell" },
  { "ash", "a shell" },
  { "ksh*", "a shell" },
  { "mksh", "a shell" },
  { "zsh", "a shell" },
  { "csh", "a shell" },
  { "tcsh", "a shell" },
  { "busybox", "a multi-call binary with a shell" },
  { "pip", "pip" },
  { "pip3", "pip" },
  { "pip3.*", "pip" },
  { "ensurepip", "pip's bootstrap" },
  { "*.whl", "a wheel (pip installs them)" },
  { "gcc", "a compiler" },
  { "gcc-*", "a compiler" },
  { "cc", "a compiler" },
  { "c++", "a compiler" },
  { "g++", "a compiler" },
  { "g++-*", "a compiler" },
  { "clang", "a compiler" },
  { "clang-*", "a compiler" },
  { "tcc", "a compiler" },
  { "perl", "perl" },
  { "perl5*", "perl" },
  { "dpkg", "a package manager" },
  { "apt", "a package manager" },
  { "apt-get", "a package manager" },
};

const char *
sp_prune_forbidden (const char *path)
{
  const char *slash = strrchr (path, '/');
  const char *name = slash ? slash + 1 : path;

  for (size_t i = 0; i < sizeof (forbidden) / sizeof (forbidden[0]); i++)
    if (fnmatch (forbidden[i].pattern, name, 0) == 0)
      return forbidden[i].why;
  return NULL;
}
